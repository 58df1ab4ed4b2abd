"""The tags the runtime writes into what a model reads, and the escaping that defuses them.

The runtime speaks to a model in tagged text: ``<task-notification>`` when a background child
ends, ``<system-reminder>`` for standing context, ``<teammate-message>``, a fork directive. Text
that someone else controls — a child's report, a teammate's message, an MCP server's result —
could imitate them: close one early and open a fake one. Every such tag in that text is escaped
(``<task-notification`` becomes ``&lt;task-notification``), so only the runtime writes them.

A model reads a tag more loosely than an XML parser, so the match is loose too (the test is
``tests/test_forged_tag_variants.py``): any case; a gap of blanks after ``<`` or ``/`` when the
tag closes (``</ result>``, ``< /result>``) or, opening, when it ends in ``>`` or an attribute
(``< result>``, ``< result kind="x">``; ``x < result)`` is left alone); invisible format
characters (zero-width space, BOM, soft hyphen, direction marks) anywhere in it; the
full-width and small look-alikes of ``<``, ``/``, ``-``, ``_`` and of the letters, and the
other dashes for ``-``. Letters of other scripts that merely look Latin (the Cyrillic small ie for
``e``) are other words and are not matched. Only the tag's first character is replaced, by ``&lt;``.
"""

from __future__ import annotations

import functools
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
    "worktree",
    "note",
    "fork_directive",
    "system-reminder",
    "command-output",
    "teammate-message",
    "git_status",
    "project_instructions",
)

# Spellings that read as the ASCII characters of a tag: the full-width forms (NFKC maps each to
# its ASCII character), the small ``<``/``>``, the other dashes and the other blanks. Each maps
# to one character, so a match in the mapped text is at the same place in the original.
_LOOKALIKES: dict[int, int | str] = {
    **{code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)},
    0xFE63: "-",
    0xFE64: "<",
    0xFE65: ">",
    **dict.fromkeys((*range(0x2010, 0x2016), 0x2212), "-"),
    **dict.fromkeys((0x00A0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000), " "),
}
# Any of them (``str.translate`` looks up every character: 50x the regex on a long text).
_LOOKALIKE = re.compile("[" + "".join(re.escape(chr(code)) for code in sorted(_LOOKALIKES)) + "]")
# Invisible format characters (a renderer shows nothing): a tag is read as if they were not there.
_INVISIBLE_CHARS = frozenset(
    "\u00ad\u061c\u180e\ufeff"
    + "".join(map(chr, (*range(0x200B, 0x2010), *range(0x202A, 0x202F))))
    + "".join(map(chr, range(0x2060, 0x2065)))
)
_INVISIBLE = re.compile("[" + "".join(sorted(_INVISIBLE_CHARS)) + "]")


@functools.cache
def _tag_pattern() -> re.Pattern[str]:
    """Compiled on first use (a few milliseconds: most sessions never escape anything)."""
    name = "(?:" + "|".join(RUNTIME_TAG_NAMES) + r")(?!\w)"
    return re.compile(
        r"<(?=\s*/\s*"
        + name  # a closing tag, blanks or not (the match is the ``<`` alone)
        + "|"
        + name  # an opening tag, ``<`` next to the name
        + r"|\s+"
        + name
        + r"(?=\s*/?>|\s+[\w-]+\s*=))",  # a spaced one that ends like a tag
        re.IGNORECASE | re.ASCII,
    )


def might_hold_tags(text: str) -> bool:
    """Whether ``text`` holds a character that can start a tag (else it needs no escaping)."""
    return "<" in text or "\uff1c" in text or "\ufe64" in text


def escape_runtime_tags(text: str) -> tuple[str, bool]:
    """``text`` with every runtime tag defused, and whether anything was escaped."""
    if not might_hold_tags(text):  # no tag can start: skip the regex (three texts per notice)
        return text, False
    if text.isascii():
        escaped, count = _tag_pattern().subn("&lt;", text)  # the match is only the ``<``
        return escaped, count > 0
    # Read the text as a model would: look-alikes as ASCII, invisible characters left out
    # (``where[i]`` is the place in ``text`` of the probe's character ``i``).
    probe = text.translate(_LOOKALIKES) if _LOOKALIKE.search(text) else text
    where: list[int] | None = None
    if _INVISIBLE.search(probe):
        where = [i for i, char in enumerate(probe) if char not in _INVISIBLE_CHARS]
        probe = _INVISIBLE.sub("", probe)
    starts = [m.start() for m in _tag_pattern().finditer(probe)]
    if not starts:
        return text, False
    pieces: list[str] = []
    last = 0
    for start in starts:
        at = where[start] if where is not None else start
        pieces += (text[last:at], "&lt;")
        last = at + 1
    pieces.append(text[last:])
    return "".join(pieces), True
