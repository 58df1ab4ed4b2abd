"""What a session is made of, and how its main agent opens.

``SessionCore`` builds the parts (runtime, settings, permissions, hooks, MCP servers, the
background managers and stores, telemetry) from ``SessionOptions``, and opens the main agent
at the first turn: its tools, prompt, frame and context, crash recovery of earlier runs, the
stop-request poller. ``session.Session`` adds the conversation on top: turns, the public API,
compaction and the end.
"""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from subagents import session_tools
from subagents.abort import AbortSignal
from subagents.agents import recovery
from subagents.agents.agent_run import AgentFrame, AgentJob, AgentRun
from subagents.agents.heartbeat import first_beat, with_heartbeat
from subagents.agents.mcp_scope import reap_session_servers
from subagents.agents.project_context import load_project_context
from subagents.agents.prompts import read_prompt_file
from subagents.agents.runtime import AgentRuntime
from subagents.agents.services import SessionServices
from subagents.agents.task_service import AgentTasks
from subagents.agents.verification import install_verification
from subagents.config import RuntimeConfig
from subagents.events import (
    AgentRef,
    Event,
    EventSink,
    ProgressEvent,
    discard,
)
from subagents.gc_heap import freeze_import_heap, is_frozen, tune_collector
from subagents.loop.inbox import Inbox
from subagents.messages import Message, Usage
from subagents.models.base import Model
from subagents.models.pricing import price_for
from subagents.models.retry import ModelCaller, RetryPolicy
from subagents.observe import Observation
from subagents.session_background import background_parts
from subagents.session_options import SessionOptions
from subagents.session_result import total_usage
from subagents.session_setup import (
    session_definitions,
    session_hooks,
    session_mcp,
    session_permissions,
    session_settings,
    session_telemetry,
    watch_definitions,
)
from subagents.session_turns import (
    STRUCTURED_OUTPUT_NOTE,
    MainAgent,
    session_id_for,
)
from subagents.session_watch import BudgetWatch, WarningLog
from subagents.state import ProjectState, canonical_project, ensure_private_dir
from subagents.store import session_lock
from subagents.tools.base import Tool, ToolContext
from subagents.tools.structured_output import StructuredOutputTool
from subagents.tools.todo import TodoBoard

if TYPE_CHECKING:
    from subagents.agents.teams.host import TeamHost


