"""``subagents compact [SESSION_ID]``: compact a saved session (Claude Code's ``/compact``).

The session's main agent history is summarised by the model (``--model``, chosen as for
``-p``), and ``subagents -p PROMPT --resume SESSION_ID`` then continues from the summary. Without
an id, the project's latest session. Exit 0 when a summary (or a clearing) replaced the history,
1 when the summary failed and the oldest turns were dropped instead, or a PreCompact hook
blocked it, 2 when it could not start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from subagents.session import Session

OUTPUT_FORMATS = ("text", "json")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "compact", help="summarise a saved session, so --resume continues from the summary"
    )
    parser.add_argument("session_id", nargs="?", help="the session (default: the latest)")
    parser.add_argument("--instructions", metavar="TEXT", help="what the summary should keep")
    # Own destinations: the top-level parser has --model, --cwd and --output-format too.
    parser.add_argument("--model", dest="compact_model", help="as for -p (default: the same)")
    parser.add_argument("--cwd", dest="compact_cwd", metavar="DIR", help="the project folder")
    parser.add_argument(
        "--output-format", dest="compact_format", choices=OUTPUT_FORMATS, default="text"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from subagents.cli.headless import StartupError

    try:
        session_id, session = _session(args)
        result = asyncio.run(session.compact(args.instructions))
    except (StartupError, ValueError, OSError) as exc:
        print(f"subagents: error: {exc}", file=sys.stderr)
        return 2
    fields = {
        "type": "compaction",
        "session_id": session_id,
        "trigger": result.trigger,
        "method": result.method,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "messages_before": result.messages_before,
        "messages_after": result.messages_after,
        "summary": result.summary,
        "error": result.error,
    }
    if args.compact_format == "json":
        print(json.dumps(fields, ensure_ascii=False))
    else:
        print(
            f"session {session_id}: {result.method}, {result.tokens_before} -> "
            f"{result.tokens_after} tokens ({result.messages_before} -> "
            f"{result.messages_after} messages)"
        )
    if result.method in ("summary", "cleared"):
        return 0
    print(f"subagents: compact: {result.method}: {result.error}", file=sys.stderr)
    return 1


def _session(args: argparse.Namespace) -> tuple[str, Session]:
    """The session to compact (the latest when no id is given), opened on the chosen model."""
    from subagents.cli.headless import StartupError, check_local_model, choose_model, latest_session
    from subagents.session import Session, SessionOptions
    from subagents.state import ProjectState

    raw_cwd = args.compact_cwd or args.cwd
    cwd = Path(raw_cwd).expanduser() if raw_cwd else Path.cwd()
    if not cwd.is_dir():
        raise StartupError(f"--cwd {raw_cwd}: not a directory")
    session_id = args.session_id or latest_session(ProjectState.for_cwd(cwd))
    if session_id is None:
        raise StartupError(f"no earlier session for {cwd}")
    explicit = args.compact_model or args.model
    model = choose_model(explicit, os.environ)
    check_local_model(model, explicit=bool(explicit or os.environ.get("SUBAGENTS_MODEL")))
    return session_id, Session(SessionOptions(model=model, cwd=cwd, resume=session_id))
