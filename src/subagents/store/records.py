"""The sidecar record of one child run (schema version 2) and its public view.

A sidecar is the durable truth about a child: who started it (parent session, project, tool call),
what it was configured with (a frozen snapshot, so ``resume_from`` never re-reads a definition
that changed since), where it stands (status, activity, owner process) and how it ended (result,
stats, worktree). Records are immutable values: a store changes one by writing a new version
(``apply_changes``), which keeps cached copies safe to hand out.

JSON keys are camelCase (``agentId``, ``lastActiveAt``); times are epoch seconds (floats).
Older schema versions are read through ``subagents.store.migrations``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, get_args

from subagents.store._reading import (
    REQUIRED,
    Reader,
    is_int,
    is_obj,
    is_str_list,
    optional,
)
from subagents.store.errors import InvalidRecordError, TerminalStatusError
from subagents.store.process_identity import ProcessIdentity

SCHEMA_VERSION = 2

AgentStatus = Literal["running", "completed", "failed", "killed"]
RestartRecovery = Literal["completed", "interrupted", "failed"]
WorktreeOutcome = Literal["active", "kept", "removed"]

TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "killed"})

IMMUTABLE_FIELDS: frozenset[str] = frozenset(
    {"schema_version", "agent_id", "session_id", "project_path", "created_at"}
)
"""Fields ``update`` refuses to change: identity and the access-control key (session, project)."""


@dataclass(kw_only=True, frozen=True)
class Lineage:
    """Where a run comes from: ``resume_from`` makes a new id, linked here to its source."""

    root_agent_id: str
    """The first run of the chain (the run's own id when it was not resumed)."""
    resumed_from: str | None = None
    """The terminal run this one continues, or None for a fresh run."""
    resume_depth: int = 0
    """How many resumes separate this run from the root."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rootAgentId": self.root_agent_id,
            "resumedFrom": self.resumed_from,
            "resumeDepth": self.resume_depth,
        }

    @classmethod
    def read(cls, r: Reader) -> Lineage:
        return cls(
            root_agent_id=r.str_("rootAgentId"),
            resumed_from=r.opt_str("resumedFrom"),
            resume_depth=r.int_("resumeDepth", 0),
        )


@dataclass(kw_only=True, frozen=True)
class ConfigSnapshot:
    """The child's configuration frozen at start; a resume runs with exactly this."""

    model: str = ""
    permission_mode: str = "default"
    tools: tuple[str, ...] | None = None
    """Tool names the child may use; None means it inherited the parent's set."""
    system_prompt: str = ""
    max_turns: int | None = None
    isolation: str | None = None
    definition_source: str = ""
    """Where the agent definition came from (built-in, user, project, cli)."""
    definition_path: str | None = None
    thinking: dict[str, Any] | None = None
    memory: str | None = None
    """The agent's memory scope (user, project, local), so a resume keeps its folder."""
    memory_only_tools: tuple[str, ...] = ()
    """Tools the agent holds only for its memory folder (they work only there)."""
    max_tokens: int | None = None
    max_wall_ms: int | None = None
    max_cost_usd: float | None = None
    _json: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False, hash=False
    )
    """``to_dict``'s answer, made at the first call: one snapshot is shared by every child of a
    type (``DurableRecords.shared_config``) and written into each of their records twice."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a new dict each call; its ``tools`` list and ``thinking`` are shared
        between calls: read them, do not change them)."""
        made = self._json
        if made is None:
            made = self._make_dict()
            object.__setattr__(self, "_json", made)  # frozen: a cache, not a field change
        return dict(made)

    def _make_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "permissionMode": self.permission_mode,
            "tools": None if self.tools is None else list(self.tools),
            "systemPrompt": self.system_prompt,
            "maxTurns": self.max_turns,
            "isolation": self.isolation,
            "definitionSource": self.definition_source,
            "definitionPath": self.definition_path,
            "thinking": self.thinking,
            **self._later_fields(),
        }

    def _later_fields(self) -> dict[str, Any]:
        """Fields added after schema version 2 was fixed (memory, budgets): optional, written
        only when set, so a record without them reads and writes back the same."""
        later: dict[str, Any] = {
            "memory": self.memory,
            "memoryOnlyTools": list(self.memory_only_tools) or None,
            "maxTokens": self.max_tokens,
            "maxWallTimeMs": self.max_wall_ms,
            "maxBudgetUsd": self.max_cost_usd,
        }
        return {key: value for key, value in later.items() if value is not None}

    @classmethod
    def read(cls, r: Reader) -> ConfigSnapshot:
        tools = r.get("tools", optional(is_str_list), "a list of strings or null", None)
        return cls(
            model=r.str_("model", ""),
            permission_mode=r.str_("permissionMode", "default"),
            tools=None if tools is None else tuple(tools),
            system_prompt=r.str_("systemPrompt", ""),
            max_turns=r.opt_int("maxTurns"),
            isolation=r.opt_str("isolation"),
            definition_source=r.str_("definitionSource", ""),
            definition_path=r.opt_str("definitionPath"),
            thinking=r.get("thinking", optional(is_obj), "an object or null", None),
            memory=r.opt_str("memory"),
            memory_only_tools=tuple(
                r.get("memoryOnlyTools", is_str_list, "a list of strings", None) or ()
            ),
            max_tokens=r.opt_int("maxTokens"),
            max_wall_ms=r.opt_int("maxWallTimeMs"),
            max_cost_usd=r.opt_float("maxBudgetUsd"),
        )


