"""Permission modes and the order of power used to cap a child by its parent.

What each mode does (the checker applies rules first; ``deny`` rules hold in every mode):

- ``plan``: read-only. Tools that are not read-only are denied; reads follow the rules.
- ``dontAsk``: like ``default``, but whatever would be asked is denied instead.
- ``default``: reads are allowed, anything else needs an allow rule or the user's approval.
- ``acceptEdits``: ``default`` plus file edits inside the working roots without asking.
- ``bypassPermissions``: everything not denied (and not under an ``ask`` rule) is allowed.

The order of power, weakest first::

    plan < dontAsk < default < acceptEdits < bypassPermissions

Each step up only turns some ``deny``/``ask`` decisions into ``ask``/``allow``, with one
exception: ``plan`` and ``dontAsk`` are not really comparable (``plan`` may still *ask* to use a
read-only tool that an ``ask`` rule names, ``dontAsk`` may run an allowed write). The rank puts
``plan`` lowest and the capping in ``context.derive_child`` closes the gap by carrying a
separate *asks are denied* bit down the tree: a child of a ``dontAsk`` parent that ends up in
``plan`` is ``plan`` with asks denied, the meet of the two. With that bit, a child's decision is
never more permissive than its parent's for any tool call.
"""

from __future__ import annotations

from typing import Final, get_args

from subagents.settings import PermissionModeName

PermissionMode = PermissionModeName

PERMISSION_MODES: Final[tuple[PermissionMode, ...]] = get_args(PermissionModeName)

_RANK: Final[dict[PermissionMode, int]] = {
    "plan": 0,
    "dontAsk": 1,
    "default": 2,
    "acceptEdits": 3,
    "bypassPermissions": 4,
}


def mode_rank(mode: PermissionMode) -> int:
    """The mode's place in the order of power (0 = weakest)."""
    return _RANK[mode]


def cap_mode(child: PermissionMode, parent: PermissionMode) -> PermissionMode:
    """The child's mode, lowered to the parent's when it would be more powerful."""
    return child if mode_rank(child) <= mode_rank(parent) else parent


def parse_mode(value: str, *, where: str = "permission mode") -> PermissionMode:
    """Validate a mode name from the CLI or a definition; ``ValueError`` names the choices."""
    for mode in PERMISSION_MODES:
        if value == mode:
            return mode
    choices = ", ".join(PERMISSION_MODES)
    raise ValueError(f"invalid {where} {value!r}: expected one of {choices}")