class SessionCore:
    """The parts of one session and its main agent (``Session`` is the public class)."""

    def __new__(cls, options: SessionOptions) -> Self:
        # The heap is frozen here, before the session exists (``gc_heap``): a frozen object is
        # never collected, and a session is a cycle (runtime, contexts, bound methods), so the
        # first session of a process, frozen from ``__init__``, outlived every reference to it.
        if not is_frozen():
            config = options.config or RuntimeConfig.from_env()
            if config.freeze_import_heap:
                freeze_import_heap()
        return super().__new__(cls)

    def __init__(self, options: SessionOptions) -> None:
        self.options = options
        self.config = options.config or RuntimeConfig.from_env()
        if self.config.gc_thresholds is not None:
            tune_collector(self.config.gc_thresholds)
        price_for("")  # a malformed SUBAGENTS_PRICES fails here, naming it, not mid-run
        self.cwd = canonical_project(options.cwd)
        self.state = ProjectState.for_cwd(self.cwd, options.home)
        if options.system_prompt is not None and options.system_prompt_file is not None:
            raise ValueError("system_prompt and system_prompt_file exclude each other: give one")
        self.custom_prompt = options.system_prompt
        if options.system_prompt_file is not None:
            self.custom_prompt = read_prompt_file(options.system_prompt_file)
        self.session_id = session_id_for(options.session_id, options.resume, options.fork_session)
        self.model = resolved_model(options.model)
        self.fallback = resolved_model(options.fallback_model) if options.fallback_model else None
        self.abort = AbortSignal()
        """The session's signal: aborting it ends the running turn and every later one."""
        self._turn_abort: AbortSignal | None = None
        self._main: MainAgent | None = None
        self._closed = False
        self._held = False
        self._turn_running = False
        self._lock: weakref.finalize[[int | None], SessionCore] | None = None
        """This process runs the session: ``sessions/<id>.lock`` held shared (``session_lock``);
        calling it lets go. A finalizer, so a held session dropped without ``close`` lets go
        when it is collected rather than at the process's exit."""
        self._observation: Observation | None = None
        self.emit: EventSink = discard
        self._warnings = WarningLog(ref=AgentRef(agent_id=self.session_id, agent_type="main"))
        self.warnings = self._warnings.messages
        """Every warning of the session (settings, hooks, definitions, permission rules), in
        order; the CLI shows each in its output format and ``json`` lists them."""
        self.inbox = Inbox()
        self.runtime = AgentRuntime(
            session_id=self.session_id,
            cwd=self.cwd,
            state=self.state,
            config=self.config,
            definitions=options.definitions
            or session_definitions(options, self.cwd, self.state, self.warn),
            provider_model=self.model,
            retry=options.retry or RetryPolicy.from_env(),
            fallback=self.fallback,
            transcripts=options.transcripts,
        )
        self.settings = session_settings(options, self.cwd, self.state)
        for warning in self.settings.warnings:
            self.warn(warning)
        extra_dirs = [*options.additional_dirs, *self.settings.additional_directories]
        self._extra_roots = [self.cwd, *(canonical_project(d) for d in extra_dirs)]
        """File-tool roots until the main agent starts (then its context holds them)."""
        self.permissions = session_permissions(options, self.settings, self.cwd, self.warn)
        self.runtime.permissions = self.permissions
        self.runtime.hooks = session_hooks(
            options,
            self.settings,
            self.runtime.definitions,
            session_id=self.session_id,
            transcript=self.state.session_transcript(self.session_id),
            cwd=self.cwd,
            warn=self.warn,
        )
        self.observer = options.observer or session_telemetry(self.config, self.warn)
        self.runtime.observer = self.observer
        self.runtime.mcp = session_mcp(
            options,
            self.settings,
            cwd=self.cwd,
            state=self.state,
            session_id=self.session_id,
            warn=self.warn,
        )
        self.verification = install_verification(self.runtime, self.inbox)
        self.todos = TodoBoard()
        self.runtime.on_child_done.append(lambda run: self.todos.clear(run.agent_id))
        self._parts = background_parts(
            options,
            self.runtime,
            state=self.state,
            inbox=self.inbox,
            session_id=self.session_id,
            cwd=self.cwd,
        )
        self.registry = self._parts.registry
        self.background = self._parts.children
        self.shells = self._parts.shells
        self.writer = self._parts.writer
        self.store = self._parts.store
        limit = options.max_budget_usd
        self._budget = None
        if limit is not None:
            turn = self._current_turn
            self._budget = BudgetWatch(limit=limit, registry=self.registry, turn_abort=turn)
        # Teams are opt-in (SUBAGENTS_AGENT_TEAMS=1): without them no team module is imported.
        self.teams = self._team_host() if self.config.agent_teams else None
        self.services = SessionServices(
            runtime=self.runtime,
            children=self.background,
            task_service=AgentTasks(self.background, self.registry),
            shells=self.shells,
            teams=self.teams,
        )

    def _team_host(self) -> TeamHost:
        from subagents.session_teams import team_host

        return team_host(
            self.options,
            config=self.config,
            state=self.state,
            store=self.store,
            inbox=self.inbox,
            hooks=self.runtime.hooks,
            permissions=self.permissions,
            session_id=self.session_id,
        )

    def _current_turn(self) -> AbortSignal | None:
        return self._turn_abort

    def warn(self, message: str) -> None:
        """Record a warning for the user; once the run has started it is also emitted at once
        as a ``system``/``warning`` event (earlier ones are emitted right after ``init``)."""
        self._warnings.add(message, self.emit)

    @property
    def agents(self) -> list[AgentRun]:
        """Every agent run of this session, the main agent first."""
        return self.runtime.agents

    def _set_sink(self, sink: EventSink) -> None:
        if self.observer is not None:
            sink = _tee(sink, self.observer.event)
        if self._budget is not None:
            sink = self._budget.wrap(sink)
        self.emit = sink
        self.runtime.sink = sink

    def _forward(self, event: Event) -> None:
        self.emit(event)

    def main_tools(self) -> list[Tool[Any]]:
        return session_tools.main_tools(
            self.options,
            self.runtime,
            todos=self.todos,
            session_id=self.session_id,
            teams=self.teams is not None,
        )

    def _system_prompt(self) -> str:
        return session_tools.system_prompt(
            self.options, self.runtime, cwd=self.cwd, model=self.model, custom=self.custom_prompt
        )

    async def _open_main(self) -> MainAgent:
        """The first turn sets the session up: the main agent's tools, prompt and context,
        crash recovery of earlier runs, the stop-request poller."""
        self._hold_session_lock()  # first: a session being compacted starts nothing
        if self.observer is not None:
            # The session span covers every turn; ``close`` ends it.
            self._observation = self.observer.session_started(self.session_id, self.model.name)
        await self._start_mcp()
        tools = self.main_tools()
        if self.options.json_schema is not None:
            tools.append(StructuredOutputTool(self.options.json_schema))
        names = [t.name for t in tools]
        ref = AgentRef(agent_id=self.session_id, agent_type="main")
        run = AgentRun(ref=ref, prompt="", model=self.model.name)
        self.runtime.register(run)
        self.runtime.project_context = await load_project_context(self.cwd, warn=self.warn)
        roots = tuple(self._extra_roots)
        system = self._system_prompt()
        if self.options.json_schema is not None:
            system = f"{system}\n\n{STRUCTURED_OUTPUT_NOTE}".lstrip()
        await first_beat(self.store)  # before recovery and any record of ours (heartbeat.py)
        await recovery.reconcile_orphans(self.store, self.state, hooks=self.runtime.hooks)
        if self.options.definitions is None:  # loaded from disk: they follow their files
            self.runtime.definitions_watch = watch_definitions(
                self.options, self.runtime, cwd=self.cwd, state=self.state, warn=self.warn
            )
        reminders = session_tools.first_reminders(self.runtime, names, custom=self.custom_prompt)
        # Held open, the sink may change between turns: go through the session. A one-shot run
        # keeps the sink itself, so an unwatched run skips building events (``discard``).
        emit = self._forward if self._held else self.emit
        frame, ctx = self.main_frame(run, tools, system, [], roots, emit=emit)
        if self.options.resume and self.teams is not None:
            frame.team = self.teams.rejoin(self.session_id)
        job = AgentJob(
            frame=frame,
            caller=self._main_caller(ref),
            ctx=ctx,
            tool_concurrency=self.config.tool_concurrency,
            inbox=self.inbox,
            transcript=self._transcript_file(),
            reminders=reminders.next_blocks if reminders else None,
            restate=reminders.restated_blocks if reminders else None,
            compaction=self.runtime.compaction_policy(self.model),
        )
        self._main = MainAgent(
            job=job,
            frame=frame,
            poller=self._start_poller(),
            cwd=str(self.cwd),
            reminders=reminders,
        )
        return self._main

    def _start_poller(self) -> asyncio.Task[None]:
        """The task that honours stop requests made by other processes and keeps the owner's
        heartbeat where the store keeps them (agents/heartbeat.py), on the running loop."""
        return asyncio.create_task(
            with_heartbeat(self.background.poll_stop_requests, self.store),
            name=f"stop-poller:{self.session_id}",
        )

    def _hold_session_lock(self) -> None:
        if not self.options.transcripts:
            return  # nothing on disk that a compaction could change
        ensure_private_dir(self.state.sessions_dir)
        try:
            fd = session_lock.hold_shared(self.state.session_lock(self.session_id))
        except session_lock.SessionBusy:
            raise ValueError(
                f"session {self.session_id} is being compacted by another process; "
                "run it again when `subagents compact` has finished"
            ) from None
        self._lock = weakref.finalize(self, session_lock.release, fd)

    def _release_session_lock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock()  # closes the descriptor once; the finalizer is then dead

    async def _start_mcp(self) -> None:
        """Kill what a crashed session left running, then start this session's servers."""
        reap_session_servers(self.state)
        if self.runtime.mcp is not None:
            await self.runtime.mcp.start()

    def main_frame(
        self,
        run: AgentRun,
        tools: list[Tool[Any]],
        system: str,
        messages: list[Message],
        roots: tuple[Path, ...],
        *,
        emit: EventSink | None = None,
    ) -> tuple[AgentFrame, ToolContext]:
        """The main agent's frame and context (a teammate worker's host frame, and the
        context a saved session's compaction runs in, too); ``emit`` defaults to the sink."""
        frame = AgentFrame(
            run=run,
            model=self.model,
            system=system,
            tools=tools,
            tool_schemas=[tool.schema() for tool in tools],
            messages=messages,
            permission_mode=self.permissions.context.mode,
            permissions=self.permissions,
        )
        ctx = ToolContext(
            cwd=self.cwd,
            roots=roots,
            abort=self.abort,
            agent=run.ref,
            emit=emit or self.emit,
            services=self.services,
            owner=frame,
            can_use_tool=self.permissions,
            read_guard=self.permissions,
            hooks=self.runtime.hooks,
            observer=self.observer,
            env=dict(self.settings.env),
        )
        return frame, ctx

    def _caller(self) -> ModelCaller:
        return self.runtime.caller(self.model)

    def _main_caller(self, ref: AgentRef) -> ModelCaller:
        caller = self._caller()
        if self.options.partial_text:

            def on_text(text: str) -> None:
                self.emit(ProgressEvent(agent=ref, subtype="text_delta", data={"text": text}))

            caller.on_text = on_text
        return caller

    def _transcript_file(self) -> str | None:
        if not self.options.transcripts:
            return None
        return str(self.state.session_transcript(self.session_id))

    def total_usage(self) -> Usage:
        return total_usage(self.agents)


def _tee(sink: EventSink, also: EventSink) -> EventSink:
    def both(event: Event) -> None:
        also(event)
        sink(event)

    return both


def resolved_model(model: Model | str) -> Model:
    if isinstance(model, str):
        from subagents.models.resolve import resolve_model

        return resolve_model(model)
    return model