@dataclass(kw_only=True, frozen=True)
class RunResult:
    """How the run ended: final text, the loop's end reason and any error message."""

    text: str = ""
    reason: str = ""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "reason": self.reason, "error": self.error}

    @classmethod
    def read(cls, r: Reader) -> RunResult:
        return cls(text=r.str_("text", ""), reason=r.str_("reason", ""), error=r.opt_str("error"))


@dataclass(kw_only=True, frozen=True)
class TokenUsage:
    """The four token counters, summed over the run."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }

    @classmethod
    def read(cls, r: Reader) -> TokenUsage:
        return cls(**{name: r.int_(name, 0) for name in cls().to_dict()})


_NO_RESULT = RunResult()
NO_RESULT = _NO_RESULT
"""A running record's result (nothing yet), shared: what ``SidecarRecord`` defaults to."""
_NO_USAGE = TokenUsage()
"""Shared empty values (frozen): a running child's record holds these instead of three objects
of its own that the garbage collector would visit for every waiting child."""


@dataclass(kw_only=True, frozen=True)
class RunStats:
    """Counters written once, at the terminal state (SPEC §8)."""

    num_turns: int = 0
    total_tool_use_count: int = 0
    total_tokens: int = 0
    usage: TokenUsage = _NO_USAGE
    total_duration_ms: int = 0
    cost_usd: float = 0.0
    """US dollars of the run's model calls (``models.pricing``); written only when not 0."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "numTurns": self.num_turns,
            "totalToolUseCount": self.total_tool_use_count,
            "totalTokens": self.total_tokens,
            "usage": self.usage.to_dict(),
            "totalDurationMs": self.total_duration_ms,
        }
        if self.cost_usd:
            data["costUsd"] = self.cost_usd
        return data

    @classmethod
    def read(cls, r: Reader) -> RunStats:
        return cls(
            num_turns=r.int_("numTurns", 0),
            total_tool_use_count=r.int_("totalToolUseCount", 0),
            total_tokens=r.int_("totalTokens", 0),
            usage=TokenUsage.read(r.child("usage")),
            total_duration_ms=r.int_("totalDurationMs", 0),
            cost_usd=r.float_("costUsd", 0.0),
        )


_NO_STATS = RunStats()
NO_STATS = _NO_STATS
"""A running record's stats (none yet), shared: what ``SidecarRecord`` defaults to."""


@dataclass(kw_only=True, frozen=True)
class WorktreeInfo:
    """The child's isolated worktree; ``outcome`` is ``active`` until the run ends."""

    path: str
    branch: str
    outcome: WorktreeOutcome = "active"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "branch": self.branch, "outcome": self.outcome}

    @classmethod
    def read(cls, r: Reader) -> WorktreeInfo:
        return cls(
            path=r.str_("path"),
            branch=r.str_("branch"),
            outcome=r.choice("outcome", get_args(WorktreeOutcome), "active"),
        )


