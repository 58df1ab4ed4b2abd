"""The headless flags: SPEC §19's, and Claude Code's that ``claude-agent-sdk`` sends.

``-p/--print`` is a flag; the prompt is the positional argument, or stdin when there is none
(``subagents -p "PROMPT"`` reads as ``-p`` plus the positional, so it keeps working). Every
flag the SDK may pass is declared, so none is mistaken for the prompt; the ones we accept but
do not honour are listed in ``NOT_HONOURED`` and ``ignored_flags`` names them for one warning
each. Unknown flags stay an error, as in Claude Code.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from subagents import __version__

OUTPUT_FORMATS = ("text", "json", "stream-json")
INPUT_FORMATS = ("text", "stream-json")
PERMISSION_MODES = ("default", "acceptEdits", "bypassPermissions", "dontAsk", "plan", "auto")
CLAUDE_CODE_COMPAT_VERSION = "2.1.327"
"""The Claude Code release whose headless protocol we speak (the pinned SDK's bundled CLI):
reported as ``claude_code_version`` so the SDK's version checks pass."""
VERSION_TEXT = f"{CLAUDE_CODE_COMPAT_VERSION} (subagents {__version__}, Claude Code compatible)"

NOT_HONOURED: dict[str, str] = {
    "betas": "--betas",
    "include_hook_events": "--include-hook-events",
    "resume_session_at": "--resume-session-at",
    "resume_drops_turn": "--resume-drops-turn",
    "session_mirror": "--session-mirror",
    "plugin_dir": "--plugin-dir",
    "thinking": "--thinking",
    "max_thinking_tokens": "--max-thinking-tokens",
    "thinking_display": "--thinking-display",
    "effort": "--effort",
    "task_budget": "--task-budget",
    "replay_user_messages": "--replay-user-messages",
    "debug_file": "--debug-file",
    "debug": "--debug",
}
"""Namespace attribute -> the flag as the warning names it."""


def add_headless_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", nargs="?", help="the prompt (default: read from stdin)")
    parser.add_argument("-p", "--print", dest="print_mode", action="store_true", help="headless")
    parser.add_argument("-v", "--version", action="version", version=VERSION_TEXT)
    _add_spec_flags(parser)
    _add_prompt_and_tool_flags(parser)
    _add_session_flags(parser)
    _add_accepted_flags(parser)


def _add_spec_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        help="PROVIDER:NAME (scripted:FILE, anthropic:ID, openai:NAME, local) or a "
        "Claude model name (claude-sonnet-4-5, sonnet), run on the configured provider",
    )
    parser.add_argument("--fallback-model", help="model to switch to on a fallback-class error")
    parser.add_argument("--output-format", choices=OUTPUT_FORMATS, default="text")
    parser.add_argument("--input-format", choices=INPUT_FORMATS, default="text")
    parser.add_argument("--agents", metavar="JSON", help="extra agent definitions as JSON")
    parser.add_argument("--permission-mode", choices=PERMISSION_MODES)
    parser.add_argument(
        "--dangerously-skip-permissions", action="store_true", help="= bypassPermissions"
    )
    parser.add_argument("--max-turns", type=positive_int, metavar="N")
    parser.add_argument("--settings", metavar="FILE|JSON", help="an extra settings file or JSON")
    parser.add_argument("--cwd", metavar="DIR", help="working directory (default: current)")
    parser.add_argument("--verbose", action="store_true", help="show child progress lines")


def _add_prompt_and_tool_flags(parser: argparse.ArgumentParser) -> None:
    prompts = parser.add_mutually_exclusive_group()
    prompts.add_argument("--system-prompt", metavar="TEXT", help="replace the system prompt")
    prompts.add_argument("--system-prompt-file", metavar="FILE", help="replace it from a file")
    parser.add_argument(
        "--append-system-prompt", metavar="TEXT", help="add text at the end of the system prompt"
    )
    parser.add_argument("--append-system-prompt-file", metavar="FILE")
    parser.add_argument("--tools", metavar="LIST", help="the base tool set ('' = none)")
    for flag in ("--allowedTools", "--allowed-tools"):
        parser.add_argument(flag, dest="allowed_tools", action="append", default=[])
    for flag in ("--disallowedTools", "--disallowed-tools"):
        parser.add_argument(flag, dest="disallowed_tools", action="append", default=[])
    parser.add_argument("--add-dir", dest="add_dirs", action="append", default=[])
    parser.add_argument("--json-schema", metavar="JSON", help="structured output schema")
    parser.add_argument("--permission-prompt-tool", metavar="stdio")


