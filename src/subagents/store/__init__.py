"""Durable state of child runs: JSONL transcripts and sidecar records behind a ``Store``.

``Store`` (``protocol``) is the contract; ``MemoryStore`` (``memory``) its reference and
``FileStore`` (``files``) the on-disk implementation. ``SidecarRecord`` (``records``) is the
schema-version-2 record, ``migrations.load_record`` reads older versions, and
``process_identity`` tells a live owner from a reused PID. Every store must pass
``subagents.testing.store_conformance``.
"""

from __future__ import annotations

from subagents.store.errors import (
    DuplicateAgentError,
    InvalidRecordError,
    SchemaVersionError,
    StoreError,
    TerminalStatusError,
    UnknownAgentError,
    UnsafePathError,
)
from subagents.store.files import FileStore
from subagents.store.memory import MemoryStore
from subagents.store.migrations import load_record, migrate
from subagents.store.process_identity import ProcessIdentity, current_identity, is_alive
from subagents.store.protocol import Store
from subagents.store.records import (
    SCHEMA_VERSION,
    TERMINAL_STATUSES,
    AgentStatus,
    ConfigSnapshot,
    Lineage,
    RestartRecovery,
    RunResult,
    RunStats,
    SidecarRecord,
    TokenUsage,
    WorktreeInfo,
    apply_changes,
    is_visible,
    public_view,
)

__all__ = [
    "SCHEMA_VERSION",
    "TERMINAL_STATUSES",
    "AgentStatus",
    "ConfigSnapshot",
    "DuplicateAgentError",
    "FileStore",
    "InvalidRecordError",
    "Lineage",
    "MemoryStore",
    "ProcessIdentity",
    "RestartRecovery",
    "RunResult",
    "RunStats",
    "SchemaVersionError",
    "SidecarRecord",
    "Store",
    "StoreError",
    "TerminalStatusError",
    "TokenUsage",
    "UnknownAgentError",
    "UnsafePathError",
    "WorktreeInfo",
    "apply_changes",
    "current_identity",
    "is_alive",
    "is_visible",
    "load_record",
    "migrate",
    "public_view",
]
