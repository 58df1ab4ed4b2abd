"""Durable state of child runs: JSONL transcripts and sidecar records behind a ``Store``.

``Store`` (``protocol``) is the contract and ``capabilities`` what a store may offer beyond it
(owner writes, batches, stop-request listing, a running index) as runtime-checkable Protocols;
``MemoryStore`` (``memory``) is the reference and ``FileStore`` (``files``) the on-disk
implementation, both offering every capability. ``DurableRecords`` (``durable``) is a session's
write path through any of them. ``SidecarRecord`` (``records``) is the
schema-version-2 record, ``migrations.load_record`` reads older versions, and
``process_identity`` tells a live owner from a reused PID. Every store must pass
``subagents.testing.store_conformance``.
"""

from __future__ import annotations

from subagents.store.capabilities import (
    BatchOp,
    BatchOutcome,
    BatchWrites,
    OwnedWrite,
    OwnerCommit,
    OwnerWrites,
    RunningIndex,
    StopRequests,
)
from subagents.store.durable import DurableRecords
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
    "BatchOp",
    "BatchOutcome",
    "BatchWrites",
    "ConfigSnapshot",
    "DuplicateAgentError",
    "DurableRecords",
    "FileStore",
    "InvalidRecordError",
    "Lineage",
    "MemoryStore",
    "OwnedWrite",
    "OwnerCommit",
    "OwnerWrites",
    "ProcessIdentity",
    "RestartRecovery",
    "RunResult",
    "RunStats",
    "RunningIndex",
    "SchemaVersionError",
    "SidecarRecord",
    "StopRequests",
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
