"""Hook matchers: which hook groups apply to one event occurrence.

Claude Code settings use one ``matcher`` string per group, read three ways (SPEC §12):

* ``"*"``, ``""`` or no matcher at all matches everything;
* a value made only of letters, digits, ``_``, ``-``, ``,``, ``|`` and spaces is an *exact list*:
  it is split on ``|`` and ``,``, each part trimmed, and the subject must equal one part
  (``"Edit|Write"`` matches ``Edit`` but not ``NotebookEdit``);
* anything else is a regular expression tested with ``re.search`` — unanchored, like the
  ``RegExp.test`` Claude Code uses, so ``"mcp__.*"`` or ``"^Notebook"`` keep the meaning they
  have there; write ``^...$`` to anchor.

What the subject is depends on the event: the tool name for tool events, ``agent_type`` for
SubagentStart/SubagentStop, the source/reason for SessionStart/SessionEnd; other events have no
subject and every group applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_EXACT_LIST = re.compile(r"[A-Za-z0-9_\-,| ]*")
_SEPARATORS = re.compile(r"[|,]")


@dataclass(kw_only=True, frozen=True, slots=True)
class Matcher:
    """A compiled matcher; ``source`` is the text as written in the settings."""

    source: str
    names: frozenset[str] | None = None
    pattern: re.Pattern[str] | None = None

    def matches(self, subject: str | None) -> bool:
        """Whether a group with this matcher applies; ``None`` subject = event without one."""
        if subject is None or (self.names is None and self.pattern is None):
            return True
        if self.names is not None:
            return subject in self.names
        assert self.pattern is not None
        return self.pattern.search(subject) is not None


MATCH_ALL = Matcher(source="*")


def compile_matcher(text: str | None) -> Matcher:
    """Compile a settings matcher; raises ``ValueError`` naming the text if the regex is bad."""
    if text is None:
        return MATCH_ALL
    stripped = text.strip()
    if stripped in ("", "*"):
        return Matcher(source=text)
    if _EXACT_LIST.fullmatch(stripped):
        names = frozenset(p.strip() for p in _SEPARATORS.split(stripped) if p.strip())
        return Matcher(source=text, names=names) if names else Matcher(source=text)
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {text!r}: {exc}") from None
    return Matcher(source=text, pattern=pattern)
