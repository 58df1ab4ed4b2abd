"""The contract every ``Store`` must keep, as runnable checks.

A new backend (a database, a remote service) proves itself by passing these::

    from subagents.testing.store_conformance import CHECKS, StoreConformance

    @pytest.mark.parametrize("check", CHECKS)
    def test_my_store(check, tmp_path):
        StoreConformance(lambda: MyStore(...)).run(check)

``make_store`` must return an empty store each time it is called. The checks use only the
``Store`` protocol and real process identities (this process is the live lease holder; an
identity with this PID but another start identity stands for a dead owner whose PID was reused).
A failed check raises ``ConformanceError`` (an ``AssertionError``) naming what broke.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

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

    def run(self, check: str) -> None:
        if check not in CHECKS:
            raise ValueError(f"unknown conformance check {check!r}; known: {CHECKS}")
        getattr(self, f"check_{check}")(self.make_store())

    def run_all(self) -> None:
        for check in CHECKS:
            self.run(check)

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


def _reused_pid(live: ProcessIdentity) -> ProcessIdentity:
    """This process's PID with another start identity: a dead owner whose PID was reused."""
    return replace(live, start_identity=f"{live.start_identity or 0}-before")


CHECKS: tuple[str, ...] = tuple(
    name.removeprefix("check_") for name in vars(StoreConformance) if name.startswith("check_")
)
