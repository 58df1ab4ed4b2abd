"""``subagents -p``: one headless session, printed as text, one JSON object, or a JSON stream.

Exit codes: 0 when the session's result is ``success``; 1 when the run ended in an error subtype
(max turns, budget, execution error); 2 when it could not start (bad arguments, model, files).
Every failure prints one line to stderr saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from subagents.events import Event, ProgressEvent, SystemEvent
from subagents.session import Session, SessionOptions, SessionResult
from subagents.state import ProjectState

DEFAULT_MODEL = "local"
"""The embedded model: what ``-p`` runs on a machine with no key and no server configured."""
ANTHROPIC_DEFAULT = "anthropic:sonnet"


class StartupError(Exception):
    """The session could not start; the message is the one line the user sees."""


def run_headless(args: argparse.Namespace) -> int:
    try:
        session = _session_from_args(args)
    except (StartupError, ValueError, OSError) as exc:
        print(f"subagents: error: {exc}", file=sys.stderr)
        return 2
    printer = _Printer(args.output_format)
    try:
        result = asyncio.run(_run(session, args.prompt, printer))
    except KeyboardInterrupt:
        print("subagents: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as exc:
        print(f"subagents: error: {exc}", file=sys.stderr)
        return 2
    printer.finish(result)
    if result.is_error:
        print(f"subagents: {result.subtype}: {_one_line(result.result)}", file=sys.stderr)
        return 1
    return 0


async def _run(session: Session, prompt: str, printer: _Printer) -> SessionResult:
    """Run with SIGINT/SIGTERM turned into an abort: children stop, their shells die, and the
    run still ends with a result (``error_during_execution``)."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, session.abort.abort, f"interrupted by {sig.name}")
    try:
        return await session.run(prompt, on_event=printer.event)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


def _session_from_args(args: argparse.Namespace) -> Session:
    cwd = Path(args.cwd).expanduser() if args.cwd else Path.cwd()
    if not cwd.is_dir():
        raise StartupError(f"--cwd {args.cwd}: not a directory")
    model = choose_model(args.model, os.environ)
    check_local_model(model, explicit=bool(args.model or os.environ.get("SUBAGENTS_MODEL")))
    resume = args.resume
    if args.continue_latest and not resume:
        resume = latest_session(ProjectState.for_cwd(cwd))
        if resume is None:
            raise StartupError(f"--continue: no earlier session for {cwd}")
    options = SessionOptions(
        model=model,
        cwd=cwd,
        max_turns=args.max_turns,
        resume=resume,
        fallback_model=args.fallback_model,
        agents_json=args.agents,
        permission_mode=args.permission_mode,
        settings_file=Path(args.settings).expanduser() if args.settings else None,
        system_prompt=args.system_prompt,
        system_prompt_file=(
            Path(args.system_prompt_file).expanduser() if args.system_prompt_file else None
        ),
        append_system_prompt=args.append_system_prompt,
        mcp_config=tuple(args.mcp_config),
        strict_mcp_config=args.strict_mcp_config,
    )
    return Session(options)


def choose_model(cli_model: str | None, env: Mapping[str, str]) -> str:
    """The model spec of a run: ``--model`` > ``SUBAGENTS_MODEL`` > Claude when
    ``ANTHROPIC_API_KEY`` is set > ``openai:<OPENAI_MODEL>`` when ``OPENAI_BASE_URL`` is set >
    the embedded ``local`` model, so a fresh machine with no key still runs."""
    if cli_model:
        return cli_model
    if env.get("SUBAGENTS_MODEL"):
        return env["SUBAGENTS_MODEL"]
    if env.get("ANTHROPIC_API_KEY"):
        return ANTHROPIC_DEFAULT
    if env.get("OPENAI_BASE_URL"):
        name = env.get("OPENAI_MODEL", "").strip()
        if not name:
            raise StartupError(
                "OPENAI_BASE_URL is set but OPENAI_MODEL is not: set OPENAI_MODEL to the "
                "server's model name, or pass --model openai:NAME"
            )
        return f"openai:{name}"
    return DEFAULT_MODEL


def check_local_model(spec: str, *, explicit: bool) -> None:
    """Fail before the run starts, in one line, when a ``local`` model cannot load: a missing
    engine or model file would otherwise surface only as the first model call's error."""
    provider, _, rest = spec.strip().partition(":")
    if provider != "local":
        return
    from subagents.models.base import ModelError
    from subagents.models.local import INSTALL_EXTRA_HINT, local_model_for

    others = "" if explicit else "; or set ANTHROPIC_API_KEY, OPENAI_BASE_URL or --model"
    if importlib.util.find_spec("xllamacpp") is None:
        raise StartupError(f"{INSTALL_EXTRA_HINT}, then run `subagents model install`{others}")
    try:
        local_model_for(rest).model_path()
    except ModelError as error:
        raise StartupError(f"{_one_line(str(error))}{others}") from None


def latest_session(state: ProjectState) -> str | None:
    folder = state.sessions_dir
    if not folder.is_dir():
        return None
    files = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    return files[-1].stem if files else None


class _Printer:
    """Writes events or the final result in the chosen output format."""

    def __init__(self, output_format: str) -> None:
        self.format = output_format

    def event(self, event: Event) -> None:
        if self.format == "stream-json":
            _write_json(event.to_dict())
        elif isinstance(event, SystemEvent) and event.subtype == "warning":
            sys.stderr.write(f"subagents: warning: {event.data.get('message', '')}\n")
        elif self._is_live_progress(event):
            assert isinstance(event, ProgressEvent)
            sys.stderr.write(progress_line(event) + "\n")
            sys.stderr.flush()

    def _is_live_progress(self, event: Event) -> bool:
        return (
            self.format == "text"
            and isinstance(event, ProgressEvent)
            and event.subtype in ("agent_progress", "todos")
        )

    def finish(self, result: SessionResult) -> None:
        if self.format == "json":
            _write_json(result.payload)
        elif self.format == "text" and not result.is_error:
            sys.stdout.write(result.result.rstrip("\n") + "\n")
            sys.stdout.flush()


def _write_json(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def progress_line(event: ProgressEvent) -> str:
    """``[Explore a1b2c3d4e] 3 tool uses · 1234 tokens · 4.1 s · Grep: TODO``"""
    data, agent = event.data, event.agent
    if event.subtype == "todos":
        return f"[{agent.agent_type} {agent.agent_id}] todos: {data.get('summary', '')}"
    activities = data.get("recent_activities") or []
    last = f" · {activities[-1]}" if activities else ""
    return (
        f"[{agent.agent_type} {agent.agent_id}] {data.get('tool_use_count', 0)} tool uses · "
        f"{data.get('total_tokens', 0)} tokens · {data.get('elapsed_ms', 0) / 1000:.1f} s{last}"
    )


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line[:300]
