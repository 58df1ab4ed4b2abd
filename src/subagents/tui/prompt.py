"""The input box: several lines, Enter sends, history on Up/Down.

Enter sends the text (``PromptInput.Submitted``); Shift+Enter (where the terminal tells it
apart), Ctrl+J or a trailing backslash add a line. Up on the first line and Down on the last
walk the history of sent prompts, keeping what was being typed as the newest entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.message import Message
from textual.widgets import TextArea

NEWLINE_KEYS = frozenset({"shift+enter", "ctrl+j"})


class PromptInput(TextArea):
    DEFAULT_CSS = """
    PromptInput { height: auto; min-height: 3; max-height: 10; border: round $accent; }
    """

    @dataclass
    class Submitted(Message):
        text: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, id=id)
        self.sent: list[str] = []
        self._index: int | None = None
        self._draft = ""

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self._enter()
            return
        if event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if event.key == "up" and self.cursor_location[0] == 0 and self.sent:
            event.stop()
            event.prevent_default()
            self._walk(-1)
            return
        if event.key == "down" and self._index is not None and self._on_last_line():
            event.stop()
            event.prevent_default()
            self._walk(1)
            return
        await super()._on_key(event)

    def _on_last_line(self) -> bool:
        return self.cursor_location[0] == self.document.line_count - 1

    def _enter(self) -> None:
        text = self.text
        if text.endswith("\\"):
            self.load_text(text[:-1] + "\n")
            self.move_cursor(self.document.end)
            return
        if not text.strip():
            return
        if not self.sent or self.sent[-1] != text:
            self.sent.append(text)
        self._index = None
        self.load_text("")
        self.post_message(self.Submitted(text))

    def _walk(self, step: int) -> None:
        if self._index is None:
            self._draft = self.text
            self._index = len(self.sent)
        self._index = max(0, min(len(self.sent), self._index + step))
        if self._index == len(self.sent):
            self._index = None
            self.load_text(self._draft)
        else:
            self.load_text(self.sent[self._index])
        self.move_cursor(self.document.end)
