"""Which entry of a script an agent binds to (SPEC §19): the first entry, in file order, whose
``agent_type`` equals the agent's (absent: any type) and whose ``match`` regex finds something
in its prompt (``re.search``; absent: any prompt).

Why an index: binding used to search every entry before the one that matched, so a script of N
children cost N²/2 regex searches (1,275 per run of the 50-child CLI fan-out, 500,000 for a
script of 1,000). Generated scripts name each child by an anchored literal (``"^job 7$"``): such
an entry is found with one dict look-up, and only the other entries are searched, in order, up to
the literal one — so the first match in file order still wins, with the same match groups.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Generic, Protocol, TypeVar

_SPECIAL = frozenset(".^$*+?{}[]\\|()")
"""Characters with a meaning in a pattern (outside a class, without flags: a flag is set by
``(?…)``, which holds one). A pattern ``^TEXT$`` with none of them in TEXT matches TEXT itself."""


class Bindable(Protocol):
    @property
    def index(self) -> int: ...

    @property
    def agent_type(self) -> str | None: ...

    @property
    def match(self) -> re.Pattern[str] | None: ...


E = TypeVar("E", bound=Bindable)

Groups = tuple[str | None, ...]
"""``(group(0), *groups())`` of the entry's match; ``()`` for an entry without ``match``."""


def anchored_literal(pattern: str) -> str | None:
    """TEXT when ``pattern`` is ``^TEXT$`` with no special character in TEXT, else None.
    ``re.search`` of such a pattern finds TEXT in exactly two prompts: TEXT and TEXT + newline
    (``$`` also matches before a string's final newline)."""
    if len(pattern) < 2 or pattern[0] != "^" or pattern[-1] != "$":
        return None
    text = pattern[1:-1]
    return None if any(char in _SPECIAL for char in text) else text


class EntryIndex(Generic[E]):
    """The entries of a script, for ``find``; one ``_TypeIndex`` per agent type asked for."""

    __slots__ = ("_by_type", "_entries")

    def __init__(self, entries: Sequence[E]) -> None:
        self._entries = tuple(entries)
        self._by_type: dict[str, _TypeIndex[E]] = {}

    def find(self, agent_type: str, prompt: str) -> tuple[E, Groups] | None:
        """The entry an agent of ``agent_type`` with ``prompt`` binds to, and its groups."""
        index = self._by_type.get(agent_type)
        if index is None:
            entries = (e for e in self._entries if e.agent_type in (None, agent_type))
            index = self._by_type[agent_type] = _TypeIndex(entries)
        return index.find(prompt)


class _TypeIndex(Generic[E]):
    __slots__ = ("literals", "searched")

    def __init__(self, entries: Iterable[E]) -> None:
        self.literals: dict[str, E] = {}
        """The first entry of each anchored literal."""
        self.searched: list[E] = []
        """Every other entry, in file order."""
        for entry in entries:
            text = None if entry.match is None else anchored_literal(entry.match.pattern)
            if text is None:
                self.searched.append(entry)
            else:
                self.literals.setdefault(text, entry)

    def find(self, prompt: str) -> tuple[E, Groups] | None:
        literal, text = self._literal(prompt)
        for entry in self.searched:
            if literal is not None and entry.index > literal.index:
                break
            if entry.match is None:
                return entry, ()
            found = entry.match.search(prompt)
            if found is not None:
                return entry, (found.group(0), *found.groups())
        if literal is not None:
            return literal, (text,)
        return None

    def _literal(self, prompt: str) -> tuple[E | None, str]:
        """The first literal entry matching ``prompt`` (as itself, or without its final
        newline), and the text it matched."""
        literals = self.literals
        entry, text = literals.get(prompt), prompt
        if prompt.endswith("\n"):
            shorter = literals.get(prompt[:-1])
            if shorter is not None and (entry is None or shorter.index < entry.index):
                entry, text = shorter, prompt[:-1]
        return entry, text
