"""The conversation as it scrolls by: user messages, answers, tool calls, notices.

``ChatLog`` renders one agent's events (the main agent's in the main screen, a child's in its
agent screen). The answer streams: text pieces are collected and the Markdown re-rendered at
most every 50 ms, and the finished ``assistant`` message replaces them with its exact text.
Each tool call is one collapsed line (``⏺ Bash(git status)``) that gets its result — a ``✓`` or
``✗`` and the first lines of the output, shown when expanded.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Markdown, Static

from subagents.messages import Message, tool_uses

RESULT_LINES = 30
RESULT_CHARS = 4000
_ARG_KEYS = ("command", "file_path", "pattern", "description", "path", "url", "query", "to")


def call_label(name: str, tool_input: dict[str, Any]) -> str:
    """A tool call in one line: ``Bash(git status)``, ``Agent(probe a)``."""
    for key in _ARG_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            one_line = " ".join(value.split())
            return f"{name}({one_line[:70]}{'…' if len(one_line) > 70 else ''})"
    return name


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    text = str(content or "")
    lines = text.splitlines()
    shown = "\n".join(lines[:RESULT_LINES])[:RESULT_CHARS]
    if len(lines) > RESULT_LINES or len(text) > len(shown):
        shown += f"\n… ({len(lines)} lines, {len(text)} chars)"
    return shown


class UserMessage(Static):
    DEFAULT_CSS = "UserMessage { margin: 1 0 0 0; color: $text-accent; }"

    def __init__(self, text: str) -> None:
        super().__init__(f"> {escape(text)}")


class Notice(Markdown):
    DEFAULT_CSS = "Notice { margin: 0 0 0 2; color: $text-muted; }"


class AssistantMessage(Markdown):
    """An answer; while it streams, pieces are batched into one render every 50 ms. Text that
    arrives before the widget is mounted is rendered when it is (``on_mount``)."""

    DEFAULT_CSS = "AssistantMessage { margin: 1 0 0 0; }"

    def __init__(self, text: str = "") -> None:
        super().__init__(text)
        self.text = text
        self._flush_due = False

    def on_mount(self) -> None:
        self.update(self.text)

    def add(self, piece: str) -> None:
        self.text += piece
        if not self._flush_due:
            self._flush_due = True
            self.set_timer(0.05, self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        if self.is_mounted:
            self.update(self.text)

    def finish(self, text: str) -> None:
        self.text = text
        self._flush_due = False
        if self.is_mounted:
            self.update(text)


class ToolLine(Collapsible):
    """One tool call, collapsed; its result fills in when it comes."""

    DEFAULT_CSS = """
    ToolLine { margin: 0; padding: 0; border-top: none; background: $background; }
    ToolLine > Contents { padding: 0 0 0 4; }
    ToolLine.error > CollapsibleTitle { color: $text-error; }
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.output = Static("(running…)", markup=False)
        super().__init__(self.output, title=f"⏺ {label}", collapsed=True)

    def set_result(self, text: str, *, is_error: bool) -> None:
        mark = "✗" if is_error else "✓"
        first = text.strip().splitlines()[0][:60] if text.strip() else ""
        self.title = f"{mark} {self.label}" + (f" — {first}" if first else "")
        self.output.update(text or "(no output)")
        self.set_class(is_error, "error")


class ChatLog(VerticalScroll):
    """One agent's conversation (see the module docstring)."""

    DEFAULT_CSS = "ChatLog { height: 1fr; padding: 0 1; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._answer: AssistantMessage | None = None
        self._calls: dict[str, ToolLine] = {}

    def _add(self, widget: Any) -> None:
        self.mount(widget)
        self.scroll_end(animate=False)

    def user(self, text: str) -> None:
        self._answer = None
        self._add(UserMessage(text))

    def notice(self, markdown: str) -> None:
        self._add(Notice(markdown))

    def stream(self, piece: str) -> None:
        if self._answer is None:
            self._answer = AssistantMessage()
            self._add(self._answer)
        self._answer.add(piece)
        self.scroll_end(animate=False)

    def restart_stream(self) -> None:
        """A retried model call streams its answer again: drop the partial one."""
        if self._answer is not None:
            self._answer.finish("")

    def assistant(self, message: Message) -> None:
        """A finished model message: its text (replacing what streamed) and its calls."""
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        if text.strip():
            if self._answer is None:
                self._add(AssistantMessage(text))
            else:
                self._answer.finish(text)
        elif self._answer is not None:
            self._answer.remove()
        self._answer = None
        for call in tool_uses(message):
            line = ToolLine(call_label(call["name"], call["input"]))
            self._calls[call["id"]] = line
            self._add(line)

    def tool_results(self, message: Message) -> None:
        content = message["content"]
        if isinstance(content, str):
            return
        for block in content:
            if block.get("type") != "tool_result":
                continue
            line = self._calls.pop(str(block.get("tool_use_id")), None)
            if line is not None:
                line.set_result(result_text(dict(block)), is_error=bool(block.get("is_error")))

    def interrupted(self) -> None:
        """The turn ended early: calls still waiting get no result."""
        for line in self._calls.values():
            line.set_result("interrupted", is_error=True)
        self._calls.clear()
        self._answer = None
