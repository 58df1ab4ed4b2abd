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

from typing import Any

import orjson

from subagents import json_codec
from subagents.store.records import NO_RESULT, NO_STATS, SidecarRecord

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