def _add_session_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resume", "-r", metavar="SESSION_ID", help="continue a session")
    parser.add_argument(
        "--continue",
        "-c",
        dest="continue_latest",
        action="store_true",
        help="continue the project's latest session",
    )
    parser.add_argument("--session-id", metavar="UUID", help="the id of a new session")
    parser.add_argument("--fork-session", action="store_true", help="resume into a new id")
    parser.add_argument("--max-budget-usd", type=_non_negative_float, metavar="USD")
    parser.add_argument("--include-partial-messages", action="store_true")
    parser.add_argument("--setting-sources", metavar="LIST", help="user,project,local")


def _add_accepted_flags(parser: argparse.ArgumentParser) -> None:
    """Flags the SDK may send that we parse (so they are not the prompt) but do not honour."""
    for flag in (
        "--betas",
        "--resume-session-at",
        "--resume-drops-turn",
        "--thinking",
        "--max-thinking-tokens",
        "--thinking-display",
        "--effort",
        "--task-budget",
        "--debug-file",
    ):
        parser.add_argument(flag, help=argparse.SUPPRESS)
    for flag in (
        "--include-hook-events",
        "--session-mirror",
        "--replay-user-messages",
    ):
        parser.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--debug", nargs="?", const="all", help=argparse.SUPPRESS)
    parser.add_argument("--plugin-dir", action="append", default=[], help=argparse.SUPPRESS)
    # --mcp-config / --strict-mcp-config: cli/mcp_cmd.add_mcp_arguments (MCP, issue 17).


def ignored_flags(args: argparse.Namespace) -> list[str]:
    """The accepted-but-not-honoured flags this run was given, one warning text each."""
    found = [
        f"{flag} is accepted but not honoured"
        for attr, flag in NOT_HONOURED.items()
        if getattr(args, attr, None) not in (None, False, [])
    ]
    tool = args.permission_prompt_tool
    if tool is not None and tool != "stdio":
        found.append(f"--permission-prompt-tool {tool} is accepted but not honoured (only 'stdio')")
    if args.permission_mode == "auto":
        found.append("--permission-mode auto is accepted but not honoured: 'default' is used")
    sources = set(split_list(args.setting_sources or "user,project,local"))
    if not {"user", "project", "local"} <= sources:
        found.append(
            f"--setting-sources {args.setting_sources} is honoured for slash commands only: "
            "every settings and agent definition source is still read"
        )
    return found


def bind_values(argv: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """``--flag VALUE`` -> ``--flag=VALUE`` for long flags that take a value, so a value that
    starts with ``-`` (``--system-prompt "-x"``) or is empty binds to its flag."""
    takes_value = {
        option
        for action in parser._actions
        if action.nargs is None and action.option_strings
        for option in action.option_strings
        if option.startswith("--")
    }
    out: list[str] = []
    items = list(argv)
    index = 0
    while index < len(items):
        token = items[index]
        if token in takes_value and index + 1 < len(items):
            out.append(f"{token}={items[index + 1]}")
            index += 2
            continue
        out.append(token)
        index += 1
    return out


def split_list(text: str) -> list[str]:
    """Claude Code's list syntax: items split on commas and whitespace outside parentheses
    (``Bash(git log:*),Read Edit`` -> three items)."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        if depth == 0 and (char == "," or char.isspace()):
            if current:
                items.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        items.append("".join(current))
    return items


def positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {raw!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {raw!r}")
    return value


def _non_negative_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount in USD, got {raw!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected an amount in USD, got {raw!r}")
    return value
