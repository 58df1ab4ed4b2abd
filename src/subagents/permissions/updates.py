"""Permission updates: Claude Code's ``updatedPermissions`` (an SDK ``can_use_tool`` allow, the
interactive ``/permissions``), applied to a ``PermissionContext``.

``apply_permission_updates`` returns the new context (all or none: a failing update raises
before anything changes). Which contexts an update reaches is the checker's business
(``PermissionChecker.apply_updates``: rule changes hold for every agent of the session, the
mode and directories for the one checker).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from subagents.permissions.context import PermissionContext
from subagents.permissions.rules import PermissionRule, parse_rule

Line = dict[str, Any]

RULE_UPDATES = frozenset({"addRules", "replaceRules", "removeRules"})
"""The update kinds that change rules (a session's, for all its agents)."""


def apply_permission_updates(
    context: PermissionContext, updates: list[Any], warn: Callable[[str], None]
) -> PermissionContext:
    """The ``updatedPermissions`` of an allow, applied to a ``PermissionContext`` (all or none:
    a failing update raises before anything changes). Destinations other than ``session``
    are honoured for this session only, with a warning: settings files are not rewritten."""
    result = context
    for update in updates:
        if not isinstance(update, dict):
            raise TypeError(f"a permission update must be an object, got {update!r}")
        destination = update.get("destination", "session")
        if destination != "session":
            warn(f"permission update for {destination!r} applied to this session only")
        result = _apply_one(result, update)
    return result


def _apply_one(context: PermissionContext, update: Line) -> PermissionContext:
    kind = update["type"]
    if kind in ("addRules", "replaceRules", "removeRules"):
        behavior = update["behavior"]
        if behavior not in ("allow", "deny", "ask"):
            raise ValueError(f"unknown rule behavior {behavior!r}")
        rules = tuple(_rule(r) for r in update["rules"])
        current: tuple[PermissionRule, ...] = getattr(context, behavior)
        if kind == "addRules":  # a rule already there is not added twice
            held = {str(r) for r in current}
            new = current + tuple(r for r in rules if str(r) not in held)
        elif kind == "replaceRules":
            new = rules
        else:
            texts = {str(r) for r in rules}
            new = tuple(r for r in current if str(r) not in texts)
        if behavior == "allow":
            return replace(context, allow=new)
        return replace(context, deny=new) if behavior == "deny" else replace(context, ask=new)
    if kind == "setMode":
        from subagents.permissions.modes import parse_mode

        return replace(context, mode=parse_mode(update["mode"]))
    if kind in ("addDirectories", "removeDirectories"):
        dirs = tuple(Path(d).expanduser().resolve(strict=False) for d in update["directories"])
        if kind == "addDirectories":
            return replace(context, additional_directories=context.additional_directories + dirs)
        kept = tuple(d for d in context.additional_directories if d not in dirs)
        return replace(context, additional_directories=kept)
    raise ValueError(f"unknown permission update type {kind!r}")


def _rule(raw: Any) -> PermissionRule:
    tool = raw["toolName"]
    content = raw.get("ruleContent")
    text = tool if not content else f"{tool}({content})"
    return parse_rule(text, "SDK permission update")


def allowed_rules(updates: list[Any]) -> tuple[PermissionRule, ...]:
    """The allow rules ``addRules`` updates add (what a teammate's relay carries on); the
    updates were applied already, so they are well formed."""
    return tuple(
        _rule(raw)
        for update in updates
        if update.get("type") == "addRules" and update.get("behavior") == "allow"
        for raw in update["rules"]
    )
