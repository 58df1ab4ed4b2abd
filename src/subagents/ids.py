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
    return letter + "".join(secrets.choice(ALPHABET) for _ in range(8))


def is_valid_id(value: str) -> bool:
    return (
        len(value) == 9
        and value[0] in TYPE_LETTERS.values()
        and all(ch in ALPHABET for ch in value[1:])
    )
