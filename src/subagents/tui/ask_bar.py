"""The permission prompt, docked above the input while any agent waits for an answer.

It shows the oldest waiting ask (``AskQueue.current``): which agent asks (a background child is
labelled as one), the call, why it needs approval, and how many more wait. Keys 1-4 (or the
arrows and Enter) answer: yes once, yes for this session, yes always (saved to
``.claude/settings.local.json``), no — the last asks for a reason that the model reads.
"""

from __future__ import annotations

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from subagents.tui.asks import AskQueue, Choice, PendingAsk

CHOICES: tuple[Choice, ...] = ("once", "session", "always", "deny")


class AskBar(Vertical):
    DEFAULT_CSS = """
    AskBar { height: auto; border: round $warning; padding: 0 1; display: none; }
    AskBar.-open { display: block; }
    AskBar #ask-reason { display: none; }
    AskBar.-reason #ask-reason { display: block; }
    AskBar OptionList, AskBar OptionList:focus { height: auto; border: none; padding: 0; }
    """
    BINDINGS = [
        Binding("1", "choose(0)", show=False),
        Binding("2", "choose(1)", show=False),
        Binding("3", "choose(2)", show=False),
        Binding("4", "choose(3)", show=False),
    ]

    def __init__(self, queue: AskQueue, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.queue = queue
        self.shown: PendingAsk | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="ask-question")
        yield OptionList(id="ask-options")
        yield Input(placeholder="Tell the agent why (Enter sends the denial)", id="ask-reason")

    def sync(self) -> None:
        """Show the oldest waiting ask (or hide when none)."""
        entry = self.queue.current
        if entry is self.shown:
            return
        self.shown = entry
        self.set_class(False, "-reason")
        if entry is None:
            self.set_class(False, "-open")
            self.screen.query_one("#prompt").focus()
            return
        self._show(entry)

    def _show(self, entry: PendingAsk) -> None:
        request = entry.request
        more = len(self.queue.pending) - 1
        waiting = f"  [dim](+{more} more waiting)[/]" if more > 0 else ""
        reason = f"\n[dim]{escape(request.reason)}[/]" if request.reason else ""
        self.query_one("#ask-question", Static).update(
            f"[b]{escape(entry.who)}[/] wants to use [b]{escape(request.subject)}[/]"
            f"{waiting}{reason}"
        )
        options = self.query_one("#ask-options", OptionList)
        options.clear_options()
        rule = escape(entry.rule)
        options.add_options(
            [
                Option("1. Yes", id="once"),
                Option(f"2. Yes, and don't ask again this session for {rule}", id="session"),
                Option(f"3. Yes, always: save {rule} to .claude/settings.local.json", id="always"),
                Option("4. No, and tell the agent why…", id="deny"),
            ]
        )
        options.highlighted = 0
        self.set_class(True, "-open")
        options.focus()

    def action_choose(self, index: int) -> None:
        self._choose(CHOICES[index])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._choose(CHOICES[event.option_index])

    def _choose(self, choice: Choice) -> None:
        entry = self.shown
        if entry is None:
            return
        if choice == "deny":
            self.set_class(True, "-reason")
            self.query_one("#ask-reason", Input).focus()
            return
        self.queue.answer(entry, choice)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        entry = self.shown
        if entry is not None:
            event.input.value = ""
            self.queue.answer(entry, "deny", event.value)
