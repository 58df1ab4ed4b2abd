"""``subagents -p``: one headless session, printed as text, one JSON object, or a JSON stream.

Exit codes: 0 when the session's result is ``success``; 1 when the run ended in an error subtype
(max turns, budget, execution error); 2 when it could not start (bad arguments, model, files);
141 when standard output was closed under it (``cli/stdout_guard.py``: the run stops, resumable).
Every failure prints one line to stderr saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from subagents.cli.flags import CLAUDE_CODE_COMPAT_VERSION, ignored_flags
from subagents.cli.progress import ProgressPrinter
from subagents.cli.session_plan import (
    SessionPlan,
    StartupError,
    check_local_model,
    choose_model,
    latest_session,
    slash_commands,
)
from subagents.cli.session_request import SessionRequest
from subagents.cli.stdout_guard import StdoutGuard
from subagents.events import Event, ProgressEvent, SystemEvent
from subagents.session import Session, SessionResult

if TYPE_CHECKING:  # the stream-json session's parts are imported only for that mode
    from subagents.cli.sdk_events import SdkShaper
    from subagents.cli.stream_session import StreamSession

__all__ = ["StartupError", "check_local_model", "choose_model", "latest_session", "run_headless"]


def run_headless(args: argparse.Namespace) -> int:
    for warning in ignored_flags(args):
        _warn(warning)
    try:
        plan = SessionPlan.from_args(args, _warn)
        if args.input_format == "stream-json":
            return _run_stream(plan, args)
        session = plan.build(SessionRequest())
    except (StartupError, ValueError, OSError) as exc:
        print(f"subagents: error: {exc}", file=sys.stderr)
        return 2
    out = StdoutGuard()
    out.on_close = lambda: session.abort.abort("standard output was closed")
    printer = _Printer(args.output_format, _shaper(session, plan, args), out, args.verbose)
    try:
        result = asyncio.run(_run(session, args.prompt, printer))
    except KeyboardInterrupt:
        print("subagents: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as exc:
        print(f"subagents: error: {exc}", file=sys.stderr)
        return 2
    during_run = out.closed
    printer.finish(result)
    if out.closed:
        return out.report(session.session_id, during_run=during_run)
    if result.is_error:
        print(f"subagents: {result.subtype}: {_one_line(result.result)}", file=sys.stderr)
        return 1
    return 0


def _warn(message: str) -> None:
    print(f"subagents: warning: {message}", file=sys.stderr, flush=True)


async def _run(session: Session, prompt: str, printer: _Printer) -> SessionResult:
    """Run with SIGINT/SIGTERM turned into an abort: children stop, their shells die, and the
    run still ends with a result (``error_during_execution``)."""
    with _signals_abort(session):
        if printer.format == "json":
            # Only the warnings are printed before the result: with no event sink no agent
            # builds an event per model call and tool result for it to drop.
            return await session.run(prompt, on_warning=printer.warning)
        return await session.run(prompt, on_event=printer.event)


@contextlib.contextmanager
def _signals_abort(session: Session) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, session.abort.abort, f"interrupted by {sig.name}")
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


def _run_stream(plan: SessionPlan, args: argparse.Namespace) -> int:
    """``--input-format stream-json``: the SDK's long-lived session (``stream_session``)."""
    if args.output_format != "stream-json":
        raise StartupError("--input-format stream-json needs --output-format stream-json")
    from subagents.cli.sdk_requests import SdkRequests, sdk_mcp_server_names
    from subagents.cli.stream_session import StreamSession

    configured = plan.model.spec
    requests = SdkRequests(
        configured_model=plan.configured_model,
        current_spec=configured,
        slash_commands=lambda: slash_commands(plan.options.cwd, args.setting_sources),
        sdk_mcp_servers=sdk_mcp_server_names(args.mcp_config),
    )

    out = StdoutGuard()

    def factory(request: SessionRequest) -> Session:
        session = plan.build(request)
        printer = _Printer("stream-json", _shaper(session, plan, args), out)
        return session.hold(printer.event)

    stream = StreamSession(
        factory=factory,
        write=out.write_json,
        warn=_warn,
        stdio_permissions=args.permission_prompt_tool == "stdio",
        bg_wait_ms=background_wait_ms(),
        handlers=requests,
    )

    def closed() -> None:  # the SDK went away: end the session as a signal would
        if stream.session is not None:
            stream.session.abort.abort("standard output was closed")
        stream.stop()

    out.on_close = closed
    try:
        code = asyncio.run(_drive(stream))
    except KeyboardInterrupt:
        return 130
    if out.closed:
        session_id = stream.session.session_id if stream.session else None
        return out.report(session_id, during_run=True)
    return code


