"""A session: one main agent, its children, its state folder, its events.

``Session`` is what the CLI's ``-p`` and the library's ``run()`` drive. It resolves the model,
builds the main agent's tools and context (``session_core``), runs it through
``agents.agent_run.run_agent`` and turns the outcome into the result object of SPEC §19
(``subtype``, ``usage`` summed over every agent, the per-agent ``agents`` list). Tools reach the
session through ``ToolContext.services`` (``agents.services.SessionServices``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from subagents.agents.agent_run import AgentRun, run_agent
from subagents.agents.mcp_scope import close_session_servers
from subagents.agents.project_context import load_project_context
from subagents.agents.reminders import TurnReminders, reminders_for
from subagents.events import (
    AgentRef,
    Event,
    EventSink,
    ResultEvent,
    discard,
)
from subagents.loop.compaction import CompactionResult
from subagents.loop.query import Budget, LoopOutcome
from subagents.messages import ContentBlock, Message, text_block, user_message
from subagents.models.base import Model
from subagents.session_compact import MainAgentParts, compact_held, compact_saved
from subagents.session_core import SessionCore, resolved_model
from subagents.session_history import HistorySource, starting_history
from subagents.session_options import SessionOptions as SessionOptions
from subagents.session_options import SessionResult as SessionResult
from subagents.session_result import structured_value, turn_result
from subagents.session_turns import MainAgent
from subagents.state import canonical_project
from subagents.store import session_lock


class Session(SessionCore):
    """One coordinating agent run and everything it starts."""

    # -- public -------------------------------------------------------------------------------

    async def run(
        self,
        prompt: str,
        on_event: EventSink | None = None,
        *,
        on_warning: Callable[[str], None] | None = None,
    ) -> SessionResult:
        """Run the main agent on ``prompt`` to its end; events go to ``on_event`` as they happen.

        ``on_warning`` is called with each warning's text when it is shown (those from before
        the run right after it starts, later ones at once), whether or not ``on_event`` is
        given: a caller that wants only the warnings (the CLI's ``json`` output) passes it
        alone, and then no agent builds an event it would only drop.

        Outside ``async with`` (or ``open``) this is the whole session: it waits (bounded) for
        background children, then closes. Inside, it is one turn of a conversation that goes
        on: a second ``run`` continues it, and ``close`` ends it."""
        if on_warning is not None:
            self._warnings.on_warning = on_warning
        if on_event is not None or not self._held:
            self._set_sink(on_event or discard)
        if self._held:
            return await self._turn(prompt, wait_background=False)
        try:
            return await self._turn(prompt, wait_background=True)
        finally:
            await self.close()

    async def stream(self, prompt: str) -> AsyncIterator[Event]:
        """The same run as an async iterator of events, ending with the ``result`` event."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        previous = self.emit
        self._set_sink(queue.put_nowait)
        task = asyncio.create_task(
            self.run(prompt, on_event=queue.put_nowait), name=f"session:{self.session_id}"
        )
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            task.result()
        finally:
            if not task.done():
                self.abort.abort("consumer stopped")
                await asyncio.gather(task, return_exceptions=True)
            if self._held:
                self._set_sink(previous)

    def hold(self, on_event: EventSink | None = None) -> Session:
        """Hold the session open for several turns (``run``/``stream`` each run one) until
        ``close``; ``on_event`` receives the events of every turn.

        ``close`` (or ``async with``) is what ends it: a held session is running —
        background children, its inbox poller — so dropping the last reference does not stop
        them, and no SessionEnd hook fires. Once nothing runs (its loop closed) a dropped
        session is collected, and its session lock goes with it (a finalizer;
        ``tests/test_gc_heap.py``): measured, five held sessions dropped leave no thread and
        no descriptor behind."""
        if self._closed:
            raise RuntimeError("this Session is closed; SessionOptions(resume=...) continues it")
        self._held = True
        if on_event is not None:
            self._set_sink(on_event)
        return self

    async def open(self, on_event: EventSink | None = None) -> Session:
        """``hold``, for ``await``-style callers."""
        return self.hold(on_event)

    async def __aenter__(self) -> Session:
        return await self.open()

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def deliver_pending(self, on_event: EventSink | None = None) -> SessionResult:
        """A turn on what arrived while the session was idle (background notifications),
        with no new user message; the caller checks ``has_pending_input`` first."""
        if on_event is not None:
            self._set_sink(on_event)
        return await self._turn(None, wait_background=False)

    def has_pending_input(self) -> bool:
        return self.inbox.pending()

    def expecting_background(self) -> bool:
        """Background children still running or their notifications on the way, or a busy
        teammate (a stream-json session is not idle while its team works: the SDK keeps stdin
        open for the turns the team's messages start, and their permission asks)."""
        teams = self.teams
        return self.background.expecting_notifications() or (
            teams is not None and teams.expecting()
        )

    def interrupt(self, reason: str = "interrupted by the user") -> bool:
        """Abort the running turn (foreground children with it); background children and the
        session go on. False when no turn is running."""
        if self._turn_abort is None or not self._turn_running:
            return False
        self._turn_abort.abort(reason)
        return True

    def set_model(self, model: Model | str) -> Model:
        """Switch the main agent's model for the rest of the session (its next model call)."""
        resolved = resolved_model(model)
        self.model = resolved
        if self._main is not None:
            self._main.caller.model = resolved
            self._main.run.model = resolved.name
        return resolved

    def change_directories(
        self, add: Sequence[Path] = (), remove: Sequence[Path] = ()
    ) -> tuple[Path, ...]:
        """Directories the main agent's file tools may reach from now on, beside its working
        directory (as ``additional_dirs``); children started later inherit them. Returns the
        roots now in force. The working directory itself is never removed."""
        ctx = self._main.job.ctx if self._main is not None else None
        roots = list(ctx.roots if ctx is not None else self._extra_roots)
        gone = {canonical_project(d) for d in remove}
        keep = ctx.cwd if ctx is not None else self.cwd
        roots = [r for r in roots if r == keep or canonical_project(r) not in gone]
        roots += [d for d in map(canonical_project, add) if d not in roots]
        if ctx is not None:
            ctx.roots = tuple(roots)
        else:
            self._extra_roots = roots
        return tuple(roots)

    async def close(self) -> None:
        """End the session: background children are killed, writes drained, SessionEnd fires.
        Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        main = self._main
        if main is None:
            self._release_session_lock()  # a first turn that failed to set up
            self.writer.close()
            return
        if main.poller.get_loop() is asyncio.get_running_loop():  # (else its loop's end ended it)
            main.poller.cancel()
            await asyncio.gather(main.poller, return_exceptions=True)
        try:
            await self._shutdown()
        finally:
            if self.runtime.hooks is not None:
                await self.runtime.hooks.session_end("other")
            self._release()
            if self._observation is not None:
                self._observation.end(None)
                self._observation = None

    def _history(
        self, prompt: str, reminders: TurnReminders | None = None
    ) -> tuple[list[Message], int]:
        source = HistorySource(
            resume=self.options.resume,
            session_id=self.session_id,
            cwd=self.cwd,
            state=self.state,
            store=self.store,
            inbox=self.inbox,
            max_result=self.config.task_max_output,
        )
        return starting_history(source, prompt, reminders)

    async def _turn(self, prompt: str | None, *, wait_background: bool) -> SessionResult:
        if self._closed:
            raise RuntimeError(
                "a Session runs once unless held open: use `async with Session(...)` (or "
                "hold()) to run several turns, or SessionOptions(resume=<session id>) to "
                "continue this one's conversation"
            )
        if self._turn_running:
            raise RuntimeError("a turn of this Session is already running")
        self._turn_running = True
        try:
            return await self._run_turn(prompt, wait_background)
        finally:
            self._turn_running = False

    async def _run_turn(self, prompt: str | None, wait_background: bool) -> SessionResult:
        started = time.monotonic()
        main = self._main or await self._open_main()
        if main.poller.get_loop() is not asyncio.get_running_loop():
            # A held session run again by a new ``asyncio.run``: the poller ended with the loop
            # it ran on, and with it the heartbeat and the stop requests of ``tasks stop``.
            main.poller = self._start_poller()
        mcp = self.runtime.mcp
        self.emit(main.init_event(mcp.statuses() if mcp is not None else []))
        if not self._warnings.live:  # warnings from before the run follow the first init
            self._warnings.show(self.emit)
        if prompt is not None:
            prompt, refusal = await self._submitted(prompt)
            if refusal is not None:
                return self._refused(main, refusal, started)
        if not main.started:
            main.started = True
            messages, logged = self._history(await self._first_prompt(prompt or ""), main.reminders)
            main.job.messages[:] = messages
            main.job.logged_messages = logged
        else:
            main.job.logged_messages = len(main.job.messages)
            if prompt is not None:
                main.job.messages.append(main.turn_message(prompt))
            elif main.job.messages[-1]["role"] == "user" and self.inbox.pending():
                # After an interrupted turn the history ends with the cancelled calls' results,
                # where the loop delivers no input: what arrived since is this turn's message.
                blocks: list[ContentBlock] = [text_block(t) for t in self.inbox.drain()]
                main.job.messages.append(user_message(blocks))
        if wait_background:
            self._wait_for_background(main.run.agent_id)
        turn_abort = self._turn_abort = self.abort.child()
        options = self.options
        limits = Budget(
            max_turns=options.max_turns,
            max_tokens=options.max_tokens,
            max_wall_ms=options.max_wall_ms,
        )
        main.begin_turn(turn_abort, prompt, limits)
        try:
            outcome = await run_agent(main.job)
        finally:
            turn_abort.unlink()  # the session's signal forgets a finished turn (no cycle)
        result = self._result(outcome, int((time.monotonic() - started) * 1000))
        self.emit(ResultEvent(payload=result.payload))
        return result

    async def _submitted(self, prompt: str) -> tuple[str, str | None]:
        """The prompt after the UserPromptSubmit hooks: with their context added, or refused
        (the second item says why)."""
        hooks = self.runtime.hooks
        if hooks is None:
            return prompt, None
        verdict = await hooks.user_prompt_submit(prompt)
        if verdict.refusal is not None:
            return prompt, verdict.refusal
        return (f"{prompt}\n\n{verdict.context}" if verdict.context else prompt), None

    def _refused(self, main: MainAgent, reason: str, started: float) -> SessionResult:
        """A turn whose prompt a hook refused: no model call, an error result saying why."""
        outcome = LoopOutcome(
            reason="aborted",
            messages=main.job.messages,
            final_text="",
            stats=main.run.stats,
            error=f"UserPromptSubmit hook refused the prompt: {reason}",
        )
        result = self._result(outcome, int((time.monotonic() - started) * 1000))
        self.emit(ResultEvent(payload=result.payload))
        return result

    async def _first_prompt(self, prompt: str) -> str:
        hooks = self.runtime.hooks
        if hooks is None:
            return prompt
        extra = await hooks.session_start("resume" if self.options.resume else "startup")
        return f"{prompt}\n\n{extra}" if extra else prompt

    def _release(self) -> None:
        """The run is over: cut the session's reference cycles (callbacks between the
        runtime, the managers, the registry and the inbox), so all it built — fifty children's
        loops and messages included — is freed by reference counting now, rather than by a
        full garbage collection that would scan it all later (measured: ~50 ms per full
        collection once a few finished sessions pile up)."""
        self.registry.release()
        self._release_session_lock()
        self.runtime.on_child_done.clear()
        self.runtime.definitions_watch = None
        self.inbox.expecting = None
        self.inbox.on_put = None
        if self.teams is not None:
            self.teams.on_crash = None
        if self._main is not None:
            # The catalog feed and its definition watch call back into this session.
            self._main.reminders = None
            self._main.job.reminders = None
            self._main.job.restate = None

    def _wait_for_background(self, main_id: str) -> None:
        """After its final answer the main agent waits (bounded) for its background children,
        so their notifications are delivered before the run ends."""
        wait_ms = self.options.background_wait_ms
        if wait_ms is None:
            wait_ms = self.config.print_bg_wait_ms
        if wait_ms <= 0:
            return
        children, teams = self.background, self.teams
        self.inbox.expecting = lambda: (
            children.expecting_notifications() or (teams is not None and teams.expecting())
        )
        self.inbox.wait_deadline = time.monotonic() + wait_ms / 1000
        self.registry.on_terminal(lambda _task: self.inbox.wake())

    async def shutdown(self) -> None:
        """Kill everything this session started and close its writer (a teammate worker's
        end; ``run`` does this itself)."""
        await self._shutdown()

    async def _shutdown(self) -> None:
        """Shutdown kills every task still running: teammates, background agents, shells."""
        if self.teams is not None:
            await self.teams.shutdown()
        await self._parts.shutdown()
        await close_session_servers(self.runtime.mcp, self.state, self.session_id)
        await self._parts.close_writes()

    async def compact(
        self, instructions: str | None = None, on_event: EventSink | None = None
    ) -> CompactionResult:
        """Compact the conversation (Claude Code's ``/compact``, see ``session_compact``): a
        held session that has run a turn in place, between turns; otherwise the saved session
        ``options.resume``. The next turn, or the next resume, continues from the summary."""
        if self._closed:
            raise ValueError("this Session is closed; SessionOptions(resume=...) compacts it")
        main = self._main
        if main is not None and main.started:
            if self._turn_running:
                raise RuntimeError("a turn is running: compact between turns")
            if on_event is not None:
                self._set_sink(on_event)
            policy = main.job.compaction or self.runtime.compaction_policy(self.model)
            return await compact_held(main.job, policy, instructions=instructions)
        session_id = self.options.resume
        if not session_id or main is not None:
            raise ValueError(
                "Session.compact works on a held session after its first turn, or on a saved "
                "session: SessionOptions(resume=<session id>)"
            )
        path = self.state.session_transcript(session_id)
        if not path.exists():
            raise ValueError(f"compact {session_id}: no such session in {self.cwd}")
        self._set_sink(on_event or discard)
        self.runtime.project_context = await load_project_context(self.cwd, warn=self.warn)
        tools = self.main_tools()
        reminders = reminders_for(self.runtime, None, [tool.name for tool in tools])
        system = self._system_prompt()
        run = AgentRun(ref=AgentRef(agent_id=session_id, agent_type="main"), prompt="")
        _, ctx = self.main_frame(run, tools, system, [], (self.cwd,))
        parts = MainAgentParts(
            system=system,
            tools=tools,
            caller=self._caller(),
            policy=self.runtime.compaction_policy(self.model),
            ctx=ctx,
            restate=reminders.restated_blocks if reminders else None,
        )
        records = self.store.list_agents(self.cwd, session_id=session_id)
        try:
            lock = session_lock.take_exclusive(self.state.session_lock(session_id))
        except session_lock.SessionBusy:
            raise ValueError(
                f"compact {session_id}: the session is running in another process; compact it "
                "when it has ended (or with /compact inside it)"
            ) from None
        try:
            return await compact_saved(path, parts, records=records, instructions=instructions)
        finally:
            session_lock.release(lock)

    def _result(self, outcome: LoopOutcome, duration_ms: int) -> SessionResult:
        return turn_result(
            outcome,
            duration_ms,
            options=self.options,
            session_id=self.session_id,
            agents=self.agents,
            warnings=self.warnings,
            denials=self.permissions.denied,
            structured=structured_value(self._main.job.tools) if self._main else None,
        )
