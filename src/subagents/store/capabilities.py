"""What a store may offer beyond the ``Store`` protocol, as runtime-checkable Protocols.

``Store`` (``protocol.py``) is the minimum every backend keeps. The session's write path
(``store.durable.DurableRecords``) goes faster on a store that offers more, and it asks for each
capability with ``isinstance`` — never by probing attribute names:

* ``OwnerWrites`` — the owner of a running child writes its *whole* record, already checked
  (``records.apply_changes``) and encoded on the event loop, with no read-modify-write and no
  lock (while a child runs its owning session is the only writer of its record). A commit of
  such writes is split at its waits (``OwnerCommit``): ``sync`` and ``sync_renamed`` may block
  and run on the writer thread, ``publish`` is quick and runs on the loop. A stop request made
  meanwhile by another process must survive the owner's next write.
* ``BatchWrites`` — many record operations (``BatchOp``) applied as one group commit, each with
  its own outcome.
* ``StopRequests`` — the ids with a stop request on file, in one call (the owner polls it).
* ``RunningIndex`` — the records still ``running`` without reading every record (recovery).
* ``OwnerHeartbeats`` — a live owner renews a heartbeat the store keeps, so a recovery on
  another host (which cannot probe the owner's process) tells a dead owner from a live one by
  its expiry (``PostgresStore``; docs/distributed.md "Recovery across nodes").

``MemoryStore`` and ``FileStore`` offer the first four (one machine);
``subagents.testing.store_conformance`` checks each capability a store claims, through the same
``DurableRecords`` path production uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from subagents import json_codec
from subagents.store import record_encoding
from subagents.store.errors import StoreError
from subagents.store.process_identity import ProcessIdentity
from subagents.store.protocol import Store
from subagents.store.records import SidecarRecord

BATCHABLE_OPS = frozenset({"create", "update", "touch_activity", "request_stop"})
"""The ``Store`` methods a ``BatchOp`` may name (the record writes; leases are not batched)."""


@dataclass(frozen=True)
class BatchOp:
    """One queued store call: the method name (in ``BATCHABLE_OPS``) and its arguments."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class BatchOutcome:
    """What one ``BatchOp`` returned, or the exception it raised (then ``value`` is None)."""

    value: object = None
    error: BaseException | None = None


@dataclass(frozen=True)
class OwnedWrite:
    """A whole record from the single owner of a running child, already encoded by it."""

    record: SidecarRecord
    data: bytes
    create: bool = False
    """A new record: the id must not exist yet."""


class OwnerCommit(Protocol):
    """One group commit of owner writes, split at its waits: ``sync`` → ``publish`` →
    ``sync_renamed``. A failure fails its own write only (``errors``, one per write)."""

    @property
    def errors(self) -> list[BaseException | None]: ...

    @property
    def needs_sync(self) -> bool:
        """False when there is nothing to wait for (a RAM file system, memory): ``publish``
        alone completes the commit, with no round trip to the writer thread."""
        ...

    def sync(self) -> None:
        """On the writer thread: make the staged data durable."""
        ...

    def publish(self, *, failed: BaseException | None = None) -> None:
        """On the loop: make the synced records visible; ``failed``: the sync failed, so
        nothing becomes visible and every write fails with it."""
        ...

    def sync_renamed(self) -> None:
        """On the writer thread: make the publication durable."""
        ...

    def fail(self, error: BaseException) -> None:
        """Fail every write that has not failed yet (its publication is not known durable)."""
        ...


@runtime_checkable
class OwnerWrites(Protocol):
    """A store that takes an owner's whole records (see the module docstring)."""

    def prepare_owned(self, writes: Sequence[OwnedWrite]) -> OwnerCommit:
        """Stage ``writes``; nothing is visible before the commit's ``publish``."""
        ...


@runtime_checkable
class BatchWrites(Protocol):
    """A store that applies many record operations as one group commit."""

    @property
    def batchable_ops(self) -> frozenset[str]: ...

    def apply_batch(self, ops: Sequence[BatchOp]) -> list[BatchOutcome]:
        """Run ``ops`` in order; one outcome per op, known once the writes are durable. An op
        that is refused fails alone."""
        ...


@runtime_checkable
class StopRequests(Protocol):
    """A store that lists stop requests in one call (``subagents tasks stop`` from elsewhere)."""

    def stop_requested_ids(self, project_path: str | Path) -> set[str]: ...


@runtime_checkable
class RunningIndex(Protocol):
    """A store that finds the ``running`` records of a project without reading them all."""

    def list_running(self, project_path: str | Path) -> list[SidecarRecord]:
        """Records of exactly this project still ``running``, oldest first."""
        ...


@runtime_checkable
class OwnerHeartbeats(Protocol):
    """A store every node reaches, keeping each owner's heartbeat with an expiry."""

    @property
    def heartbeat_interval_s(self) -> float:
        """How often a live owner beats (well inside the expiry)."""
        ...

    def beat(self, owner: ProcessIdentity) -> None:
        """``owner`` is alive: its heartbeat expires a time-to-live from now (the store's
        clock, so nodes need not agree on time)."""
        ...

    def owner_expired(self, owner: ProcessIdentity) -> bool:
        """True when ``owner``'s heartbeat has expired, or it never beat (an owner beats before
        it creates its first record)."""
        ...


def apply_op(store: Store, op: BatchOp) -> object:
    """Run one ``BatchOp`` as the ``Store`` call it names (stores without ``apply_batch``)."""
    match op.name:
        case "create":
            store.create(*op.args, **op.kwargs)
            return None
        case "update":
            return store.update(*op.args, **op.kwargs)
        case "touch_activity":
            store.touch_activity(*op.args, **op.kwargs)
            return None
        case "request_stop":
            return store.request_stop(*op.args, **op.kwargs)
    raise StoreError(f"{op.name!r} is not a batchable store operation")


def apply_each(store: Store, ops: Sequence[BatchOp]) -> list[BatchOutcome]:
    """``apply_batch`` for a store that has none: call by call, each with its own outcome."""
    outcomes: list[BatchOutcome] = []
    for op in ops:
        try:
            outcomes.append(BatchOutcome(value=apply_op(store, op)))
        except Exception as exc:
            outcomes.append(BatchOutcome(error=exc))
    return outcomes


def encode_record(record: SidecarRecord) -> bytes:
    """Compact JSON, one line (``json_codec``'s bytes of ``to_dict()``; the parts siblings share
    encoded once: ``record_encoding``)."""
    return record_encoding.encode_record(record)


def encode_record_data(data: dict[str, Any]) -> bytes:
    """``encode_record`` of a record whose ``to_dict()`` is at hand (``records.changed_record``)."""
    return json_codec.dumps(data) + b"\n"
