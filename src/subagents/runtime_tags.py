"""The tags the runtime writes into what a model reads, and the escaping that defuses them.

The runtime speaks to a model in tagged text: ``<task-notification>`` when a background child
ends, ``<system-reminder>`` for standing context, ``<teammate-message>``, a fork directive. Text
that someone else controls — a child's report, a teammate's message, an MCP server's result —
could imitate them: close one early and open a fake one. Every such tag in that text is escaped
(``<task-notification`` becomes ``&lt;task-notification``), so only the runtime writes them.
"""

from __future__ import annotations

import re

RUNTIME_TAG_NAMES = (
    "task-notification",
    "task-id",
    "task-type",
    "status",
    "summary",
    "result",
    "error",
    "output-file",
    "exit-code",
    "usage",
    "fork_directive",
    "system-reminder",
    "command-output",
    "teammate-message",
)
_RUNTIME_TAGS = re.compile(r"<(/?)(" + "|".join(RUNTIME_TAG_NAMES) + r")\b", re.IGNORECASE)


def escape_runtime_tags(text: str) -> tuple[str, bool]:
    """``text`` with every runtime tag defused, and whether anything was escaped."""
    if "<" not in text:  # no tag can start: skip the regex (three texts per notification)
        return text, False
    escaped, count = _RUNTIME_TAGS.subn(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text)
    return escaped, count > 0
