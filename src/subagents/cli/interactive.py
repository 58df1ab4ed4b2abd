"""``subagents`` without ``-p`` in a terminal: the interactive session (``docs/interactive.md``).

The session is built from the same flags as a headless run (``SessionPlan``), with three
differences: the UI answers permission asks (``ask_callback``, which the checker also uses for
background children), the main agent's answer streams (``partial_text``), and the denial breaker
is off — a person who says no is not a loop to be broken. Textual is imported only here, and
only when the UI opens: a missing ``tui`` extra is a one-line error, not a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, TextIO

from subagents.cli.claude_models import choose
from subagents.cli.flags import ignored_flags
from subagents.cli.session_plan import SessionPlan, StartupError
from subagents.permissions.checker import AskCallback
from subagents.session import Session

if TYPE_CHECKING:
    from subagents.tui.app import SubagentsApp

MISSING_EXTRA = (
    "subagents: error: the interactive session needs the 'tui' extra "
    "(pip install 'subagents[tui]'); or run headless with -p"
)


def wants_interactive(args: argparse.Namespace) -> bool:
    """No ``-p``, text in and out, and a person at a terminal on both ends."""
    if args.print_mode or args.input_format != "text" or args.output_format != "text":
        return False
    return _is_terminal(sys.stdin) and _is_terminal(sys.stdout)


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except ValueError:  # a closed stream
        return False


def run_interactive(args: argparse.Namespace) -> int:
    try:
        app = build_app(args)
    except ImportError as exc:
        if exc.name not in ("textual", "rich") and not str(exc.name).startswith("textual."):
            raise
        print(MISSING_EXTRA, file=sys.stderr)
        return 2
    except (StartupError, ValueError, OSError) as exc:
        print(f"subagents: error: {exc}", file=sys.stderr)
        return 2
    code = app.run()
    return code or 0


def build_app(args: argparse.Namespace) -> SubagentsApp:
    """The app for these flags (tests drive it with Textual's pilot)."""
    from subagents.tui.app import SubagentsApp

    notes = list(ignored_flags(args))
    plan = SessionPlan.from_args(args, notes.append)
    return SubagentsApp(
        make_session=session_maker(plan),
        project=plan.options.cwd,
        resume=plan.options.resume,
        initial_prompt=args.prompt,
        choose_model=lambda name: choose(name, plan.configured_model).spec,
        notes=notes,
    )


def session_maker(plan: SessionPlan) -> Callable[[str | None, AskCallback], Session]:
    """New sessions for the UI: the flags' options, the UI's ask callback, streaming on."""

    def make_session(resume: str | None, ask: AskCallback) -> Session:
        first = resume == plan.options.resume
        options = replace(
            plan.options,
            resume=resume,
            session_id=plan.options.session_id if first else None,
            fork_session=plan.options.fork_session and first,
            ask_callback=ask,
            partial_text=True,
        )
        session = Session(options)
        session.permissions.denial_limits = None
        return session

    return make_session