@dataclass(kw_only=True, frozen=True)
class SidecarRecord:
    """One child run's durable record (schema version 2); see the module docstring."""

    schema_version: int = SCHEMA_VERSION
    agent_id: str
    agent_type: str
    description: str = ""
    prompt: str = ""
    status: AgentStatus = "running"
    session_id: str
    """The parent session: with ``project_path``, the key that decides who may see this run."""
    project_path: str
    """The canonical project path (symlinks resolved) the run belongs to."""
    parent_agent_id: str | None = None
    is_background: bool = False
    tool_use_id: str | None = None
    """The parent's tool call that started this run (durable identity of the Agent call)."""
    lineage: Lineage
    config: ConfigSnapshot = field(default_factory=ConfigSnapshot)
    created_at: float
    last_active_at: float
    ended_at: float | None = None
    process: ProcessIdentity | None = None
    """The owner process while running, so a reused PID is not taken for the owner."""
    result: RunResult = _NO_RESULT
    stats: RunStats = _NO_STATS
    worktree: WorktreeInfo | None = None
    output_path: str | None = None
    """Where the full final report is saved (the inline copy is capped)."""
    transcript_path: str | None = None
    notified: bool = False
    """The parent's completion notification was queued (so a restart does not queue it twice)."""
    stop_requested: bool = False
    restart_recovery: RestartRecovery | None = None
    """Set by orphan reconciliation; ``failed`` means history could not be verified."""
    resumable: bool = False

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def to_dict(self) -> dict[str, Any]:
        """The JSON form written to disk (camelCase keys, nested objects as dicts)."""
        return {
            "schemaVersion": self.schema_version,
            "agentId": self.agent_id,
            "agentType": self.agent_type,
            "description": self.description,
            "prompt": self.prompt,
            "status": self.status,
            "sessionId": self.session_id,
            "projectPath": self.project_path,
            "parentAgentId": self.parent_agent_id,
            "isBackground": self.is_background,
            "toolUseId": self.tool_use_id,
            "lineage": self.lineage.to_dict(),
            "config": self.config.to_dict(),
            "createdAt": self.created_at,
            "lastActiveAt": self.last_active_at,
            "endedAt": self.ended_at,
            "process": None if self.process is None else self.process.to_dict(),
            "result": self.result.to_dict(),
            "stats": self.stats.to_dict(),
            "worktree": None if self.worktree is None else self.worktree.to_dict(),
            "outputPath": self.output_path,
            "transcriptPath": self.transcript_path,
            "notified": self.notified,
            "stopRequested": self.stop_requested,
            "restartRecovery": self.restart_recovery,
            "resumable": self.resumable,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<sidecar>") -> SidecarRecord:
        """Parse a version-2 dict; older versions go through ``migrations.load_record``."""
        r = Reader(data=data, source=source, where="sidecar")
        if r.get("schemaVersion", is_int, "an integer", REQUIRED) != SCHEMA_VERSION:
            raise InvalidRecordError(f"{source}: sidecar.schemaVersion: expected {SCHEMA_VERSION}")
        return cls(**_identity_fields(r), **_state_fields(r))


def _identity_fields(r: Reader) -> dict[str, Any]:
    return {
        "agent_id": r.str_("agentId"),
        "agent_type": r.str_("agentType"),
        "description": r.str_("description", ""),
        "prompt": r.str_("prompt", ""),
        "session_id": r.str_("sessionId"),
        "project_path": r.str_("projectPath"),
        "parent_agent_id": r.opt_str("parentAgentId"),
        "is_background": r.bool_("isBackground", False),
        "tool_use_id": r.opt_str("toolUseId"),
        "lineage": Lineage.read(r.obj("lineage")),
        "config": ConfigSnapshot.read(r.child("config")),
        "created_at": r.float_("createdAt"),
    }


def _state_fields(r: Reader) -> dict[str, Any]:
    process = r.opt_obj("process")
    worktree = r.opt_obj("worktree")
    try:
        owner = None if process is None else ProcessIdentity.from_dict(dict(process.data))
    except ValueError as exc:
        raise InvalidRecordError(f"{r.source}: sidecar.{exc}") from exc
    return {
        "status": r.choice("status", get_args(AgentStatus)),
        "last_active_at": r.float_("lastActiveAt"),
        "ended_at": r.opt_float("endedAt"),
        "process": owner,
        "result": RunResult.read(r.child("result")),
        "stats": RunStats.read(r.child("stats")),
        "worktree": None if worktree is None else WorktreeInfo.read(worktree),
        "output_path": r.opt_str("outputPath"),
        "transcript_path": r.opt_str("transcriptPath"),
        "notified": r.bool_("notified", False),
        "stop_requested": r.bool_("stopRequested", False),
        "restart_recovery": r.choice("restartRecovery", (*get_args(RestartRecovery), None), None),
        "resumable": r.bool_("resumable", False),
    }


_PRIVATE_KEYS = ("prompt", "config", "projectPath", "process", "transcriptPath", "worktree")


def public_view(record: SidecarRecord) -> dict[str, Any]:
    """What a parent or a user may be shown of a run (SPEC §9).

    Omitted: the prompt, the config snapshot (system prompt, tools, model settings), the
    workspace (project path, transcript path holding the messages, worktree internals) and the
    owner's process identity. A *kept* worktree is named by ``worktreePath`` and
    ``worktreeBranch``, because the parent needs them to collect the child's changes.
    """
    view = record.to_dict()
    for key in _PRIVATE_KEYS:
        view.pop(key, None)
    if record.worktree is not None and record.worktree.outcome == "kept":
        view["worktreePath"] = record.worktree.path
        view["worktreeBranch"] = record.worktree.branch
    return view


def is_visible(record: SidecarRecord, *, session_id: str, project_path: str) -> bool:
    """SPEC §9 access rule: a run may be queried, stopped, adopted or resumed only from the same
    parent session *and* the same canonical project. Stores do not check it (``get`` is by id);
    every caller acting for a session does."""
    return record.session_id == session_id and record.project_path == project_path


_FIELD_NAMES = frozenset(f.name for f in fields(SidecarRecord))


def apply_changes(
    record: SidecarRecord, changes: Mapping[str, Any], *, now: float
) -> SidecarRecord:
    """The record after ``changes`` (field names), validated as a whole or refused as a whole.

    Shared by every store so they agree on the rules: identity fields never change, and a
    terminal status is final (the store refuses, rather than trusting every caller, because a
    late activity write racing a kill must not resurrect the run). Entering a terminal status
    stamps ``ended_at`` unless the change sets it.
    """
    return _update(record, changes, now=now)[0]


def terminal_record(
    record: SidecarRecord,
    status: str,
    result: RunResult,
    stats: RunStats,
    notified: bool,
    resumable: bool,
    now: float,
) -> SidecarRecord:
    """``apply_changes(record, {"status": status, "result": result, "stats": stats,
    "notified": notified, "resumable": resumable}, now=now)`` — a child's terminal write — with
    its checks made in line when every value is plain (``_PLAIN_VALUE``): no changes dict, no
    field-name set operations, no look-up and call per field (the five field names are known
    valid and none is immutable). Anything else — a record already terminal, a status that is
    not terminal, a value not plain — takes ``apply_changes`` itself, which refuses, normalises
    or raises as it always did. ``tests/test_terminal_record.py`` compares the two."""
    if (
        type(record) is SidecarRecord
        and record.status not in TERMINAL_STATUSES
        and type(status) is str
        and status in TERMINAL_STATUSES
        and type(notified) is bool
        and type(resumable) is bool
        and type(now) is float
        and now == now  # NaN: the checked path
        and type(result) is RunResult  # (``_plain_result`` in line)
        and type(result.text) is str
        and type(result.reason) is str
        and (result.error is None or type(result.error) is str)
        and _plain_stats(stats)
    ):
        fields = record.__dict__.copy()  # ``_plain_update``: ``replace`` without ``__init__``
        fields["status"] = status
        fields["result"] = result
        fields["stats"] = stats
        fields["notified"] = notified
        fields["resumable"] = resumable
        fields["ended_at"] = now
        updated = object.__new__(SidecarRecord)
        object.__setattr__(updated, "__dict__", fields)
        return updated
    changes = {
        "status": status,
        "result": result,
        "stats": stats,
        "notified": notified,
        "resumable": resumable,
    }
    return apply_changes(record, changes, now=now)


def changed_record(
    record: SidecarRecord, changes: Mapping[str, Any], *, now: float
) -> tuple[SidecarRecord, dict[str, Any]]:
    """``apply_changes`` and the updated record's JSON form (``to_dict``; when validating it
    built that already, that one)."""
    updated, data = _update(record, changes, now=now)
    if data is None:
        try:
            data = updated.to_dict()
        except (AttributeError, TypeError) as exc:
            raise InvalidRecordError(f"{_where(record)}: {sorted(changes)}: {exc}") from exc
    return updated, data


def _update(
    record: SidecarRecord, changes: Mapping[str, Any], *, now: float
) -> tuple[SidecarRecord, dict[str, Any] | None]:
    """The updated record, and its JSON form when checking it built one (the checked path)."""
    if not _FIELD_NAMES.issuperset(changes):
        unknown = sorted(set(changes) - _FIELD_NAMES)
        raise InvalidRecordError(f"{_where(record)}: unknown field(s) {unknown}")
    if not IMMUTABLE_FIELDS.isdisjoint(changes):
        frozen = sorted(
            k for k in IMMUTABLE_FIELDS & set(changes) if changes[k] != getattr(record, k)
        )
        if frozen:
            raise InvalidRecordError(f"{_where(record)}: field(s) {frozen} cannot change")
    current = record.status
    status = changes.get("status", current)
    was_terminal = current in TERMINAL_STATUSES
    if was_terminal and status != current:
        raise TerminalStatusError(
            f"agent {record.agent_id} is {current} (terminal); refusing status {status!r}"
        )
    updates = dict(changes)
    if status in TERMINAL_STATUSES and not was_terminal and "ended_at" not in updates:
        updates["ended_at"] = now
    if type(record) is SidecarRecord and _all_plain(updates):
        return _plain_update(record, updates), None
    return _checked_update(record, updates, changes)


def _all_plain(updates: dict[str, Any]) -> bool:
    """Every value is in the form a read gives back (``_PLAIN_VALUE``). A loop, not ``all()``
    over a generator: a generator's frame is resumed once per field."""
    plain = _PLAIN_VALUE
    for name, value in updates.items():
        check = plain.get(name)
        if check is None or not check(value):
            return False
    return True


def _where(record: SidecarRecord) -> str:
    """How an error names the update (made only when there is one)."""
    return f"update of agent {record.agent_id}"


def _plain_update(record: SidecarRecord, updates: dict[str, Any]) -> SidecarRecord:
    """``_checked_update`` for values already in the form a read gives back: the same record,
    without the round trip through JSON-shaped dicts (a terminal update spent ~18 µs there).
    No ``to_dict`` to prove it can be written: every changed value is of an exact built-in or
    record type (``_PLAIN_VALUE``) and the rest was a record already, so it can; the writer
    encodes it (``record_encoding``) without building that form."""
    fields = record.__dict__.copy()  # ``replace`` without re-running ``__init__``
    fields.update(updates)
    updated = object.__new__(SidecarRecord)
    object.__setattr__(updated, "__dict__", fields)  # (half the cost of two updates)
    return updated


def _checked_update(
    record: SidecarRecord, updates: dict[str, Any], changes: Mapping[str, Any]
) -> tuple[SidecarRecord, dict[str, Any]]:
    """Validate the changed fields by reading them back from the record's JSON form."""
    where = _where(record)
    try:
        updated = replace(record, **updates)
        data = updated.to_dict()
    except (AttributeError, TypeError) as exc:
        raise InvalidRecordError(f"{where}: {sorted(changes)}: {exc}") from exc
    # Only the changed fields need checking (the rest was valid already): re-reading the whole
    # record on every terminal or activity write cost more than the write itself.
    reader = Reader(data=data, source=where, where="sidecar")
    checked = {name: _FIELD_READERS[name](reader) for name in updates if name in _FIELD_READERS}
    if any(checked[name] != getattr(updated, name) for name in checked) or (
        set(updates) - set(_FIELD_READERS)
    ):
        normalised = SidecarRecord.from_dict(data, source=where)  # e.g. int -> float
        return normalised, normalised.to_dict()
    return updated, data


def _opt_process(r: Reader) -> ProcessIdentity | None:
    process = r.opt_obj("process")
    try:
        return None if process is None else ProcessIdentity.from_dict(dict(process.data))
    except ValueError as exc:
        raise InvalidRecordError(f"{r.source}: sidecar.{exc}") from exc


def _opt_worktree(r: Reader) -> WorktreeInfo | None:
    worktree = r.opt_obj("worktree")
    return None if worktree is None else WorktreeInfo.read(worktree)


_FIELD_READERS: dict[str, Callable[[Reader], Any]] = {
    "status": lambda r: r.choice("status", get_args(AgentStatus)),
    "last_active_at": lambda r: r.float_("lastActiveAt"),
    "ended_at": lambda r: r.opt_float("endedAt"),
    "process": _opt_process,
    "result": lambda r: RunResult.read(r.child("result")),
    "stats": lambda r: RunStats.read(r.child("stats")),
    "worktree": _opt_worktree,
    "output_path": lambda r: r.opt_str("outputPath"),
    "transcript_path": lambda r: r.opt_str("transcriptPath"),
    "notified": lambda r: r.bool_("notified", False),
    "stop_requested": lambda r: r.bool_("stopRequested", False),
    "restart_recovery": lambda r: r.choice(
        "restartRecovery", (*get_args(RestartRecovery), None), None
    ),
    "resumable": lambda r: r.bool_("resumable", False),
    "is_background": lambda r: r.bool_("isBackground", False),
    "description": lambda r: r.str_("description", ""),
}
"""Readers of the fields an update may change, so an update validates only what it changes."""


def _plain_str(value: Any) -> bool:
    return type(value) is str


def _plain_opt_str(value: Any) -> bool:
    return value is None or type(value) is str


def _plain_bool(value: Any) -> bool:
    return type(value) is bool


def _plain_time(value: Any) -> bool:
    return type(value) is float and value == value  # NaN != NaN: left to the checked path


def _plain_process(value: Any) -> bool:
    return value is None or (
        type(value) is ProcessIdentity
        and type(value.pid) is int
        and value.pid > 0
        and _plain_opt_str(value.start_identity)
        and _plain_opt_str(value.hostname)
    )


def _plain_result(value: Any) -> bool:
    return (
        type(value) is RunResult
        and type(value.text) is str
        and type(value.reason) is str
        and _plain_opt_str(value.error)
    )


def _plain_stats(value: Any) -> bool:
    if type(value) is not RunStats or type(value.usage) is not TokenUsage:
        return False
    cost = value.cost_usd
    if type(cost) is not float or not 0 <= cost < _INFINITY:  # NaN fails too
        return False
    usage = value.usage
    counts = (
        value.num_turns,
        value.total_tool_use_count,
        value.total_tokens,
        value.total_duration_ms,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
    )
    # Each an exact int >= 0: a plain loop, not ``all()`` over a generator (a frame resumed
    # per counter) nor ``set(map(type, ...))`` and ``min`` (two passes): ~3 k instructions less.
    for count in counts:  # noqa: SIM110
        if type(count) is not int or count < 0:
            return False
    return True


_INFINITY = float("inf")


_WORKTREE_OUTCOMES = get_args(WorktreeOutcome)
_STATUSES = get_args(AgentStatus)
_RECOVERIES = (*get_args(RestartRecovery), None)


def _plain_worktree(value: Any) -> bool:
    return value is None or (
        type(value) is WorktreeInfo
        and type(value.path) is str
        and type(value.branch) is str
        and value.outcome in _WORKTREE_OUTCOMES
    )


_PLAIN_VALUE: dict[str, Callable[[Any], bool]] = {
    "status": lambda value: value in _STATUSES,
    "last_active_at": _plain_time,
    "ended_at": lambda value: value is None or _plain_time(value),
    "process": _plain_process,
    "result": _plain_result,
    "stats": _plain_stats,
    "worktree": _plain_worktree,
    "output_path": _plain_opt_str,
    "transcript_path": _plain_opt_str,
    "notified": _plain_bool,
    "stop_requested": _plain_bool,
    "restart_recovery": lambda value: value in _RECOVERIES,
    "resumable": _plain_bool,
    "is_background": _plain_bool,
    "description": _plain_str,
}
"""For each field ``_FIELD_READERS`` covers: is the value exactly what reading it back from
JSON would give (exact built-in types, no NaN)? Then the checked path would accept it unchanged,
so ``apply_changes`` may skip the round trip; anything else takes the checked path, which
refuses it or normalises it with the usual error messages."""
