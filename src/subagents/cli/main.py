"""The ``subagents`` command: argument parsing and dispatch, nothing else.

``subagents [-p] PROMPT …`` runs one session headless (``cli/headless.py``; the prompt may come
from stdin, or a stream of messages with ``--input-format stream-json``); subcommands
(``agents``, ``tasks``, ``transcript``, ``model``, ``worktrees``, ``mcp``, ``compact``) each live
in their own module with a ``register`` function, and are recognised by the first argument.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence

# Nothing of the runtime is imported here: ``main`` first installs the codegen cache and turns
# the collector off, and every module imported after that (``flags`` alone brings settings,
# hooks and the tool base) is built under both.

SUBCOMMAND_MODULES = (
    "agents_cmd",
    "tasks_cmd",
    "model_cmd",
    "worktrees_cmd",
    "mcp_cmd",
    "teams_cmd",
    "compact_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    """The headless parser: ``subagents [-p] [PROMPT] [flags]`` (see ``cli/flags.py``)."""
    from subagents.cli.flags import add_headless_arguments
    from subagents.cli.mcp_cmd import add_mcp_arguments

    parser = argparse.ArgumentParser(
        prog="subagents",
        description="Run a coordinating agent that delegates to sub-agents. Subcommands: "
        "agents, tasks, transcript, model, worktrees, mcp, teams (subagents COMMAND --help).",
        allow_abbrev=False,
        formatter_class=OneSizeFormatter,
    )
    add_headless_arguments(parser)
    add_mcp_arguments(parser)
    return parser


class OneSizeFormatter(argparse.HelpFormatter):
    """argparse's formatter, asking the terminal its width once per process: ``add_argument``
    makes a formatter to check each argument's metavar, and every one asked (an ``ioctl`` on
    stdout and two environment look-ups, ~50 times per ``-p`` start-up)."""

    _columns: int | None = None

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            if OneSizeFormatter._columns is None:
                OneSizeFormatter._columns = terminal_columns()
            width = OneSizeFormatter._columns - 2  # what argparse subtracts
        super().__init__(prog, indent_increment, max_help_position, width)


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``, without importing ``shutil`` (with ``bz2``,
    ``lzma`` and ``fnmatch`` it was ~7 M instructions of every start-up, for this one number):
    ``COLUMNS`` when set and positive, else the width of the terminal on standard output, else
    80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        size = os.get_terminal_size(sys.__stdout__.fileno())  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80
    return size.columns or 80


def build_command_parser() -> argparse.ArgumentParser:
    """The parser of ``subagents COMMAND …`` (the subcommands' own modules register them)."""
    parser = argparse.ArgumentParser(prog="subagents", allow_abbrev=False)
    parser.add_argument("--cwd", metavar="DIR", help="working directory (default: current)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
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


def main(argv: Sequence[str] | None = None) -> int:
    # Start-up creates only objects that live as long as the process (modules, classes,
    # schemas): a collection during it finds nothing, and they cost a tenth of its CPU. Even
    # the cache's own imports (dataclasses, inspect, pathlib...) come after: with the collector
    # on, they ran ~9 young collections and one middle one (~10 M instructions).
    from subagents.cli.std_fds import reopen_closed

    closed = reopen_closed()  # before any file is opened: it would take a closed number
    gc.disable()
    from subagents.cli import codegen_cache, pydantic_plugins

    codegen_cache.install()  # before the runtime's ~200 dataclasses are created
    pydantic_plugins.install()  # and before its first pydantic model
    try:
        return _main(argv, stdin_closed=0 in closed)
    finally:
        gc.enable()
        codegen_cache.save()


def _main(argv: Sequence[str] | None, *, stdin_closed: bool = False) -> int:
    _tolerate_lone_surrogates()
    items = list(sys.argv[1:] if argv is None else argv)
    if _is_command(items):
        gc.enable()
        command_args = build_command_parser().parse_args(items)
        code: int = command_args.handler(command_args)
        return code
    from subagents.cli.flags import bind_values

    parser = build_parser()
    args = parser.parse_args(bind_values(items, parser))
    from subagents.cli.interactive import run_interactive, wants_interactive

    if wants_interactive(args):
        gc.enable()
        return run_interactive(args)
    if args.prompt is None and args.input_format == "text":
        if stdin_closed or sys.stdin is None or sys.stdin.isatty():
            parser.print_help(sys.stderr)
            return 2
        args.prompt = sys.stdin.read()
    if args.input_format == "text" and not args.prompt.strip():
        # Claude Code refuses an empty prompt too; running one would send the model nothing
        # to answer and bill a turn for it (`-p </dev/null` in a script is the usual cause).
        where = "stdin was empty" if args.prompt == "" else "it is only white space"
        print(
            f"subagents: error: no prompt ({where}): give it as an argument or on stdin",
            file=sys.stderr,
        )
        return 2
    from subagents.cli.headless import run_headless

    # Everything imported so far lives as long as the process: keep it out of every later
    # garbage collection, so a full collection during a long run scans only the run's objects
    # (the import-time heap alone took ~8 ms per full collection, measured).
    from subagents.gc_heap import freeze_import_heap

    gc.enable()
    freeze_import_heap(collect=False)
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


def _is_command(items: list[str]) -> bool:
    """``subagents [--cwd DIR] COMMAND …``: a subcommand is the first word after ``--cwd``."""
    rest = items
    if rest[:1] == ["--cwd"]:
        rest = rest[2:]
    elif rest and rest[0].startswith("--cwd="):
        rest = rest[1:]
    return bool(rest) and rest[0] in {
        "agents",
        "tasks",
        "transcript",
        "model",
        "worktrees",
        "mcp",
        "teams",
        "teammate-worker",
        "compact",
    }


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
