"""A sidecar record's bytes on disk, encoded without rebuilding the parts siblings share.

Every child of a swarm writes its record twice (``running`` at start, terminal at the end), and
most of those bytes are the same for every child of a type: the config snapshot (its system
prompt alone is a few KB) and the owner's process identity are one object per type and per
session (``DurableRecords.config_from``), and a running record's result and stats are the shared
empty ``NO_RESULT`` and ``NO_STATS``. ``encode_record`` builds the record's top-level JSON
object from its fields and hands those shared parts to ``orjson`` as ``orjson.Fragment``\\ s —
their bytes encoded once and kept — instead of building their dicts (``to_dict``) and encoding
them again per write: 48 k → ~15 k instructions for a start record of a 3.8 KB sidecar.

The bytes are exactly ``json_codec.dumps(record.to_dict()) + b"\\n"`` (same keys, same order, the
same compact encoding: a fragment is ``orjson``'s own encoding of that part), which
``tests/test_record_encoding.py`` checks across records of every shape. Whatever ``orjson``
refuses (a lone surrogate, an integer beyond 64 bits) takes ``json_codec``'s path on the whole
``to_dict()``, as before; a shared part ``orjson`` refuses is never made a fragment.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import orjson

from subagents import json_codec
from subagents.store.records import (
    NO_RESULT,
    NO_STATS,
    Lineage,
    RunResult,
    RunStats,
    SidecarRecord,
    TokenUsage,
)

SHARED_PARTS = 64
"""Shared parts (configs, process identities) whose bytes are kept; past it the cache is
emptied (a few per session in practice)."""

_parts: dict[int, tuple[object, Any]] = {}
"""id → (the part, its fragment or its dict): each entry keeps its part alive, so an id is never
reused while its entry lives."""

_NO_RESULT_BYTES = orjson.Fragment(orjson.dumps(NO_RESULT.to_dict()))
_NO_STATS_BYTES = orjson.Fragment(orjson.dumps(NO_STATS.to_dict()))


def encode_record(record: SidecarRecord) -> bytes:
    """The record's compact JSON, one line: ``json_codec.dumps(record.to_dict()) + b"\\n"``."""
    if type(record) is not SidecarRecord:  # a subclass may write other fields: its own to_dict
        return json_codec.dumps(record.to_dict()) + b"\n"
    result, stats, process, worktree = record.result, record.stats, record.process, record.worktree
    form = {  # the key order of ``SidecarRecord.to_dict`` (the test compares the two)
        "schemaVersion": record.schema_version,
        "agentId": record.agent_id,
        "agentType": record.agent_type,
        "description": record.description,
        "prompt": record.prompt,
        "status": record.status,
        "sessionId": record.session_id,
        "projectPath": record.project_path,
        "parentAgentId": record.parent_agent_id,
        "isBackground": record.is_background,
        "toolUseId": record.tool_use_id,
        "lineage": record.lineage.to_dict(),
        "config": _shared(record.config),
        "createdAt": record.created_at,
        "lastActiveAt": record.last_active_at,
        "endedAt": record.ended_at,
        "process": None if process is None else _shared(process),
        "result": _NO_RESULT_BYTES if result is NO_RESULT else result.to_dict(),
        "stats": _NO_STATS_BYTES if stats is NO_STATS else stats.to_dict(),
        "worktree": None if worktree is None else worktree.to_dict(),
        "outputPath": record.output_path,
        "transcriptPath": record.transcript_path,
        "notified": record.notified,
        "stopRequested": record.stop_requested,
        "restartRecovery": record.restart_recovery,
        "resumable": record.resumable,
    }
    try:
        return orjson.dumps(form) + b"\n"
    except TypeError:  # orjson.JSONEncodeError: the standard library's path, on the whole record
        return json_codec.dumps(record.to_dict()) + b"\n"


def _shared(part: Any) -> Any:
    """``part.to_dict()`` as a fragment, encoded at its first write and kept (by identity:
    the parts are frozen values, shared by every record of a type)."""
    hit = _parts.get(id(part))
    if hit is not None and hit[0] is part:
        return hit[1]
    data = part.to_dict()
    try:
        made: Any = orjson.Fragment(orjson.dumps(data))
    except TypeError:  # not orjson's to encode: kept as its dict, the whole record falls back
        made = data
    if len(_parts) >= SHARED_PARTS:
        _parts.clear()
    _parts[id(part)] = (part, made)
    return made


OWN_FIELDS = (
    "agent_id",
    "description",
    "prompt",
    "tool_use_id",
    "lineage",
    "created_at",
    "last_active_at",
    "output_path",
    "transcript_path",
)
"""The fields of a fresh child's running record that are its own; ``RunningTemplate`` holds the
others, which every sibling of one type shares."""

_FIELDS = tuple(f.name for f in fields(SidecarRecord))


