"""Claude Code compatible command hooks (SPEC §12): settings, matchers, runner, engine.

``parse_hooks`` validates a settings ``hooks`` block, ``HookEngine`` fires the events and
implements the loop's ``LoopHooks`` protocol. Importing this package runs nothing.
"""

from __future__ import annotations

from subagents.hooks.config import (
    DEFAULT_TIMEOUT_S,
    HOOK_EVENTS,
    HookCommand,
    HookConfig,
    HookConfigError,
    MatcherGroup,
    parse_hooks,
)
from subagents.hooks.engine import MAX_CONSECUTIVE_STOP_BLOCKS, HookEngine
from subagents.hooks.matchers import Matcher, compile_matcher
from subagents.hooks.output import HookOutcome, interpret
from subagents.hooks.runner import HookRun, clean_environment, run_command_hook, run_hooks

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "HOOK_EVENTS",
    "MAX_CONSECUTIVE_STOP_BLOCKS",
    "HookCommand",
    "HookConfig",
    "HookConfigError",
    "HookEngine",
    "HookOutcome",
    "HookRun",
    "Matcher",
    "MatcherGroup",
    "clean_environment",
    "compile_matcher",
    "interpret",
    "parse_hooks",
    "run_command_hook",
    "run_hooks",
]
