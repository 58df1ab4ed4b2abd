"""``DurableRecords.finished`` hands its changes to the owner write as the dict its keywords
made (``_change``) instead of passing them on with ``**`` again: the written record and bytes
are ``change``'s for the same changes, the caller's mapping is left as it was, and a refused
change is refused alike."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from subagents.state import ProjectState
from subagents.store import FileStore
from subagents.store.durable import DurableRecords
from subagents.store.errors import StoreError
from subagents.store.records import RunResult, RunStats, TokenUsage
from subagents.store.writer import DurableWriter
from subagents.testing.store_conformance import make_record

PROJECT = "/srv/project"


def _records(home: Path) -> DurableRecords:
    store = FileStore(ProjectState(home=home, project=Path(PROJECT)))
    return DurableRecords(
        store=store, writer=DurableWriter(), session_id="session-1", project_path=PROJECT
    )


def _terminal(status: str) -> dict[str, Any]:
    usage = TokenUsage(input_tokens=7, output_tokens=3)
    return {
        "status": status,
        "result": RunResult(text="done é", reason=status, error=None),
        "stats": RunStats(num_turns=2, total_tokens=10, usage=usage, total_duration_ms=40),
        "notified": True,
        "resumable": True,
    }


@pytest.mark.parametrize("status", ["completed", "failed", "killed"])
async def test_finished_writes_what_change_writes(
    tmp_path: Path, status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time, "time", lambda: 1764770000.25)  # both stamp the same ended_at
    written: list[tuple[Any, bytes]] = []
    for how in ("finished", "change"):
        records = _records(tmp_path / how)
        start = make_record("a00000001", project_path=PROJECT)
        await records.started(replace(start, session_id="session-1"))
        changes = _terminal(status)
        given = dict(changes)
        done = getattr(records, how)("a00000001", **changes)
        record = await done
        assert changes == given  # the caller's mapping is untouched
        await records.drain()
        path = tmp_path / how / "projects"
        data = next(path.glob("*/agents/a00000001.json")).read_bytes()
        written.append((record, data))
        records.writer.close()
    assert written[0] == written[1]
    assert written[0][0].status == status and written[0][0].ended_at == 1764770000.25


async def test_a_refused_terminal_change_is_refused_alike(tmp_path: Path) -> None:
    errors = []
    for how in ("finished", "change"):
        records = _records(tmp_path / how)
        await records.started(replace(make_record("a00000001", project_path=PROJECT)))
        await records.finished("a00000001", **_terminal("completed"))
        with pytest.raises(StoreError) as refused:
            await getattr(records, how)("a00000001", **_terminal("failed"))
        errors.append(type(refused.value))
        await records.drain()
        records.writer.close()
    assert errors[0] is errors[1]
