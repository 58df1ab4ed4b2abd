"""``PostgresStore``: the ``Store`` every node of a cluster reaches (psycopg 3).

Same contract as ``FileStore`` (``subagents.testing.store_conformance``), with transactions
where the file store has locks and renames:

* an update is ``SELECT … FOR UPDATE`` + ``records.apply_changes`` + ``UPDATE`` in one
  transaction, so two processes (two nodes) lose no update and a refused change leaves nothing;
* a stop request is the ``stop_requested`` column, which the owner's whole-record write never
  sets, so a stop made elsewhere survives the owner's next write; reads fold it into a running
  record;
* a lease is a row claimed in a transaction; a holder whose ``expires_at`` (the database's
  clock, so nodes need not agree on time) has passed has lost it, which is how a node takes
  over from a holder on another host it cannot probe; a holder renews by taking it again;
* an owner's heartbeat (``capabilities.OwnerHeartbeats``) is a row of ``subagents_owners``
  whose ``expires_at`` a live owner pushes forward every third of ``lease_ttl_s``; recovery on
  another host reads it to tell a dead owner from a live one;
* a batch or an owner commit is one transaction, each write in its own savepoint, so one
  refused write fails alone and the group costs one round trip.

Connections: one per thread (a transaction belongs to one thread; the session's writer thread
and ``asyncio.to_thread`` workers each get theirs), autocommit outside explicit transactions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from subagents import json_codec
from subagents.store.activity import ActivityThrottle
from subagents.store.capabilities import (
    BATCHABLE_OPS,
    BatchOp,
    BatchOutcome,
    OwnedWrite,
    apply_op,
    encode_record,
)
from subagents.store.errors import (
    DuplicateAgentError,
    InvalidRecordError,
    StoreError,
    StoreUnavailableError,
    TerminalStatusError,
    UnknownAgentError,
)
from subagents.store.migrations import load_record
from subagents.store.postgres.schema import migrate
from subagents.store.process_identity import ProcessIdentity, is_alive
from subagents.store.records import SidecarRecord, apply_changes

Conn = psycopg.Connection[TupleRow]

DEFAULT_LEASE_TTL_S = 30.0
_COLUMNS = "record::text, stop_requested"
_NOW = "extract(epoch from clock_timestamp())"


class PostgresStore:
    """Sidecar records, stop requests and leases in PostgreSQL (see the module docstring)."""

    batchable_ops = BATCHABLE_OPS

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        activity_interval: float = 1.0,
        lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
        alive: Callable[[ProcessIdentity], bool] = is_alive,
    ) -> None:
        self.url = url
        self.lease_ttl_s = lease_ttl_s
        self._clock = clock
        self._alive = alive
        self._activity = ActivityThrottle(clock=clock, interval=activity_interval)
        self._local = threading.local()
        self._opened: list[Conn] = []
        self._opened_lock = threading.Lock()
        migrate(self._conn())

    # -- connections ------------------------------------------------------------------------

    def _conn(self) -> Conn:
        conn: Conn | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            try:
                conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            except psycopg.Error as exc:
                raise StoreUnavailableError(
                    f"PostgreSQL store {_safe_url(self.url)}: {exc}"
                ) from exc
            self._local.conn = conn
            with self._opened_lock:
                self._opened.append(conn)
        return conn

    @contextmanager
    def _transaction(self) -> Iterator[Conn]:
        conn = self._conn()
        with conn.transaction():
            yield conn

    def close(self) -> None:
        """Close every connection this store opened (any thread's)."""
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()

    # -- Store protocol -------------------------------------------------------------------

    def create(self, record: SidecarRecord) -> None:
        with self._transaction() as conn:
            self._insert(conn, record, encode_record(record))

    def get(self, agent_id: str) -> SidecarRecord | None:
        row = (
            self._conn()
            .execute(f"SELECT {_COLUMNS} FROM subagents_agents WHERE agent_id = %s", (agent_id,))
            .fetchone()
        )
        return None if row is None else _decode(row)

    def update(self, agent_id: str, **changes: Any) -> SidecarRecord:
        with self._transaction() as conn:
            return self._update(conn, agent_id, changes)

    def list_agents(
        self, project_path: str | Path, *, session_id: str | None = None
    ) -> list[SidecarRecord]:
        query = f"SELECT {_COLUMNS} FROM subagents_agents WHERE project_path = %s"
        params: tuple[str, ...] = (str(project_path),)
        if session_id is not None:
            query, params = query + " AND session_id = %s", (*params, session_id)
        rows = self._conn().execute(query + " ORDER BY created_at, agent_id", params).fetchall()
        return [_decode(row) for row in rows]

    def touch_activity(self, agent_id: str) -> None:
        with self._transaction() as conn:
            self._touch(conn, agent_id)

    def request_stop(self, agent_id: str) -> SidecarRecord:
        with self._transaction() as conn:
            return self._request_stop(conn, agent_id)

    def take_lease(self, agent_id: str, owner: ProcessIdentity) -> bool:
        data = json_codec.dumps(owner.to_dict()).decode()
        with self._transaction() as conn:
            row = conn.execute(
                "INSERT INTO subagents_leases (agent_id, owner, expires_at)"
                f" VALUES (%s, %s, {_NOW} + %s) ON CONFLICT (agent_id) DO NOTHING RETURNING 1",
                (agent_id, data, self.lease_ttl_s),
            ).fetchone()
            if row is not None:
                return True
            held = conn.execute(
                f"SELECT owner::text, expires_at < {_NOW} FROM subagents_leases"
                " WHERE agent_id = %s FOR UPDATE",
                (agent_id,),
            ).fetchone()
            if held is not None and not held[1]:
                holder = ProcessIdentity.from_dict(json.loads(held[0]), where="lease")
                if holder != owner and self._alive(holder):
                    return False
            conn.execute(
                "INSERT INTO subagents_leases (agent_id, owner, expires_at)"
                f" VALUES (%s, %s, {_NOW} + %s) ON CONFLICT (agent_id) DO UPDATE"
                " SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at",
                (agent_id, data, self.lease_ttl_s),
            )
            return True

    def release_lease(self, agent_id: str, owner: ProcessIdentity) -> None:
        with self._transaction() as conn:
            held = conn.execute(
                "SELECT owner::text FROM subagents_leases WHERE agent_id = %s FOR UPDATE",
                (agent_id,),
            ).fetchone()
            if held is None:
                return
            holder = ProcessIdentity.from_dict(json.loads(held[0]), where="lease")
            if holder == owner:
                conn.execute("DELETE FROM subagents_leases WHERE agent_id = %s", (agent_id,))

    # -- capabilities (``store.capabilities``) ----------------------------------------------

    @property
    def heartbeat_interval_s(self) -> float:
        return self.lease_ttl_s / 3

    def beat(self, owner: ProcessIdentity) -> None:
        self._conn().execute(
            "INSERT INTO subagents_owners (owner_key, owner, expires_at)"
            f" VALUES (%s, %s, {_NOW} + %s) ON CONFLICT (owner_key) DO UPDATE"
            " SET expires_at = EXCLUDED.expires_at",
            (_owner_key(owner), json_codec.dumps(owner.to_dict()).decode(), self.lease_ttl_s),
        )

    def owner_expired(self, owner: ProcessIdentity) -> bool:
        row = (
            self._conn()
            .execute(
                f"SELECT expires_at < {_NOW} FROM subagents_owners WHERE owner_key = %s",
                (_owner_key(owner),),
            )
            .fetchone()
        )
        return row is None or bool(row[0])

    def apply_batch(self, ops: Sequence[BatchOp]) -> list[BatchOutcome]:
        """One transaction; each op in a savepoint of its own, so a refused op fails alone."""
        outcomes: list[BatchOutcome] = []
        with self._transaction() as conn:
            for op in ops:
                try:
                    with conn.transaction():
                        outcomes.append(BatchOutcome(value=self._apply(conn, op)))
                except (StoreError, ValueError, TypeError) as exc:
                    outcomes.append(BatchOutcome(error=exc))
        return outcomes

    def prepare_owned(self, writes: Sequence[OwnedWrite]) -> PostgresCommit:
        return PostgresCommit(store=self, writes=list(writes))

    def stop_requested_ids(self, project_path: str | Path) -> set[str]:
        rows = (
            self._conn()
            .execute(
                "SELECT agent_id FROM subagents_agents WHERE project_path = %s"
                " AND stop_requested AND status = 'running'",
                (str(project_path),),
            )
            .fetchall()
        )
        return {str(row[0]) for row in rows}

    def list_running(self, project_path: str | Path) -> list[SidecarRecord]:
        rows = (
            self._conn()
            .execute(
                f"SELECT {_COLUMNS} FROM subagents_agents WHERE project_path = %s"
                " AND status = 'running' ORDER BY created_at, agent_id",
                (str(project_path),),
            )
            .fetchall()
        )
        return [_decode(row) for row in rows]

    # -- one write, inside a caller's transaction ----------------------------------------------

    def _apply(self, conn: Conn, op: BatchOp) -> object:
        match op.name:
            case "create":
                record: SidecarRecord = op.args[0]
                self._insert(conn, record, encode_record(record))
                return None
            case "update":
                return self._update(conn, op.args[0], op.kwargs)
            case "touch_activity":
                self._touch(conn, op.args[0])
                return None
            case "request_stop":
                return self._request_stop(conn, op.args[0])
        return apply_op(self, op)  # names no batchable op: apply_op says so

    def _insert(self, conn: Conn, record: SidecarRecord, data: bytes) -> None:
        row = conn.execute(
            "INSERT INTO subagents_agents"
            " (agent_id, project_path, session_id, created_at, status, record)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (agent_id) DO NOTHING RETURNING 1",
            (
                record.agent_id,
                record.project_path,
                record.session_id,
                record.created_at,
                record.status,
                data.decode(),
            ),
        ).fetchone()
        if row is None:
            raise DuplicateAgentError(f"agent {record.agent_id} already has a record")

    def _update(self, conn: Conn, agent_id: str, changes: dict[str, Any]) -> SidecarRecord:
        current = self._locked(conn, agent_id)
        updates = dict(changes)
        held = self._activity.pending(agent_id)
        if held is not None and "last_active_at" not in updates and not current.is_terminal:
            updates["last_active_at"] = held
        updated = apply_changes(current, updates, now=self._clock())
        self._rewrite(conn, updated, encode_record(updated))
        self._activity.written(agent_id, updated.last_active_at)
        if updated.is_terminal:
            self._activity.forget(agent_id)
        return updated

    def _touch(self, conn: Conn, agent_id: str) -> None:
        current = self._locked(conn, agent_id)
        if current.is_terminal:
            return
        now = self._activity.touch(agent_id)
        if now is None:
            return
        updated = apply_changes(current, {"last_active_at": now}, now=now)
        self._rewrite(conn, updated, encode_record(updated))
        self._activity.written(agent_id, now)

    def _request_stop(self, conn: Conn, agent_id: str) -> SidecarRecord:
        current = self._locked(conn, agent_id)
        if current.is_terminal or current.stop_requested:
            return current
        conn.execute(
            "UPDATE subagents_agents SET stop_requested = true WHERE agent_id = %s", (agent_id,)
        )
        return replace(current, stop_requested=True)

    def _locked(self, conn: Conn, agent_id: str) -> SidecarRecord:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM subagents_agents WHERE agent_id = %s FOR UPDATE",
            (agent_id,),
        ).fetchone()
        if row is None:
            raise UnknownAgentError(f"no record for agent {agent_id}")
        return _decode(row)

    def _rewrite(self, conn: Conn, record: SidecarRecord, data: bytes) -> None:
        """The whole record; ``stop_requested`` (the column) is left as it is."""
        conn.execute(
            "UPDATE subagents_agents SET status = %s, record = %s WHERE agent_id = %s",
            (record.status, data.decode(), record.agent_id),
        )

    def _owned(self, conn: Conn, write: OwnedWrite) -> None:
        """An owner's whole record. Refused when the stored one is already terminal with
        another status (recovery got there first: the owner was taken for dead)."""
        record = write.record
        if write.create:
            self._insert(conn, record, write.data)
            return
        row = conn.execute(
            "UPDATE subagents_agents SET status = %s, record = %s WHERE agent_id = %s"
            " AND (status = 'running' OR status = %s) RETURNING 1",
            (record.status, write.data.decode(), record.agent_id, record.status),
        ).fetchone()
        if row is None:
            current = self._locked(conn, record.agent_id)  # raises for an unknown id
            raise TerminalStatusError(
                f"agent {record.agent_id} is {current.status} (terminal); "
                f"refusing status {record.status!r}"
            )
        self._activity.written(record.agent_id, record.last_active_at)