class RunningTemplate:
    """A fresh child's running record, less its own fields (``OWN_FIELDS``): the values siblings
    share, and their bytes in the record's JSON form encoded once.

    The JSON form's shared fields come in runs between the child's own ones (status to
    ``isBackground``, ``endedAt`` to ``worktree``, ``notified`` to the end). Each run is one
    ``orjson.Fragment`` — the run's first value and every key and value after it, exactly as
    ``orjson`` writes them inside the whole object — so a record is encoded from a 15-key form
    instead of 26: ``encode`` gives ``encode_record``'s bytes of the record ``values`` makes
    (``tests/test_running_template.py`` compares the two for every shape)."""

    __slots__ = (
        "_agent_type",
        "_config",
        "_ended",
        "_flags",
        "_form",
        "_process",
        "_schema",
        "_status",
        "_terminal_flags",
        "_terminal_status",
        "values",
    )

    def __init__(self, shared: dict[str, Any]) -> None:
        """``shared``: every field of ``SidecarRecord`` but ``OWN_FIELDS``. Raises
        ``TypeError`` when a shared part is not ``orjson``'s to encode (use ``encode_record``)."""
        values = dict.fromkeys(_FIELDS)
        values.update(shared)
        if values.keys() != set(_FIELDS) or any(name in shared for name in OWN_FIELDS):
            raise ValueError("a running template takes every field but the child's own")
        self.values = values
        """Every field in field order, the child's own ones None: copy it, set those, and the
        copy is the record's dict (``frozen.new_frozen``). Never changed."""
        self._schema = values["schema_version"]
        self._agent_type = values["agent_type"]
        config = _shared(values["config"])
        if not isinstance(config, orjson.Fragment):
            raise TypeError("the config snapshot is not orjson's to encode")
        self._config = config
        form = _template_form(values)
        self._status = _run(form, _STATUS_RUN)
        self._ended = _run(form, _ENDED_RUN)
        self._flags = _run(form, _FLAGS_RUN)
        self._form = form
        process = form["process"]  # (encodable: the run from ``endedAt`` holds it)
        self._process = None if process is None else orjson.Fragment(orjson.dumps(process))
        self._terminal_status: dict[str, orjson.Fragment] = {}
        self._terminal_flags: dict[tuple[bool, bool], orjson.Fragment] = {}

    def record(self, values: dict[str, Any]) -> SidecarRecord:
        """The record whose own dict is ``values``: a copy of ``self.values`` with the child's
        own fields set, so it names every field in field order (checked when the template was
        made) — ``frozen.new_frozen``'s every-field path without its check of the
        keys, ~5 k instructions a child."""
        record = object.__new__(SidecarRecord)
        object.__setattr__(record, "__dict__", values)  # frozen: set at once, as new_frozen does
        return record

    def encode(self, values: dict[str, Any]) -> bytes | None:
        """``encode_record`` of the record made from ``values`` (a copy of ``self.values`` with
        the child's own fields set); None when ``orjson`` refuses one of them (a lone
        surrogate): then ``encode_record`` of the record, whose fallback takes it."""
        lineage = values["lineage"]
        form = {  # the key order of ``SidecarRecord.to_dict``, the shared runs as fragments
            "schemaVersion": self._schema,
            "agentId": values["agent_id"],
            "agentType": self._agent_type,
            "description": values["description"],
            "prompt": values["prompt"],
            "status": self._status,
            "toolUseId": values["tool_use_id"],
            "lineage": {
                "rootAgentId": lineage.root_agent_id,
                "resumedFrom": lineage.resumed_from,
                "resumeDepth": lineage.resume_depth,
            },
            "config": self._config,
            "createdAt": values["created_at"],
            "lastActiveAt": values["last_active_at"],
            "endedAt": self._ended,
            "outputPath": values["output_path"],
            "transcriptPath": values["transcript_path"],
            "notified": self._flags,
        }
        try:
            return orjson.dumps(form) + b"\n"
        except TypeError:
            return None

    def encode_terminal(self, record: SidecarRecord) -> bytes | None:
        """``encode_record(record)`` for a later version of a record made from this template —
        a child's terminal record (``DurableRecords.terminal``) — from a 19-key form: the
        status run and the flags run (``notified`` to ``resumable``) as fragments made once per
        status and per ``(notified, resumable)``, the config and the owner's identity as the
        running record's fragments, the lineage, result and stats forms built here (their
        ``to_dict``'s, without a call each). Only while every shared field the bytes take from
        the template is still the template's very object (a change since the start replaced
        none): else, or when ``orjson`` refuses a value, None — then ``encode_record``.
        ``tests/test_terminal_record.py`` compares the two."""
        if type(record) is not SidecarRecord:
            return None
        own = record.__dict__
        shared = self.values
        if not (
            own["schema_version"] is shared["schema_version"]
            and own["agent_type"] is shared["agent_type"]
            and own["session_id"] is shared["session_id"]
            and own["project_path"] is shared["project_path"]
            and own["parent_agent_id"] is shared["parent_agent_id"]
            and own["is_background"] is shared["is_background"]
            and own["config"] is shared["config"]
            and own["process"] is shared["process"]
            and own["worktree"] is None
            and shared["worktree"] is None
            and own["stop_requested"] is shared["stop_requested"]
            and own["restart_recovery"] is shared["restart_recovery"]
        ):
            return None
        lineage, result, stats = own["lineage"], own["result"], own["stats"]
        if type(lineage) is not Lineage or type(result) is not RunResult:
            return None
        if type(stats) is not RunStats or type(stats.usage) is not TokenUsage:
            return None
        status = own["status"]
        if type(status) is not str:
            return None
        status_run = self._terminal_status.get(status)
        if status_run is None:
            if status not in _KNOWN_STATUSES:
                return None
            status_run = self._terminal_status[status] = _run(
                {**self._form, "status": status}, _STATUS_RUN
            )
        notified, resumable = own["notified"], own["resumable"]
        if type(notified) is not bool or type(resumable) is not bool:
            return None
        flags_run = self._terminal_flags.get((notified, resumable))
        if flags_run is None:
            flags_run = self._terminal_flags[(notified, resumable)] = _run(
                {**self._form, "notified": notified, "resumable": resumable}, _FLAGS_RUN
            )
        usage = stats.usage
        stats_form: dict[str, Any] = {  # ``RunStats.to_dict``
            "numTurns": stats.num_turns,
            "totalToolUseCount": stats.total_tool_use_count,
            "totalTokens": stats.total_tokens,
            "usage": {  # ``TokenUsage.to_dict``
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                "cache_read_input_tokens": usage.cache_read_input_tokens,
            },
            "totalDurationMs": stats.total_duration_ms,
        }
        if stats.cost_usd:
            stats_form["costUsd"] = stats.cost_usd
        form = {  # the key order of ``SidecarRecord.to_dict``, the shared runs as fragments
            "schemaVersion": self._schema,
            "agentId": own["agent_id"],
            "agentType": self._agent_type,
            "description": own["description"],
            "prompt": own["prompt"],
            "status": status_run,
            "toolUseId": own["tool_use_id"],
            "lineage": {  # ``Lineage.to_dict``
                "rootAgentId": lineage.root_agent_id,
                "resumedFrom": lineage.resumed_from,
                "resumeDepth": lineage.resume_depth,
            },
            "config": self._config,
            "createdAt": own["created_at"],
            "lastActiveAt": own["last_active_at"],
            "endedAt": own["ended_at"],
            "process": self._process,
            "result": {"text": result.text, "reason": result.reason, "error": result.error},
            "stats": stats_form,
            "worktree": None,
            "outputPath": own["output_path"],
            "transcriptPath": own["transcript_path"],
            "notified": flags_run,
        }
        try:
            return orjson.dumps(form) + b"\n"
        except TypeError:
            return None