async def _drive(stream: StreamSession) -> int:
    from subagents.cli.stream_input import StreamInput

    stdin = StreamInput(sys.stdin.buffer, stream.warn)
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)

    def stop(name: str) -> None:
        if stream.session is not None:
            stream.session.abort.abort(f"interrupted by {name}")
        stream.stop()

    for sig in signals:
        loop.add_signal_handler(sig, stop, sig.name)
    try:
        return await stream.run(stdin)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


def background_wait_ms() -> int:
    """How long EOF waits for background children: the SDK's ceiling when it set one."""
    for name in ("CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS", "SUBAGENTS_PRINT_BG_WAIT_MS"):
        raw = os.environ.get(name, "").strip()
        if raw.isdigit():
            return int(raw) or 2**31
    return 600_000


def _shaper(session: Session, plan: SessionPlan, args: argparse.Namespace) -> SdkShaper | None:
    """The SDK's event shapes, for ``--output-format stream-json`` only."""
    if args.output_format != "stream-json":
        return None
    from subagents.cli.sdk_events import SdkShaper

    def init_fields() -> dict[str, Any]:
        fields: dict[str, Any] = {
            "claude_code_version": CLAUDE_CODE_COMPAT_VERSION,
            "permissionMode": session.permissions.context.mode,
            "apiKeySource": _api_key_source(session),
            "mcp_servers": session.runtime.mcp.statuses() if session.runtime.mcp else [],
            "agents": list(session.runtime.definitions.names()),
            "slash_commands": slash_commands(plan.options.cwd, args.setting_sources),
            "output_style": "default",
            "skills": [],
            "plugins": [],
            "capabilities": [],
        }
        if plan.model.note:
            fields["requested_model"] = plan.model.requested
            fields["model_note"] = plan.model.note
        return fields

    return SdkShaper(
        session_id=session.session_id,
        init_fields=init_fields,
        partial_messages=args.include_partial_messages,
    )


def _api_key_source(session: Session) -> str:
    provider = getattr(session.model, "provider", "")
    if provider == "anthropic" and os.environ.get("ANTHROPIC_API_KEY"):
        return "ANTHROPIC_API_KEY"
    return "none"


class _Printer:
    """Writes events or the final result in the chosen output format."""

    def __init__(
        self,
        output_format: str,
        shaper: SdkShaper | None,
        out: StdoutGuard,
        verbose: bool = False,
    ) -> None:
        self.format = output_format
        self.shaper = shaper
        self.out = out
        self.progress = ProgressPrinter(
            stream=sys.stderr, verbose=verbose, live=_is_terminal(sys.stderr)
        )

    def event(self, event: Event) -> None:
        if self.shaper is not None:  # stream-json
            for line in self.shaper.lines(event):
                self.out.write_json(line)
            return
        if isinstance(event, SystemEvent) and event.subtype == "warning":
            self.warning(event.data.get("message", ""))
        elif self.format == "text":
            if isinstance(event, ProgressEvent) and event.subtype == "todos":
                agent = event.agent
                summary = event.data.get("summary", "")
                sys.stderr.write(f"[{agent.agent_type} {agent.agent_id}] todos: {summary}\n")
                sys.stderr.flush()
            self.progress.event(event)

    def warning(self, message: str) -> None:
        self.progress.finish()
        sys.stderr.write(f"subagents: warning: {message}\n")

    def finish(self, result: SessionResult) -> None:
        self.progress.finish()
        if self.format == "json":
            self.out.write_json(result.payload)
        elif self.format == "text" and not result.is_error:
            self.out.write(result.result.rstrip("\n") + "\n")


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line[:300]