class PostgresCommit:
    """Owner writes of one loop iteration: one transaction on the writer thread (``sync``).

    For a database durability and visibility come with the same ``COMMIT``, and that round trip
    must not run on the event loop, so ``sync`` commits and ``publish`` only hands the outcomes
    over (or, after a failed sync, fails every write). Nothing is written before ``sync``.
    """

    def __init__(self, *, store: PostgresStore, writes: list[OwnedWrite]) -> None:
        self.store = store
        self.writes = writes
        self.errors: list[BaseException | None] = [None] * len(writes)
        self.needs_sync = True
        self._published = False

    def sync(self) -> None:
        store = self.store
        with store._transaction() as conn:
            for index, write in enumerate(self.writes):
                try:
                    with conn.transaction():
                        store._owned(conn, write)
                except StoreError as exc:
                    self.errors[index] = exc

    def publish(self, *, failed: BaseException | None = None) -> None:
        if self._published:
            return
        self._published = True
        if failed is not None:
            self.fail(failed)

    def sync_renamed(self) -> None:
        pass

    def fail(self, error: BaseException) -> None:
        self.errors[:] = [e or error for e in self.errors]


def _owner_key(owner: ProcessIdentity) -> str:
    return f"{owner.hostname or ''}/{owner.pid}/{owner.start_identity or ''}"


def _decode(row: tuple[Any, ...]) -> SidecarRecord:
    try:
        raw = json.loads(row[0])
    except json.JSONDecodeError as exc:
        raise InvalidRecordError(f"PostgreSQL store: a record is not valid JSON: {exc}") from exc
    record = load_record(raw, source="PostgreSQL store")
    if row[1] and not record.stop_requested and not record.is_terminal:
        return replace(record, stop_requested=True)
    return record


def _safe_url(url: str) -> str:
    """The URL without its password, for error messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "<invalid URL>"
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})
