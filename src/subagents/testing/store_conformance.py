"""The contract every ``Store`` must keep, as runnable checks.

A new backend (a database, a remote service) proves itself by passing these::

    from subagents.testing.store_conformance import CHECKS, StoreConformance

    @pytest.mark.parametrize("check", CHECKS)
    def test_my_store(check, tmp_path):
        StoreConformance(lambda: MyStore(...)).run(check)

``make_store`` must return an empty store each time it is called. The checks use the ``Store``
protocol, the capabilities the store offers (``store.capabilities``: a check of a capability the
store lacks does not apply, and ``run`` returns False for it) and real process identities (this
process is the live lease holder; an identity with this PID but another start identity stands for
a dead owner whose PID was reused). ``session_write_path`` drives ``store.durable.DurableRecords``
— the path a session's writes take in production, which picks owner writes, batches or plain
calls by what the store offers — so a store is checked where it is used, not only call by call.
A failed check raises ``ConformanceError`` (an ``AssertionError``) naming what broke.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from subagents.store.capabilities import (
    BatchOp,
    BatchWrites,
    OwnedWrite,
    OwnerCommit,
    OwnerHeartbeats,
    OwnerWrites,
    RunningIndex,
    StopRequests,
    encode_record,
)
from subagents.store.durable import DurableRecords
from subagents.store.errors import (
    DuplicateAgentError,
    InvalidRecordError,
    StoreError,
    TerminalStatusError,
    UnknownAgentError,
)
from subagents.store.process_identity import ProcessIdentity, current_identity
from subagents.store.protocol import Store
from subagents.store.records import (
    ConfigSnapshot,
    Lineage,
    RunResult,
    RunStats,
    SidecarRecord,
    TokenUsage,
    WorktreeInfo,
)
from subagents.store.writer import DurableWriter

PROJECT_A = "/conformance/project-a"
PROJECT_B = "/conformance/project-b"


class ConformanceError(AssertionError):
    """A store broke the ``Store`` contract."""


def make_record(
    agent_id: str,
    *,
    project_path: str = PROJECT_A,
    session_id: str = "session-1",
    created_at: float = 1_000.0,
    **overrides: Any,
) -> SidecarRecord:
    """A running record with every section filled in, so a round trip exercises them all."""
    record = SidecarRecord(
        agent_id=agent_id,
        agent_type="general-purpose",
        description=f"describe {agent_id}",
        prompt="do the thing",
        session_id=session_id,
        project_path=project_path,
        parent_agent_id=None,
        is_background=True,
        tool_use_id=f"toolu_{agent_id}",
        lineage=Lineage(root_agent_id=agent_id),
        config=ConfigSnapshot(model="m", tools=("Read", "Bash"), system_prompt="sys", max_turns=5),
        created_at=created_at,
        last_active_at=created_at,
        process=current_identity(),
        worktree=WorktreeInfo(path="/w/agent-x", branch="agent-x"),
        output_path=f"/out/{agent_id}.output",
        transcript_path=f"/t/{agent_id}.jsonl",
    )
    return replace(record, **overrides)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ConformanceError(message)


def _expect_raises(kind: type[StoreError], action: Callable[[], object], what: str) -> None:
    try:
        action()
    except kind:
        return
    except Exception as exc:
        raise ConformanceError(f"{what}: expected {kind.__name__}, got {exc!r}") from exc
    raise ConformanceError(f"{what}: expected {kind.__name__}, nothing was raised")


class StoreConformance:
    """Runs the contract checks against stores made by ``make_store``."""

    def __init__(self, make_store: Callable[[], Store]) -> None:
        self.make_store = make_store

    def run(self, check: str) -> bool:
        """Run one check on a fresh store; False when it checks a capability the store lacks."""
        if check not in CHECKS:
            raise ValueError(f"unknown conformance check {check!r}; known: {CHECKS}")
        store = self.make_store()
        needed = CAPABILITIES.get(check)
        if needed is not None and not isinstance(store, needed):
            return False
        getattr(self, f"check_{check}")(store)
        return True

    def run_all(self) -> list[str]:
        """Every check, in order; returns the ones that applied."""
        return [check for check in CHECKS if self.run(check)]

    def check_create_get_roundtrip(self, store: Store) -> None:
        record = make_record(
            "a00000001",
            stats=RunStats(num_turns=2, usage=TokenUsage(input_tokens=7)),
            result=RunResult(text="partial"),
        )
        store.create(record)
        _expect(store.get("a00000001") == record, "get after create returns a different record")
        _expect(store.get("a0000000z") is None, "get of an unknown id must return None")
        _expect_raises(
            DuplicateAgentError, lambda: store.create(record), "create of an existing id"
        )

    def check_update_persists(self, store: Store) -> None:
        store.create(make_record("a00000002"))
        updated = store.update("a00000002", description="new", notified=True)
        _expect(updated.description == "new" and updated.notified, "update lost a change")
        _expect(store.get("a00000002") == updated, "get after update differs from update's result")
        _expect_raises(
            UnknownAgentError, lambda: store.update("a0000000z", notified=True), "update unknown id"
        )

    def check_update_all_or_nothing(self, store: Store) -> None:
        store.create(make_record("a00000003"))
        before = store.get("a00000003")
        bad_changes: list[dict[str, object]] = [
            {"description": "half", "no_such_field": 1},
            {"description": "half", "stats": "not stats"},
            {"description": "half", "status": "paused"},
            {"description": "half", "session_id": "someone-else"},
            {"description": "half", "project_path": PROJECT_B},
        ]
        for changes in bad_changes:
            _expect_raises(
                InvalidRecordError,
                lambda c=changes: store.update("a00000003", **c),  # type: ignore[misc]
                f"update with {sorted(changes)}",
            )
            _expect(store.get("a00000003") == before, f"refused update {changes} left a change")

    def check_terminal_is_final(self, store: Store) -> None:
        store.create(make_record("a00000004"))
        done = store.update("a00000004", status="completed", result=RunResult(text="ok"))
        _expect(done.ended_at is not None, "entering a terminal status must stamp ended_at")
        for status in ("running", "failed", "killed"):
            _expect_raises(
                TerminalStatusError,
                lambda s=status: store.update("a00000004", status=s),  # type: ignore[misc]
                f"completed -> {status}",
            )
        still = store.get("a00000004")
        _expect(still is not None and still.status == "completed", "terminal status changed")
        after = store.update("a00000004", status="completed", notified=True, resumable=True)
        _expect(after.notified and after.resumable, "non-status fields must stay writable")

    def check_list_scoped_by_project(self, store: Store) -> None:
        store.create(make_record("a0000000b", created_at=2.0))
        store.create(make_record("a0000000a", created_at=1.0, session_id="session-2"))
        store.create(make_record("b00000001", project_path=PROJECT_B))
        ids_a = [r.agent_id for r in store.list_agents(PROJECT_A)]
        _expect(ids_a == ["a0000000a", "a0000000b"], f"project A lists {ids_a}, oldest first")
        ids_b = [r.agent_id for r in store.list_agents(PROJECT_B)]
        _expect(ids_b == ["b00000001"], f"project B must see only its own runs, saw {ids_b}")
        one = [r.agent_id for r in store.list_agents(PROJECT_A, session_id="session-2")]
        _expect(one == ["a0000000a"], f"session filter returned {one}")
        _expect(store.list_agents("/conformance/none") == [], "an unknown project lists runs")

    def check_request_stop_visible(self, store: Store) -> None:
        store.create(make_record("a00000005"))
        _expect(store.request_stop("a00000005").stop_requested, "request_stop result")
        again = store.request_stop("a00000005")
        seen = store.get("a00000005")
        _expect(again.stop_requested and seen is not None and seen.stop_requested, "stop lost")
        _expect_raises(UnknownAgentError, lambda: store.request_stop("a0000000z"), "stop unknown")

    def check_touch_activity(self, store: Store) -> None:
        store.create(make_record("a00000006", created_at=1_000.0))
        store.touch_activity("a00000006")
        seen = store.get("a00000006")
        _expect(seen is not None and seen.last_active_at > 1_000.0, "first touch not written")
        done = store.update("a00000006", status="killed")
        store.touch_activity("a00000006")
        _expect(store.get("a00000006") == done, "touch_activity changed a terminal record")
        _expect_raises(UnknownAgentError, lambda: store.touch_activity("a0000000z"), "touch")

    def check_lease_exclusive(self, store: Store) -> None:
        live = current_identity()
        other = _reused_pid(live)
        _expect(store.take_lease("a00000007", live), "a free lease must be taken")
        _expect(store.take_lease("a00000007", live), "the holder retaking must succeed")
        _expect(not store.take_lease("a00000007", other), "a live holder's lease was taken")
        store.release_lease("a00000007", other)
        _expect(not store.take_lease("a00000007", other), "a non-holder's release freed it")
        _expect(store.take_lease("a00000008", other), "leases must be per agent")
        store.release_lease("a00000007", live)
        _expect(store.take_lease("a00000007", other), "a released lease must be free")

    def check_stale_lease_taken_over(self, store: Store) -> None:
        live = current_identity()
        dead = _reused_pid(live)
        _expect(store.take_lease("a00000009", dead), "a free lease must be taken")
        _expect(store.take_lease("a00000009", live), "a dead holder's lease (reused PID) is stale")
        _expect(not store.take_lease("a00000009", dead), "the takeover must hold the lease")

    # -- the session's write path (every store) --------------------------------------------

    def check_session_write_path(self, store: Store) -> None:
        """Three children started in one event-loop iteration, progress, one auto-backgrounded,
        a stop request from elsewhere, the terminal writes — through ``DurableRecords``."""
        records = [make_record(f"c0000000{i}", is_background=False) for i in range(3)]
        asyncio.run(_session_writes(store, records))
        first, second, third = (store.get(r.agent_id) for r in records)
        _expect(first is not None and first.status == "completed", f"first child: {first}")
        _expect(
            first is not None and first.result is not None and first.result.text == "done",
            "the terminal write lost the result",
        )
        _expect(second is not None and second.is_background, "backgrounded flag lost")
        _expect(second is not None and second.status == "running", f"second child: {second}")
        _expect(
            second is not None and second.stop_requested,
            "a stop request made while the owner writes was lost by its next write",
        )
        _expect(third is not None and third.status == "killed", f"third child: {third}")
        listed = [r.agent_id for r in store.list_agents(PROJECT_A)]
        _expect(listed == [r.agent_id for r in records], f"listed {listed}")

    # -- capabilities ------------------------------------------------------------------------

    def check_owner_writes_publish_in_order(self, store: Store) -> None:
        owner = _owner(store)
        record = make_record("d00000001")
        second = replace(record, description="second")
        versions = [record, second, replace(second, status="failed", ended_at=2_000.0)]
        for index, version in enumerate(versions):
            commit = owner.prepare_owned([_owned(version, create=index == 0)])
            _expect(
                store.get("d00000001") == (None if index == 0 else versions[index - 1]),
                "an owner write was visible before its commit was published",
            )
            _expect(_finish(commit) == [None], f"owner write {index} failed: {commit.errors}")
        seen = store.get("d00000001")
        _expect(
            seen is not None and seen.status == "failed" and seen.description == "second",
            f"the last owner write is not what is stored: {seen}",
        )

    def check_owner_write_refuses_an_existing_id(self, store: Store) -> None:
        owner = _owner(store)
        store.create(make_record("d00000002"))
        commit = owner.prepare_owned(
            [
                _owned(make_record("d00000002"), create=True),
                _owned(make_record("d00000003"), create=True),
            ]
        )
        errors = _finish(commit)
        _expect(
            isinstance(errors[0], DuplicateAgentError), f"owner create of an existing id: {errors}"
        )
        _expect(
            errors[1] is None and store.get("d00000003") is not None,
            "one refused owner write failed its neighbour",
        )

    def check_owner_write_keeps_a_stop_request(self, store: Store) -> None:
        owner = _owner(store)
        record = make_record("d00000004")
        _expect(_finish(owner.prepare_owned([_owned(record, create=True)])) == [None], "create")
        store.request_stop("d00000004")  # as ``subagents tasks stop`` does from elsewhere
        later = replace(record, last_active_at=record.last_active_at + 5)
        _expect(_finish(owner.prepare_owned([_owned(later)])) == [None], "owner rewrite")
        seen = store.get("d00000004")
        _expect(seen is not None and seen.stop_requested, "the owner's next write erased a stop")
        _expect(seen is not None and seen.last_active_at == later.last_active_at, "rewrite lost")

    def check_owner_write_failure_fails_only_the_commit(self, store: Store) -> None:
        owner = _owner(store)
        commit = owner.prepare_owned([_owned(make_record("d00000005"), create=True)])
        commit.publish(failed=OSError("disk gone"))
        _expect(isinstance(commit.errors[0], OSError), f"a failed sync: {commit.errors}")
        _expect(store.get("d00000005") is None, "a write whose sync failed became visible")

    def check_batch_ops_have_their_own_outcomes(self, store: Store) -> None:
        batches = _batches(store)
        outcomes = batches.apply_batch(
            [
                BatchOp("create", (make_record("e00000001"),)),
                BatchOp("update", ("e00000001",), {"description": "one"}),
                BatchOp("update", ("e0000000z",), {"description": "unknown"}),
                BatchOp("touch_activity", ("e00000001",)),
                BatchOp("update", ("e00000001",), {"status": "completed"}),
                BatchOp("update", ("e00000001",), {"status": "running"}),
                BatchOp("update", ("e00000001",), {"description": "two"}),
            ]
        )
        failed = [i for i, outcome in enumerate(outcomes) if outcome.error is not None]
        _expect(len(outcomes) == 7 and failed == [2, 5], f"batch outcomes failed at {failed}")
        _expect(isinstance(outcomes[2].error, UnknownAgentError), "unknown id in a batch")
        _expect(isinstance(outcomes[5].error, TerminalStatusError), "terminal is final in a batch")
        seen = store.get("e00000001")
        _expect(
            seen is not None and (seen.status, seen.description) == ("completed", "two"),
            f"a batch did not apply its ops in order: {seen}",
        )

    def check_stop_requests_are_listed(self, store: Store) -> None:
        listing = _stop_listing(store)
        store.create(make_record("f00000001"))
        store.create(make_record("f00000002"))
        store.create(make_record("f00000003", project_path=PROJECT_B))
        _expect(listing.stop_requested_ids(PROJECT_A) == set(), "stop requests before any")
        store.request_stop("f00000001")
        store.request_stop("f00000003")
        found = listing.stop_requested_ids(PROJECT_A)
        _expect(found == {"f00000001"}, f"stop requests of project A: {found}")

    def check_running_index_lists_running_records(self, store: Store) -> None:
        index = _running_index(store)
        store.create(make_record("g00000002", created_at=2.0))
        store.create(make_record("g00000001", created_at=1.0))
        store.create(make_record("g00000003", project_path=PROJECT_B))
        store.update("g00000002", status="completed")
        store.create(make_record("g00000004", created_at=3.0))
        found = [r.agent_id for r in index.list_running(PROJECT_A)]
        _expect(found == ["g00000001", "g00000004"], f"running records of project A: {found}")

    def check_owner_heartbeats_tell_a_live_owner(self, store: Store) -> None:
        beats = _heartbeats(store)
        node_b = ProcessIdentity(pid=4242, start_identity="42@boot-b", hostname="node-b.invalid")
        _expect(beats.owner_expired(node_b), "an owner that never beat counts as dead")
        beats.beat(node_b)
        _expect(not beats.owner_expired(node_b), "a fresh heartbeat counts as expired")
        beats.beat(node_b)  # renewing an existing heartbeat
        _expect(not beats.owner_expired(node_b), "a renewed heartbeat counts as expired")
        reused = replace(node_b, start_identity="43@boot-b")
        _expect(beats.owner_expired(reused), "another process with the owner's PID shares it")
        _expect(beats.heartbeat_interval_s > 0, "a heartbeat interval must be positive")


async def _session_writes(store: Store, records: list[SidecarRecord]) -> None:
    writer = DurableWriter(name="conformance-writer")
    durable = DurableRecords(
        store=store, writer=writer, session_id="session-1", project_path=PROJECT_A
    )
    try:
        for record in records:  # one loop iteration: handed over together
            durable.started(record)
        await durable.drain()
        first, second, third = (r.agent_id for r in records)
        durable.activity(first)
        durable.change(second, is_background=True, output_path="/out/second.output")
        await durable.drain()
        await asyncio.to_thread(store.request_stop, second)
        durable.change(second, last_active_at=records[1].last_active_at + 1)
        done = durable.finished(first, status="completed", result=RunResult(text="done"))
        killed = durable.finished(third, status="killed")
        await asyncio.gather(done, killed)
        await durable.drain()
    finally:
        durable.close()
        writer.close()


def _owner(store: Store) -> OwnerWrites:
    if not isinstance(store, OwnerWrites):
        raise ConformanceError(f"{type(store).__name__} lacks OwnerWrites")
    return store


def _batches(store: Store) -> BatchWrites:
    if not isinstance(store, BatchWrites):
        raise ConformanceError(f"{type(store).__name__} lacks BatchWrites")
    return store


def _stop_listing(store: Store) -> StopRequests:
    if not isinstance(store, StopRequests):
        raise ConformanceError(f"{type(store).__name__} lacks StopRequests")
    return store


def _running_index(store: Store) -> RunningIndex:
    if not isinstance(store, RunningIndex):
        raise ConformanceError(f"{type(store).__name__} lacks RunningIndex")
    return store


def _heartbeats(store: Store) -> OwnerHeartbeats:
    if not isinstance(store, OwnerHeartbeats):
        raise ConformanceError(f"{type(store).__name__} lacks OwnerHeartbeats")
    return store


def _owned(record: SidecarRecord, *, create: bool = False) -> OwnedWrite:
    return OwnedWrite(record=record, data=encode_record(record), create=create)


def _finish(commit: OwnerCommit) -> list[BaseException | None]:
    """A commit through its steps as the pipeline runs them (sync on the writer thread in
    production; here inline)."""
    if commit.needs_sync:
        commit.sync()
    commit.publish()
    if commit.needs_sync:
        commit.sync_renamed()
    return list(commit.errors)


def _reused_pid(live: ProcessIdentity) -> ProcessIdentity:
    """This process's PID with another start identity: a dead owner whose PID was reused."""
    return replace(live, start_identity=f"{live.start_identity or 0}-before")


CHECKS: tuple[str, ...] = tuple(
    name.removeprefix("check_") for name in vars(StoreConformance) if name.startswith("check_")
)

CAPABILITIES: dict[str, type[Any]] = {
    "owner_writes_publish_in_order": OwnerWrites,
    "owner_write_refuses_an_existing_id": OwnerWrites,
    "owner_write_keeps_a_stop_request": OwnerWrites,
    "owner_write_failure_fails_only_the_commit": OwnerWrites,
    "batch_ops_have_their_own_outcomes": BatchWrites,
    "stop_requests_are_listed": StopRequests,
    "running_index_lists_running_records": RunningIndex,
    "owner_heartbeats_tell_a_live_owner": OwnerHeartbeats,
}
"""The checks of a capability (``store.capabilities``): they apply to stores that offer it."""
