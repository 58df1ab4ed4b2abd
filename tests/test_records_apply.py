"""``apply_changes``: the fast path for plain values agrees with the checked path everywhere.

The checked path (``_checked_update``) reads every changed field back from the record's JSON
form, refusing wrong types and normalising odd ones; the plain path skips that round trip when
the values are already in the form a read gives back. For every field and a spread of good, odd
and bad values, both must give the same record (same JSON, same types) or the same error.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from subagents import json_codec
from subagents.store import (
    InvalidRecordError,
    ProcessIdentity,
    RunResult,
    RunStats,
    SidecarRecord,
    TerminalStatusError,
    TokenUsage,
    WorktreeInfo,
    apply_changes,
)
from subagents.store.capabilities import encode_record
from subagents.store.records import _all_plain, _checked_update, changed_record
from subagents.testing.store_conformance import make_record


class Text(str):
    """A str subclass: the plain path leaves it to the checked one."""


GOOD_STATS = RunStats(num_turns=3, total_tool_use_count=2, total_tokens=9, usage=TokenUsage())

CANDIDATES: dict[str, list[Any]] = {
    "status": ["running", "completed", "failed", "killed", "paused", None, 1, Text("killed")],
    "last_active_at": [5.5, 5, 10**30, True, math.nan, math.inf, "5", None],
    "ended_at": [None, 7.25, 7, math.nan, False, "x"],
    "process": [
        None,
        ProcessIdentity(pid=42, start_identity="1@b", hostname="h"),
        ProcessIdentity(pid=42),
        ProcessIdentity(pid=0),
        ProcessIdentity(pid=True),
        ProcessIdentity(pid=42, start_identity=Text("1@b")),
        ProcessIdentity(pid=42, hostname=3),  # type: ignore[arg-type]
        {"pid": 42},
    ],
    "result": [
        RunResult(text="ok", reason="completed"),
        RunResult(text="ok", reason="error", error="boom"),
        RunResult(text=Text("ok")),
        RunResult(text=1),  # type: ignore[arg-type]
        RunResult(error=2),  # type: ignore[arg-type]
        "not a result",
        None,
    ],
    "stats": [
        GOOD_STATS,
        RunStats(usage=TokenUsage(input_tokens=5, cache_read_input_tokens=2)),
        RunStats(num_turns=-1),
        RunStats(num_turns=True),
        RunStats(total_tokens=1.0),  # type: ignore[arg-type]
        RunStats(usage=TokenUsage(output_tokens=-3)),
        RunStats(usage={"input_tokens": 1}),  # type: ignore[arg-type]
        "not stats",
    ],
    "worktree": [
        None,
        WorktreeInfo(path="/w", branch="b", outcome="kept"),
        WorktreeInfo(path="/w", branch="b", outcome="lost"),  # type: ignore[arg-type]
        WorktreeInfo(path=1, branch="b"),  # type: ignore[arg-type]
        {"path": "/w"},
    ],
    "output_path": [None, "/o", Text("/o"), 3],
    "transcript_path": [None, "/t", b"/t"],
    "notified": [True, False, 1, None],
    "stop_requested": [True, 0],
    "restart_recovery": [None, "interrupted", "completed", "failed", "later"],
    "resumable": [True, "yes"],
    "is_background": [False, None],
    "description": ["new", "", Text("sub"), None, 4],
}


def outcome(update: Any) -> tuple[str, str]:
    try:
        record: SidecarRecord = update()
    except (InvalidRecordError, TerminalStatusError) as exc:
        return type(exc).__name__, str(exc)
    # repr tells 5 from 5.0 and True from 1, which == does not
    return "ok", repr(record.to_dict())


def reference(record: SidecarRecord, changes: dict[str, Any], now: float) -> Any:
    """``apply_changes`` with the plain path disabled (its rules, then the checked path)."""
    updates = dict(changes)
    if changes.get("status") in ("completed", "failed", "killed") and "ended_at" not in updates:
        updates["ended_at"] = now
    return _checked_update(record, updates, changes)[0]


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_plain_and_checked_paths_agree(name: str) -> None:
    record = make_record("a00000001")
    for value in CANDIDATES[name]:
        changes = {name: value}
        got = outcome(lambda c=changes: apply_changes(record, c, now=9.0))
        want = outcome(lambda c=changes: reference(record, c, 9.0))
        assert got == want, (name, value)


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_the_json_form_handed_to_the_writer_is_the_updated_records_own(name: str) -> None:
    """``changed_record`` returns the ``to_dict`` its validation built, so an owner write
    encodes once (``DurableRecords.change``): it must be exactly the updated record's."""
    record = make_record("a00000001")
    for value in CANDIDATES[name]:
        try:
            updated, data = changed_record(record, {name: value}, now=9.0)
        except (InvalidRecordError, TerminalStatusError):
            continue
        assert repr(data) == repr(updated.to_dict()), (name, value)


def test_a_terminal_change_set_takes_the_plain_path_and_stamps_ended_at() -> None:
    record = make_record("a00000001", status="running")
    changes = {
        "status": "completed",
        "result": RunResult(text="done", reason="completed"),
        "stats": GOOD_STATS,
        "notified": False,
        "resumable": True,
    }
    updated = apply_changes(record, changes, now=12.5)
    assert updated.ended_at == 12.5 and updated.status == "completed"
    assert updated == SidecarRecord.from_dict(updated.to_dict())
    assert record.status == "running" and record.ended_at is None  # the original is untouched
    with pytest.raises(TerminalStatusError):
        apply_changes(updated, {"status": "running"}, now=13.0)
    assert apply_changes(updated, {"notified": True}, now=13.0).notified


def test_unknown_and_immutable_fields_are_refused() -> None:
    record = make_record("a00000001")
    with pytest.raises(InvalidRecordError, match=r"unknown field\(s\) \['nope'\]"):
        apply_changes(record, {"nope": 1, "notified": True}, now=1.0)
    with pytest.raises(InvalidRecordError, match=r"\['session_id'\] cannot change"):
        apply_changes(record, {"session_id": "other", "notified": True}, now=1.0)
    same = apply_changes(record, {"session_id": record.session_id, "notified": True}, now=1.0)
    assert same.notified and same.session_id == record.session_id


def test_a_record_that_cannot_be_written_is_refused_on_both_paths() -> None:
    broken = make_record("a00000001")
    object.__setattr__(broken, "lineage", None)  # an unchanged field that to_dict cannot write
    changes = {"notified": True}
    assert _all_plain(changes)  # ``changed_record`` takes the plain path
    for update in (
        lambda: changed_record(broken, changes, now=1.0),
        lambda: _checked_update(broken, changes, changes),
    ):
        with pytest.raises(InvalidRecordError, match=r"update of agent a00000001: \['notified'\]"):
            update()


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_an_updated_record_is_encoded_as_its_json_form(name: str) -> None:
    """An owner write encodes the updated record from its fields (``record_encoding``), not
    from a ``to_dict``: the bytes must be those of its JSON form, for every value an update
    lets through."""
    record = make_record("a00000001")
    for value in CANDIDATES[name]:
        try:
            updated = apply_changes(record, {name: value}, now=9.0)
        except (InvalidRecordError, TerminalStatusError):
            continue
        assert encode_record(updated) == json_codec.dumps(updated.to_dict()) + b"\n", (name, value)
