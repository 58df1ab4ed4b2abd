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


def new_id(task_type: str = "local_agent") -> str:
    """A fresh id such as ``a3k9x0c2m`` for ``local_agent``."""
    letter = TYPE_LETTERS[task_type]
    # One 8-byte draw per id, each byte reduced mod 36 (a slight bias toward the first four
    # characters, ~2.9e12 ids all the same; Claude Code draws its ids the same way).
    return letter + "".join(ALPHABET[byte % 36] for byte in secrets.token_bytes(8))


def is_valid_id(value: str) -> bool:
    return (
        len(value) == 9
        and value[0] in TYPE_LETTERS.values()
        and all(ch in ALPHABET for ch in value[1:])
    )
