"""The ``subagents`` command: argument parsing and dispatch, nothing else.

``subagents -p PROMPT …`` runs one session headless (``cli/headless.py``); subcommands (``agents``,
``tasks``, ``transcript``, ``model``) each live in their own module with a ``register`` function.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence

from subagents import __version__
from subagents.cli.mcp_cmd import add_mcp_arguments

OUTPUT_FORMATS = ("text", "json", "stream-json")
SUBCOMMAND_MODULES = ("agents_cmd", "tasks_cmd", "model_cmd", "worktrees_cmd", "mcp_cmd")
PERMISSION_MODES = ("default", "acceptEdits", "bypassPermissions", "dontAsk", "plan")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="subagents",
        description="Run a coordinating agent that delegates to sub-agents.",
    )
    parser.add_argument("--version", action="version", version=f"subagents {__version__}")
    parser.add_argument("-p", "--print", dest="prompt", metavar="PROMPT", help="run headless")
    parser.add_argument(
        "--model", help="PROVIDER:NAME (scripted:FILE, anthropic:ID, openai:NAME, local)"
    )
    parser.add_argument("--fallback-model", help="model to switch to on a fallback-class error")
    parser.add_argument("--output-format", choices=OUTPUT_FORMATS, default="text")
    parser.add_argument("--agents", metavar="JSON", help="extra agent definitions as JSON")
    parser.add_argument("--permission-mode", choices=PERMISSION_MODES)
    parser.add_argument("--max-turns", type=_positive_int, metavar="N")
    parser.add_argument("--settings", metavar="FILE", help="an extra settings file")
    parser.add_argument("--cwd", metavar="DIR", help="working directory (default: current)")
    parser.add_argument("--resume", "-r", metavar="SESSION_ID", help="continue a session")
    parser.add_argument(
        "--continue",
        "-c",
        dest="continue_latest",
        action="store_true",
        help="continue the project's latest session",
    )
    parser.add_argument("--verbose", action="store_true", help="show child progress lines")
    add_mcp_arguments(parser)
    prompts = parser.add_mutually_exclusive_group()
    prompts.add_argument("--system-prompt", metavar="TEXT", help="replace the system prompt")
    prompts.add_argument("--system-prompt-file", metavar="FILE", help="replace it from a file")
    parser.add_argument(
        "--append-system-prompt", metavar="TEXT", help="add text at the end of the system prompt"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    _register_subcommands(subparsers)
    return parser


def _register_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    import importlib

    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(f"subagents.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"subagents.cli.{name}":
                raise
            continue
        module.register(subparsers)


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {raw!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {raw!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    # Start-up creates only objects that live as long as the process (modules, classes,
    # schemas): a collection during it finds nothing, and they cost a tenth of its CPU.
    gc.disable()
    try:
        return _main(argv)
    finally:
        gc.enable()


def _main(argv: Sequence[str] | None) -> int:
    _tolerate_lone_surrogates()
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is not None:
        gc.enable()
        code: int = handler(args)
        return code
    if args.prompt is None:
        parser.print_help(sys.stderr)
        return 2
    from subagents.cli.headless import run_headless

    # Everything imported so far lives as long as the process: keep it out of every later
    # garbage collection, so a full collection during a long run scans only the run's objects
    # (the import-time heap alone took ~8 ms per full collection, measured).
    gc.freeze()
    gc.enable()
    _raise_descriptor_limit()
    return run_headless(args)


def _tolerate_lone_surrogates() -> None:
    """A lone surrogate (``\\ud800``) in a model's text is no UTF-8: print it as the escape
    ``\\ud800`` instead of failing the run at its last step. Inside a JSON string that escape is
    the JSON for the same character, so ``json`` and ``stream-json`` output stay valid."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # absent when a test swaps the stream
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _raise_descriptor_limit(ceiling: int = 65_536) -> None:
    """Lift the soft open-file limit towards the hard one: a wide fan-out's children run shells
    with pipes of their own, and the common soft default (1,024) is far below what the system
    allows. The runtime itself keeps its transcript and sidecar descriptors bounded either way."""
    try:
        import resource
    except ImportError:  # not on this platform
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass  # keep the limit we were given


if __name__ == "__main__":
    sys.exit(main())
