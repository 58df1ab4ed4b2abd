"""Runtime knobs, read from the environment once per session (SPEC §19 "Knobs").

Every knob has the documented default; Claude Code's variable names are accepted where the spec
says so. Reading happens in ``RuntimeConfig.from_env``, never at import.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from subagents.gc_heap import RUNTIME_THRESHOLDS

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


def _flag(env: Mapping[str, str], names: tuple[str, ...], default: bool) -> bool:
    for name in names:
        raw = env.get(name)
        if raw is None:
            continue
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise ValueError(f"environment variable {name}={raw!r} is not a boolean (use 1 or 0)")
    return default


@dataclass(kw_only=True, frozen=True)
class RuntimeConfig:
    """Limits and switches of the sub-agent runtime."""

    max_spawn_depth: int = 3
    max_concurrent_subagents: int = 20
    auto_background_ms: int = 120_000
    stall_timeout_ms: int = 600_000
    task_max_output: int = 32_000
    print_bg_wait_ms: int = 600_000
    fork_enabled: bool = True
    background_disabled: bool = False
    progress_after_ms: int = 2_000
    tool_concurrency: int = 10
    force_async: bool = False
    """Run every child in the background (coordinator mode)."""
    parallel_tasks_count: int = 1
    """Copies of each plain sync delegation, merged by a synthesis agent (SPEC §14)."""
    telemetry: bool = False
    """OpenTelemetry export (docs/telemetry.md); the ``OTEL_*`` variables configure it."""
    autocompact: bool = True
    """Compact a history automatically near its model's window (docs/compaction.md)."""
    autocompact_tokens: int | None = None
    """An absolute compaction threshold in tokens, instead of the model's window."""
    agent_teams: bool = False
    """The team tools (TeamCreate, TaskCreate, …; docs/teams.md), opt-in as in Claude Code."""
    teammate_mode: str = "process"
    """``process`` (each teammate its own OS process) or ``in-process``."""
    team_quiet_ms: int = 30_000
    """How long a team message waits for a quiet team before the lead gets it anyway."""
    freeze_import_heap: bool = True
    """At the process's first session, keep every object alive then (the imports) out of later
    garbage collections (``subagents.gc_heap``); ``SUBAGENTS_GC_FREEZE=0`` leaves the heap be."""
    gc_thresholds: tuple[int, int, int] | None = RUNTIME_THRESHOLDS
    """The collector's thresholds the process's first session sets when the program left
    Python's defaults (``gc_heap.tune_collector``); None leaves them be.
    ``SUBAGENTS_GC_THRESHOLDS=700,10,100`` sets others, ``off`` none."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RuntimeConfig:
        env = os.environ if env is None else env
        output = _int(env, "SUBAGENTS_TASK_MAX_OUTPUT_LENGTH", cls.task_max_output)
        if not 1 <= output <= 160_000:
            raise ValueError("SUBAGENTS_TASK_MAX_OUTPUT_LENGTH must be between 1 and 160000")
        return cls(
            max_spawn_depth=_int(env, "SUBAGENTS_MAX_SPAWN_DEPTH", cls.max_spawn_depth),
            max_concurrent_subagents=_int(
                env, "SUBAGENTS_MAX_CONCURRENT_SUBAGENTS", cls.max_concurrent_subagents
            ),
            auto_background_ms=_int(env, "SUBAGENTS_AUTO_BACKGROUND_MS", cls.auto_background_ms),
            stall_timeout_ms=_int(
                env, "SUBAGENTS_ASYNC_AGENT_STALL_TIMEOUT_MS", cls.stall_timeout_ms
            ),
            task_max_output=output,
            tool_concurrency=max(
                1, _int(env, "SUBAGENTS_MAX_TOOL_CONCURRENCY", cls.tool_concurrency)
            ),
            force_async=_flag(env, ("SUBAGENTS_FORCE_ASYNC",), default=cls.force_async),
            parallel_tasks_count=max(
                1, _int(env, "SUBAGENTS_PARALLEL_TASKS_COUNT", cls.parallel_tasks_count)
            ),
            print_bg_wait_ms=_int(env, "SUBAGENTS_PRINT_BG_WAIT_MS", cls.print_bg_wait_ms),
            autocompact=not _flag(
                env, ("SUBAGENTS_DISABLE_AUTOCOMPACT", "DISABLE_AUTO_COMPACT"), default=False
            ),
            autocompact_tokens=_int(env, "SUBAGENTS_AUTOCOMPACT_TOKENS", 0) or None,
            fork_enabled=_flag(
                env,
                ("SUBAGENTS_FORK_SUBAGENT", "CLAUDE_CODE_FORK_SUBAGENT"),
                default=cls.fork_enabled,
            ),
            background_disabled=_flag(
                env,
                ("SUBAGENTS_DISABLE_BACKGROUND_TASKS", "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS"),
                default=cls.background_disabled,
            ),
            telemetry=_flag(
                env, ("SUBAGENTS_TELEMETRY", "CLAUDE_CODE_ENABLE_TELEMETRY"), default=cls.telemetry
            ),
            agent_teams=_flag(
                env,
                ("SUBAGENTS_AGENT_TEAMS", "CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS"),
                default=cls.agent_teams,
            ),
            teammate_mode=_teammate_mode(env),
            team_quiet_ms=_int(env, "SUBAGENTS_TEAM_QUIET_MS", cls.team_quiet_ms),
            freeze_import_heap=_flag(env, ("SUBAGENTS_GC_FREEZE",), default=cls.freeze_import_heap),
            gc_thresholds=_thresholds(env, cls.gc_thresholds),
        )


def _thresholds(
    env: Mapping[str, str], default: tuple[int, int, int] | None
) -> tuple[int, int, int] | None:
    name = "SUBAGENTS_GC_THRESHOLDS"
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() in _FALSE:
        return None
    parts = raw.split(",")
    try:
        values = tuple(int(part) for part in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or min(values) < 1:
        raise ValueError(
            f"environment variable {name}={raw!r}: expected three positive integers"
            " such as 700,10,100, or off"
        )
    return values[0], values[1], values[2]


def _teammate_mode(env: Mapping[str, str]) -> str:
    raw = env.get("SUBAGENTS_TEAMMATE_MODE", "process").strip().lower() or "process"
    if raw not in ("process", "in-process"):
        raise ValueError("SUBAGENTS_TEAMMATE_MODE must be 'process' or 'in-process'")
    return raw