_KNOWN_STATUSES = frozenset({"running", "completed", "failed", "killed"})
"""The statuses whose status run a template keeps (a record holds one of them as a rule)."""

_STATUS_RUN = ("status", "sessionId", "projectPath", "parentAgentId", "isBackground")
_ENDED_RUN = ("endedAt", "process", "result", "stats", "worktree")
_FLAGS_RUN = ("notified", "stopRequested", "restartRecovery", "resumable")


def _run(form: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """The bytes ``orjson`` writes for ``keys`` of the record's JSON form inside the whole
    object, less the first key and its colon: the fragment to give as that key's value."""
    run = {key: form[key] for key in keys}
    encoded = orjson.dumps(run)  # a TypeError (not orjson's to encode): no template
    opening = b"{" + orjson.dumps(keys[0]) + b":"
    if not (encoded.startswith(opening) and encoded.endswith(b"}")):
        raise TypeError(f"unexpected encoding of the run from {keys[0]}")
    return orjson.Fragment(encoded[len(opening) : -1])


def _template_form(values: dict[str, Any]) -> dict[str, Any]:
    """The JSON form of the shared fields (``SidecarRecord.to_dict``'s, by the record's own
    parts' ``to_dict``)."""
    process, worktree = values["process"], values["worktree"]
    return {
        "status": values["status"],
        "sessionId": values["session_id"],
        "projectPath": values["project_path"],
        "parentAgentId": values["parent_agent_id"],
        "isBackground": values["is_background"],
        "endedAt": values["ended_at"],
        "process": None if process is None else process.to_dict(),
        "result": values["result"].to_dict(),
        "stats": values["stats"].to_dict(),
        "worktree": None if worktree is None else worktree.to_dict(),
        "notified": values["notified"],
        "stopRequested": values["stop_requested"],
        "restartRecovery": values["restart_recovery"],
        "resumable": values["resumable"],
    }
