"""Identifiers for tasks and agents: a type letter plus 8 characters from a CSPRNG.

Output files are named after task ids, so an id must not be guessable: someone able to predict the
next id could plant a symlink at its output path ahead of time. ``secrets`` gives 36^8 (~2.8e12)
possibilities per letter; the alphabet is digits and lower-case letters only, so ids never collide
on case-insensitive file systems.
"""

from __future__ import annotations

import os
import secrets

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
TYPE_LETTERS = {
    "local_bash": "b",
    "local_agent": "a",
    "remote_agent": "r",
    "in_process_teammate": "t",
    "local_workflow": "w",
    "monitor": "m",
    "dream": "d",
}


_BYTE_TO_CHAR = bytes(ord(ALPHABET[byte % 36]) for byte in range(256))
"""``bytes.translate`` table: each byte to ``ALPHABET[byte % 36]`` (no Python call per byte;
ids are drawn for every child and task)."""
_LETTERS = frozenset(TYPE_LETTERS.values())


_DRAWN_IDS = 64
"""Ids whose random bytes are drawn from the CSPRNG at once: one ``getrandom`` system call per
64 ids instead of one per id (every child draws one; a 1,000-child swarm drew a thousand)."""

_pool: list[str] = []
"""Drawn id bodies not handed out yet; emptied in a forked child, so that parent and child never
hand out the same ids."""
_fork_hook: list[bool] = []


def new_id(task_type: str = "local_agent") -> str:
    """A fresh id such as ``a3k9x0c2m`` for ``local_agent``."""
    letter = TYPE_LETTERS[task_type]
    try:
        return letter + _pool.pop()
    except IndexError:  # (a pop, not a check first: another thread may take the last one)
        return letter + _draw()


def _draw() -> str:
    """Draw ``_DRAWN_IDS`` bodies, keep all but one. 8 random bytes per id, each reduced mod 36
    (a slight bias toward the first four characters, ~2.9e12 ids all the same; Claude Code
    draws its ids the same way)."""
    if not _fork_hook:
        _fork_hook.append(True)
        os.register_at_fork(after_in_child=_pool.clear)
    drawn = secrets.token_bytes(8 * _DRAWN_IDS).translate(_BYTE_TO_CHAR).decode("ascii")
    _pool.extend(drawn[i : i + 8] for i in range(8, len(drawn), 8))
    return drawn[:8]


def is_valid_id(value: str) -> bool:
    # ``strip`` removes every leading and trailing alphabet character: nothing is left exactly
    # when all eight are in the alphabet.
    return len(value) == 9 and value[0] in _LETTERS and not value[1:].strip(ALPHABET)
