"""Identifiers for tasks and agents: a type letter plus 8 characters from a CSPRNG.

Output files are named after task ids, so an id must not be guessable: someone able to predict the
next id could plant a symlink at its output path ahead of time. ``secrets`` gives 36^8 (~2.8e12)
possibilities per letter; the alphabet is digits and lower-case letters only, so ids never collide
on case-insensitive file systems.
"""

from __future__ import annotations

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


def new_id(task_type: str = "local_agent") -> str:
    """A fresh id such as ``a3k9x0c2m`` for ``local_agent``."""
    letter = TYPE_LETTERS[task_type]
    # One 8-byte draw per id, each byte reduced mod 36 (a slight bias toward the first four
    # characters, ~2.9e12 ids all the same; Claude Code draws its ids the same way).
    return letter + secrets.token_bytes(8).translate(_BYTE_TO_CHAR).decode("ascii")


def is_valid_id(value: str) -> bool:
    # ``strip`` removes every leading and trailing alphabet character: nothing is left exactly
    # when all eight are in the alphabet.
    return len(value) == 9 and value[0] in _LETTERS and not value[1:].strip(ALPHABET)
