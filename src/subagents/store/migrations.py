"""Reading sidecars of every schema version this code knows, by migrating them to version 2.

Version 1 (the first release) was a flat snake_case record without lineage or a config
snapshot::

    {"schema_version": 1, "agent_id": "...", "agent_type": "...", "description": "...",
     "prompt": "...", "status": "running|completed|failed|cancelled", "result": "text"|null,
     "error": "..."|null, "session_id": "...", "project_path": "...", "is_background": bool,
     "model": "...", "pid": int|null, "created_at": float, "updated_at": float,
     "transcript_path": "..."|null}

(A record with ``agent_id`` but no version key at all is version 1 too.) Migration choices:

- ``cancelled`` becomes ``killed``; the lineage is a fresh root (version 1 had no resume);
- ``resumable`` is False: a resume must use the source's frozen snapshot, and version 1 kept
  none, so resuming would silently use whatever the definition says today;
- a terminal record counts as ``notified``: version 1 tracked no notification, and announcing a
  long-finished run again after an upgrade would be noise (or a duplicate);
- the owner process has a PID but no start identity, which ``process_identity.is_alive``
  treats conservatively.

Files from a newer version are refused with the file and version named, never guessed at.
"""

from __future__ import annotations

from typing import Any

from subagents.store.errors import InvalidRecordError, SchemaVersionError
from subagents.store.records import SCHEMA_VERSION, TERMINAL_STATUSES, SidecarRecord

SUPPORTED_VERSIONS = (1, 2)

_V1_STATUS = {"cancelled": "killed", "error": "failed", "done": "completed"}


def schema_version_of(data: dict[str, Any], *, source: str) -> int:
    """The schema version a raw sidecar dict declares (see the module docstring for v1)."""
    for key in ("schemaVersion", "schema_version"):
        if key in data:
            version = data[key]
            if not isinstance(version, int) or isinstance(version, bool):
                raise SchemaVersionError(f"{source}: {key} must be an integer, got {version!r}")
            return version
    if "agent_id" in data:
        return 1
    raise InvalidRecordError(f"{source}: not a sidecar record (no schemaVersion)")


def migrate(data: Any, *, source: str) -> dict[str, Any]:
    """The version-2 dict for a sidecar of any supported version (``source`` names the file)."""
    if not isinstance(data, dict):
        raise InvalidRecordError(f"{source}: a sidecar must be a JSON object")
    version = schema_version_of(data, source=source)
    if version == SCHEMA_VERSION:
        return data
    if version == 1:
        return _v1_to_v2(data, source=source)
    raise SchemaVersionError(
        f"{source}: sidecar schema version {version} is not supported "
        f"(this version of subagents reads {list(SUPPORTED_VERSIONS)}); upgrade subagents"
    )


def load_record(data: Any, *, source: str) -> SidecarRecord:
    """Parse a sidecar of any supported version into a ``SidecarRecord``."""
    return SidecarRecord.from_dict(migrate(data, source=source), source=source)


def _v1_to_v2(old: dict[str, Any], *, source: str) -> dict[str, Any]:
    agent_id = old.get("agent_id")
    if not isinstance(agent_id, str):
        raise InvalidRecordError(f"{source}: agent_id: expected a string, got {agent_id!r}")
    status = _V1_STATUS.get(old.get("status", ""), old.get("status"))
    terminal = status in TERMINAL_STATUSES
    created = old.get("created_at")
    updated = old.get("updated_at", created)
    pid = old.get("pid")
    return {
        "schemaVersion": SCHEMA_VERSION,
        "agentId": agent_id,
        "agentType": old.get("agent_type"),
        "description": old.get("description", ""),
        "prompt": old.get("prompt", ""),
        "status": status,
        "sessionId": old.get("session_id"),
        "projectPath": old.get("project_path"),
        "isBackground": old.get("is_background", False),
        "lineage": {"rootAgentId": agent_id, "resumedFrom": None, "resumeDepth": 0},
        "config": {"model": old.get("model") or "", "definitionSource": "schema-v1"},
        "createdAt": created,
        "lastActiveAt": updated,
        "endedAt": updated if terminal else None,
        "process": {"pid": pid} if isinstance(pid, int) and pid > 0 and not terminal else None,
        "result": {"text": old.get("result") or "", "error": old.get("error")},
        "transcriptPath": old.get("transcript_path"),
        "notified": terminal,
        "resumable": False,
    }
