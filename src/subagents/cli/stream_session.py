"""A long-lived stream-json session (``--input-format stream-json``), as ``claude-agent-sdk``
drives it: user and control messages on stdin, turn after turn in one process, until EOF.

* Each user message is one turn, queued while another runs; each turn ends with a ``result``.
* A background child that finishes while the session is idle wakes it for a turn of its own.
* Control requests are answered as they arrive, also during a turn (``interrupt`` ends the
  turn only); our own requests (``can_use_tool``, ``hook_callback``) wait for their answers.
* At EOF the queued turns run, background children are waited for (bounded) and delivered,
  then the session closes. The exit code is 1 when the last result was an error.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from subagents.cli.control import ControlChannel, ControlError, SdkPermissions, sdk_hooks
from subagents.cli.session_request import SessionRequest
from subagents.cli.stream_input import StreamInput
from subagents.mcp.sdk_bridge import control_messenger
from subagents.permissions.checker import AskCallback
from subagents.session import Session, SessionResult

Line = dict[str, Any]

MAX_CONTROL_IN_FLIGHT = 64
"""Control requests answered at once; the next waits for one to finish (a flood of requests
made a task each at once: ``tests/test_stream_input_bounds.py``). Safe to wait on: no handler
waits for input (an answer to one of our own requests, read by ``_read``, is never awaited
by a handler)."""

SessionFactory = Callable[[SessionRequest], Session]


@dataclass(kw_only=True)
class StreamSession:
    """Reads stdin, runs turns, answers control requests (see the module docstring)."""

    factory: SessionFactory
    write: Callable[[Line], None]
    warn: Callable[[str], None]
    stdio_permissions: bool
    bg_wait_ms: int
    report_state: bool = field(
        default_factory=lambda: os.environ.get("CLAUDE_CODE_SDK_READS_SESSION_STATE") == "1"
    )
    handlers: Any = None
    session: Session | None = None
    channel: ControlChannel = field(init=False)
    _prompts: list[str] = field(default_factory=list)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _eof: bool = False
    _stopped: bool = False
    _turn_running: bool = False
    _waiting: int = 0
    _state: str | None = None
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    last: SessionResult | None = None

    def __post_init__(self) -> None:
        self.channel = ControlChannel(write=self.write, on_waiting=self._on_waiting)

    async def run(self, stdin: StreamInput) -> int:
        stdin.start()
        reader = asyncio.create_task(self._read(stdin), name="stream-input")
        try:
            await self._work()
        finally:
            reader.cancel()
            await asyncio.gather(reader, *self._tasks, return_exceptions=True)
            if self.session is not None:
                await self.session.close()
        return 1 if self.last is not None and self.last.is_error else 0

    def stop(self) -> None:
        """A signal: no more input is read and no new turn starts."""
        self._stopped = True
        self._eof = True
        self.channel.close()
        self._wake.set()

    # -- input -----------------------------------------------------------------------------

    async def _read(self, stdin: StreamInput) -> None:
        while (message := await stdin.next()) is not None:
            kind = message.get("type")
            if kind == "user":
                self._on_user(message)
            elif kind == "control_request":
                if len(self._tasks) >= MAX_CONTROL_IN_FLIGHT:
                    await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
                self._spawn(self._answer(message))
            elif kind == "control_response":
                self.channel.resolve(message)
            elif kind not in ("keep_alive", "update_environment_variables"):
                self.warn(f"stdin: unknown message type {shown(kind)}, ignored")
        self._eof = True
        self.channel.close()
        self._wake.set()

    def _on_user(self, message: Line) -> None:
        body = message.get("message")
        content = body.get("content") if isinstance(body, dict) else None
        text = prompt_text(content, self.warn)
        if text is None:
            self.warn("stdin: a user message without message.content, ignored")
            return
        self._prompts.append(text)
        self._wake.set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro, name="control-request")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, message: Line) -> None:
        request_id = message.get("request_id")
        request = message.get("request")
        subtype = request.get("subtype") if isinstance(request, dict) else None
        try:
            assert isinstance(request, dict)
            body = await self.handlers.handle(self, str(subtype), request)
            response: Line = {"subtype": "success", "request_id": request_id, "response": body}
        except Exception as exc:  # every failure is an error reply; the session goes on
            response = {"subtype": "error", "request_id": request_id, "error": _text(exc)}
        self.write({"type": "control_response", "response": response})

    # -- turns -----------------------------------------------------------------------------

    def ensure_session(self, request: SessionRequest | None = None) -> Session:
        if self.session is None:
            request = request or SessionRequest()
            if request.ask is None and self.stdio_permissions:
                request = replace(request, ask=self.ask_callback())
            if request.mcp_sdk is None:
                request = replace(request, mcp_sdk=control_messenger(self.channel))
            self.session = self.factory(request)
            self.session.inbox.on_put = self._wake.set
        return self.session

    def ask_callback(self) -> AskCallback:
        return SdkPermissions(
            channel=self.channel,
            checker=lambda: self.ensure_session().permissions,
            interrupt=lambda reason: self.session is not None and self.session.interrupt(reason),
            warn=self.warn,
            directories=lambda add, remove: self.ensure_session().change_directories(add, remove),
        ).callback()

    async def _work(self) -> None:
        deadline: float | None = None
        while not self._stopped:
            self._wake.clear()
            if self._prompts:
                await self._turn(self._prompts.pop(0))
                continue
            session = self.session
            if session is not None and session.has_pending_input():
                await self._turn(None)
                continue
            if self._eof:
                if session is None or not session.expecting_background():
                    return
                deadline = deadline or time.monotonic() + self.bg_wait_ms / 1000
                if time.monotonic() >= deadline:
                    return
            self._report_state()
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                return

    async def _turn(self, prompt: str | None) -> None:
        session = self.ensure_session()
        self._turn_running = True
        self._report_state()
        try:
            if prompt is None:
                self.last = await session.deliver_pending()
            else:
                self.last = await session.run(prompt)
        finally:
            self._turn_running = False
        self._report_state()

    # -- session state -----------------------------------------------------------------------

    def _on_waiting(self, count: int) -> None:
        self._waiting = count
        self._report_state()

    def _report_state(self) -> None:
        """``session_state_changed`` when the SDK asked for it: ``requires_action`` while one
        of our requests waits, ``idle`` once no turn is owed, ``running`` otherwise."""
        if not self.report_state:
            return
        state = "running"
        if self._waiting:
            state = "requires_action"
        elif not (self._turn_running or self._prompts or self._owed()):
            state = "idle"
        if state != self._state:
            self._state = state
            self.write(
                {
                    "type": "system",
                    "subtype": "session_state_changed",
                    "state": state,
                    "sdk_host_only": True,
                    "session_id": self.session.session_id if self.session else "",
                }
            )

    def _owed(self) -> bool:
        session = self.session
        return session is not None and (
            session.has_pending_input() or session.expecting_background()
        )


def prompt_text(content: Any, warn: Callable[[str], None]) -> str | None:
    """A user message's text: a string, or its text blocks (other blocks are noted)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts: list[str] = []
    omitted: dict[str, int] = {}  # one warning per kind, however many blocks
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            kind = shown(block.get("type")) if isinstance(block, dict) else type(block).__name__
            omitted[kind] = omitted.get(kind, 0) + 1
            parts.append(f"[{kind.strip(chr(39))} content omitted]")  # [image content omitted]
    for kind, count in omitted.items():
        what = f"a {kind} content block is" if count == 1 else f"{count} {kind} content blocks are"
        warn(f"stdin: {what} not supported, replaced by a note")
    return "\n".join(parts)


def shown(value: Any) -> str:
    """A value of the peer's in a warning: a string quoted and cut at 60 characters, anything
    else by its JSON type (a 64 MiB "type" is not echoed whole)."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else f"{value[:60]!r}... ({len(value):,} chars)"
    return "null" if value is None else type(value).__name__


def _text(exc: BaseException) -> str:
    if isinstance(exc, ControlError):
        return str(exc)
    return str(exc) or type(exc).__name__


__all__ = ["SessionRequest", "StreamSession", "prompt_text", "sdk_hooks", "shown"]
