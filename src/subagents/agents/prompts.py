"""System prompts the runtime writes itself (definitions bring their own bodies).

Prompts are deterministic for a given input: no timestamps or random ids, because any byte that
changes between two requests breaks the provider's prompt-cache prefix.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from pathlib import Path

MAIN_PROMPT = """\
You are a coding agent working in a software repository on the user's behalf.
Use the tools you are given to inspect and change files and to run commands; keep changes
focused on the task, verify what you claim, and finish with a concise report of what you did.
When a task splits into independent parts, delegate them to sub-agents with the Agent tool,
several in one message so they run in parallel; each returns only its final report."""


def environment_block(cwd: Path, tool_names: Sequence[str]) -> str:
    return (
        "<env>\n"
        f"Working directory: {cwd}\n"
        f"Platform: {platform.system().lower()}\n"
        f"Tools: {', '.join(tool_names)}\n"
        "</env>"
    )


def main_system_prompt(cwd: Path, tool_names: Sequence[str], custom: str | None = None) -> str:
    return f"{custom or MAIN_PROMPT}\n\n{environment_block(cwd, tool_names)}"


def child_system_prompt(body: str, cwd: Path, tool_names: Sequence[str]) -> str:
    notes = (
        "Notes: you are a sub-agent. Your final message is returned to the agent that delegated "
        "this task, not to the user, so make it a complete, self-contained report. Use absolute "
        "file paths in it."
    )
    return f"{body.strip()}\n\n{notes}\n\n{environment_block(cwd, tool_names)}"
