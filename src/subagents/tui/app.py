"""``SubagentsApp``: the interactive session's screen and its event pump.

The layout, top to bottom: the conversation (``ChatLog``), the agents panel, the permission
prompt (when an ask waits), the input box, a status line (model, permission mode, tokens, cost,
running agents, what the session is doing). Every event of the session goes through
``_on_event``: the main agent's go to the chat, every child's to the board (the panel) and to
its history (the agent screen), a background completion to the chat as it happens.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from subagents.cli.progress import AgentBoard, compaction_line, human_tokens
from subagents.events import (
    AgentRef,
    AssistantEvent,
    CompactionEvent,
    Event,
    InitEvent,
    NotificationEvent,
    ProgressEvent,
    ResultEvent,
    SystemEvent,
    ToolResultsEvent,
)
from subagents.models.pricing import cost_usd
from subagents.permissions.checker import AskCallback
from subagents.session import Session
from subagents.tui.ask_bar import AskBar
from subagents.tui.asks import AskQueue
from subagents.tui.chat import ChatLog
from subagents.tui.commands import CommandContext, parse, prompt_text, run_command
from subagents.tui.conversation import Conversation
from subagents.tui.panel import AgentScreen, AgentsPanel, panel_rows
from subagents.tui.prompt import PromptInput
from subagents.tui.replay import replay_history

SessionMaker = Callable[[str | None, AskCallback], Session]
"""(resume id or None, the UI's ask callback) → a new session."""
HISTORY_PER_AGENT = 400
QUIT_WINDOW_S = 2.0


def short_model(name: str) -> str:
    """``scripted:/long/path/script.json`` → ``scripted:script.json`` (a path is noise here)."""
    provider, sep, rest = name.partition(":")
    return f"{provider}{sep}{Path(rest).name}" if sep and "/" in rest else name


class SubagentsApp(App[int]):
    TITLE = "subagents"
    CSS = """
    Screen { layout: vertical; }
    #status { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape", "interrupt", "interrupt the turn"),
        Binding("ctrl+c", "ctrl_c", "quit (twice)", priority=True),
    ]

    def __init__(
        self,
        *,
        make_session: SessionMaker,
        project: Path,
        resume: str | None = None,
        initial_prompt: str | None = None,
        choose_model: Callable[[str], str] = lambda name: name,
        notes: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.asks = AskQueue(
            checker=lambda: self._session().permissions,
            project=project,
            on_change=self._asks_changed,
            notify=self._note,
        )
        self.conversation = Conversation(
            factory=lambda resume_id: make_session(resume_id, self.asks.ask),
            on_event=self._on_event,
            on_state=self._refresh_status,
            on_error=lambda text: self._note(f"**error:** {text}"),
        )
        self.board = AgentBoard()
        self.histories: dict[str, deque[Event]] = {}
        self.commands = CommandContext(
            conversation=self.conversation, quit=self._quit, choose_model=choose_model
        )
        self._resume = resume
        self._initial = initial_prompt
        self._notes = list(notes)
        self._ctrl_c_at = 0.0
        self._quitting = False
        self._closing = True
        """No screen to show events on: before it is composed, and while it goes away."""

    def compose(self) -> ComposeResult:
        # Kept as attributes: the app's own queries search the *active* screen, and events
        # keep coming while an agent's screen is on top.
        self.chat_log = ChatLog(id="chat")
        self.panel = AgentsPanel(id="panel")
        self.ask_bar = AskBar(self.asks, id="asks")
        self.prompt_box = PromptInput(id="prompt")
        self.status_line = Static(id="status", markup=False)
        yield self.chat_log
        yield self.panel
        yield self.ask_bar
        yield self.prompt_box
        yield self.status_line

    def _showing(self) -> bool:
        """The main screen is there to show things on (not before mount, not while exiting)."""
        return not self._closing and self.chat_log.is_attached

    def _session(self) -> Session:
        session = self.conversation.session
        assert session is not None, "the session opens when the app mounts"
        return session

    @property
    def chat(self) -> ChatLog:
        return self.chat_log

    # -- start -----------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._closing = False
        try:
            session = self.conversation.open(self._resume)
        except (ValueError, OSError) as exc:
            self.exit(2, message=f"subagents: error: {exc}")
            return
        self.board.main_id = session.session_id
        if self._resume:
            replay_history(self.chat, session)
        self.chat.notice(
            f"**subagents** · `{short_model(session.model.name)}` · {session.cwd} — "
            "`/help` for commands"
        )
        for note in self._notes:
            self.chat.notice(f"**warning:** {note}")
        self._drive()
        self.set_interval(1.0, self._tick)
        self.prompt_box.focus()
        if self._initial:
            self._send(self._initial)

    @work(exclusive=True, group="conversation")
    async def _drive(self) -> None:
        await self.conversation.run()

    # -- input -----------------------------------------------------------------------------

    def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        self._send(message.text)

    def _send(self, text: str) -> None:
        command = parse(text)
        if command is not None:
            self._command(*command)
            return
        prompt = prompt_text(text)
        self.chat.user(prompt)
        self.conversation.submit(prompt)

    @work(group="commands")
    async def _command(self, name: str, args: str) -> None:
        self.chat.user(f"/{name} {args}".rstrip())
        before = self.conversation.session
        text = await run_command(name, args, self.commands)
        if self.conversation.session is not before and self.conversation.session is not None:
            self._session_replaced(self.conversation.session, resumed=name == "resume")
        if not self._quitting:
            self.chat.notice(text)

    def _session_replaced(self, session: Session, *, resumed: bool) -> None:
        self.board = AgentBoard(main_id=session.session_id)
        self.histories.clear()
        self.chat.remove_children()
        if resumed:
            replay_history(self.chat, session)
        self._tick()

    # -- keys ------------------------------------------------------------------------------

    def action_interrupt(self) -> None:
        if self.conversation.interrupt():
            self._note("Interrupted. Background agents keep running (`/tasks`).")

    def action_ctrl_c(self) -> None:
        now = time.monotonic()
        if now - self._ctrl_c_at <= QUIT_WINDOW_S:
            self.run_worker(self._quit(), group="quit", exclusive=True)
            return
        self._ctrl_c_at = now
        self.conversation.interrupt()
        self.notify("Press Ctrl+C again to quit", timeout=QUIT_WINDOW_S)

    async def on_unmount(self) -> None:
        """However the app ends, the session is closed: no child outlives it."""
        self._closing = True
        await self.conversation.close()

    async def _quit(self) -> None:
        if self._quitting:
            return
        self._quitting = True
        self._note("Stopping agents and saving the session…")
        await self.conversation.close()
        self.exit(0)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        agent_id = str(event.row_key.value)
        row = self.board.rows.get(agent_id)
        if row is None:
            return
        title = f"{row.agent_type} {agent_id} — {row.description}  (s stop · m message · esc back)"
        self.push_screen(
            AgentScreen(
                agent_id,
                title,
                list(self.histories.get(agent_id, ())),
                stop=self._stop_from_screen,
                message=self.conversation.message_agent,
            )
        )

    @work(group="commands")
    async def _stop_from_screen(self, task_id: str) -> None:
        text = await self.conversation.stop_task(task_id)
        if isinstance(self.screen, AgentScreen):
            self.screen.note(text)

    # -- events ----------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if not self._showing():
            return
        changed = self.board.apply(event)
        if isinstance(event, ResultEvent):
            self._turn_ended(event)
        elif isinstance(event, NotificationEvent):
            self._note(f"● {event.summary} ({event.task_id})")
        elif isinstance(event, CompactionEvent):
            if event.agent.parent_agent_id is None:
                self._note(compaction_line(event))
        elif not isinstance(event, InitEvent):
            self._agent_event(event)
        if changed is not None:
            self._refresh_panel()

    def _agent_event(
        self, event: AssistantEvent | ToolResultsEvent | ProgressEvent | SystemEvent
    ) -> None:
        ref = event.agent
        if ref.parent_agent_id is not None:
            self._child_event(ref, event)
            return
        chat = self.chat
        if isinstance(event, ProgressEvent) and event.subtype == "text_delta":
            chat.stream(str(event.data.get("text", "")))
        elif isinstance(event, AssistantEvent):
            chat.assistant(event.message)
        elif isinstance(event, ToolResultsEvent):
            chat.tool_results(event.message)
        elif isinstance(event, SystemEvent):
            self._system(event)

    def _child_event(self, ref: AgentRef, event: Event) -> None:
        if not isinstance(event, (AssistantEvent, ToolResultsEvent)):
            return
        history = self.histories.setdefault(ref.agent_id, deque(maxlen=HISTORY_PER_AGENT))
        history.append(event)
        screen = self.screen
        if isinstance(screen, AgentScreen) and screen.agent_id == ref.agent_id:
            screen.show_event(event)

    def _system(self, event: SystemEvent) -> None:
        if event.subtype == "warning":
            self._note(f"**warning:** {event.data.get('message', '')}")
        elif event.subtype == "api_retry":
            self.chat.restart_stream()
            self._note(f"model call failed ({event.data.get('error')}); retrying…")
        elif event.subtype == "model_fallback":
            self._note(f"switched to the fallback model `{event.data.get('to_model')}`")

    def _turn_ended(self, event: ResultEvent) -> None:
        payload = event.payload
        self.chat.interrupted()
        if payload.get("is_error"):
            self._note(f"**{payload.get('subtype')}**: {payload.get('result')}")
        self._refresh_status()

    def _note(self, markdown: str) -> None:
        if not self._showing():
            return
        if isinstance(self.screen, AgentScreen):
            self.screen.note(markdown)
        self.chat.notice(markdown)

    def _asks_changed(self) -> None:
        if not self._showing():
            return
        self.ask_bar.sync()
        if self.asks.pending and isinstance(self.screen, AgentScreen):
            self.notify("An agent is waiting for a permission answer: Esc to go back to it")
        self._refresh_status()

    # -- panel and status ------------------------------------------------------------------

    def _tick(self) -> None:
        self._refresh_panel()
        self._refresh_status()

    def _refresh_panel(self) -> None:
        if not self._showing():
            return
        session = self.conversation.session
        if session is None:
            return
        shells = [t for t in session.registry.list() if t.type == "local_bash"]
        self.panel.show(panel_rows(self.board.rows.values(), shells))

    def _refresh_status(self) -> None:
        if not self._showing():
            return
        session = self.conversation.session
        if session is None:
            return
        usage = session.total_usage()
        cost = sum(cost_usd(run.model, run.usage) for run in session.agents)
        running = len(self.board.running())
        parts = [
            short_model(session.model.name),
            session.permissions.context.mode,
            f"{human_tokens(usage.total)} tokens",
            f"${cost:.4f}",
            f"{running} agent{'s' if running != 1 else ''} running",
            f"session {session.session_id[:8]}",
        ]
        if self.asks.pending:
            count = len(self.asks.pending)
            parts.append(f"{count} ask{'s' if count != 1 else ''} waiting")
        elif self.conversation.busy:
            parts.append("● working (esc to interrupt)")
        if self.conversation.queued:
            parts.append(f"{len(self.conversation.queued)} queued")
        self.status_line.update(" · ".join(parts))
