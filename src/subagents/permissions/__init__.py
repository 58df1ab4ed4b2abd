"""Permissions (SPEC §13): rules, modes, the per-call checker, and how children inherit them.

``rules`` parses and matches Claude Code's rule syntax, ``globs`` the file patterns,
``modes`` orders the modes by power, ``context`` holds one agent's permission state and
derives a child's, ``decision`` turns rules and mode into allow/deny/ask, ``denials`` counts
denials per agent, and ``checker`` resolves asks (prompt, headless, background) and is the
``can_use_tool`` callable the loop calls.
"""

from __future__ import annotations

from subagents.permissions.checker import (
    DEFAULT_ASK_TIMEOUT,
    AskCallback,
    PermissionChecker,
    PermissionRequest,
    serialized,
)
from subagents.permissions.context import PermissionContext, context_from_settings, derive_child
from subagents.permissions.decision import decide
from subagents.permissions.denials import DenialLimits, DenialTracker
from subagents.permissions.modes import (
    PERMISSION_MODES,
    PermissionMode,
    cap_mode,
    mode_rank,
    parse_mode,
)
from subagents.permissions.rules import PermissionRule, RuleScope, parse_rule
from subagents.permissions.verdicts import Decision

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "PERMISSION_MODES",
    "AskCallback",
    "Decision",
    "DenialLimits",
    "DenialTracker",
    "PermissionChecker",
    "PermissionContext",
    "PermissionMode",
    "PermissionRequest",
    "PermissionRule",
    "RuleScope",
    "cap_mode",
    "context_from_settings",
    "decide",
    "derive_child",
    "mode_rank",
    "parse_mode",
    "parse_rule",
    "serialized",
]
