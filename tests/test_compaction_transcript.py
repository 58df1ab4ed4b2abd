"""Compaction boundaries and clearings in transcripts: replayed the same way by every reader."""

from __future__ import annotations

import json
from pathlib import Path

from subagents.agents import recovery
from subagents.agents.transcript_repair import cut_to_durable, inspect_transcript
from subagents.messages import Message, tool_result_block, user_message
from subagents.store.records import Lineage, RunResult, SidecarRecord
from subagents.store.transcript import TranscriptWriter, read_messages, read_records


def user(text: str) -> Message:
    return user_message(text)


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def calls(*ids: str) -> Message:
    blocks = [{"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": i}} for i in ids]
    return {"role": "assistant", "content": blocks}  # type: ignore[typeddict-item]


def results(**by_id: str) -> Message:
    return user_message([tool_result_block(k, v) for k, v in by_id.items()])


def boundary(summary: str = "S") -> dict[str, object]:
    return {"type": "compaction", "trigger": "auto", "method": "summary", "summary": summary}


def write_compacted(path: Path) -> None:
    log = TranscriptWriter(path)
    for message in (user("task T1"), calls("a"), results(a="x" * 50)):
        log.append(message)
    log.flush()
    log.record(boundary())
    log.append(user("continuation with summary S"))
    log.flush()
    log.append(assistant("done"))
    log.close()


def test_a_confirmed_boundary_replaces_the_history_before_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_compacted(path)
    assert read_messages(path) == [user("continuation with summary S"), assistant("done")]
    state = inspect_transcript(path)
    assert state.durable == read_messages(path)
    assert state.replaced == [user("task T1"), calls("a"), results(a="x" * 50)]
    assert state.opening[0] == user("task T1")
    # the earlier lines are all still in the file
    kinds = [r["type"] for r in read_records(path)]
    assert kinds.count("message") == 5 and kinds.count("compaction") == 1


def test_a_boundary_without_its_marker_counts_for_nothing(tmp_path: Path) -> None:
    """A crash in the middle of writing the boundary: the old history stays the durable one."""
    path = tmp_path / "t.jsonl"
    log = TranscriptWriter(path)
    log.append(user("task"))
    log.append(assistant("a1"))
    log.close()
    with path.open("a") as handle:
        handle.write(json.dumps(boundary()) + "\n")
        handle.write(json.dumps({"type": "message", "message": user("cont")}) + "\n")
        handle.write('{"type": "turn_comp')  # torn
    assert read_messages(path) == [user("task"), assistant("a1")]
    state = inspect_transcript(path)
    assert state.durable == [user("task"), assistant("a1")]
    assert state.interrupted == [user("cont")] and state.torn_tail
    cut_to_durable(path, state)
    assert inspect_transcript(path).interrupted == []
    assert read_messages(path) == [user("task"), assistant("a1")]


def test_clearing_replaces_results_by_id_and_leaves_shared_objects_alone(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    first = results(a="A" * 40, b="B" * 40)
    log = TranscriptWriter(path)
    for message in (user("task"), calls("a", "b"), first):
        log.append(message)
    log.flush()
    log.record({"type": "tool_results_cleared", "results": {"a": "[cleared a]"}})
    log.close()
    history = read_messages(path)
    blocks = history[2]["content"]
    assert isinstance(blocks, list)
    assert [b.get("content") for b in blocks] == ["[cleared a]", "B" * 40]
    assert first["content"][0]["content"] == "A" * 40  # type: ignore[index,typeddict-item]


def _record(transcript: Path, prompt: str) -> SidecarRecord:
    return SidecarRecord(
        agent_id="a00000001",
        agent_type="Explore",
        description="d",
        prompt=prompt,
        session_id="s",
        project_path="/p",
        lineage=Lineage(root_agent_id="a00000001"),
        status="running",
        transcript_path=str(transcript),
        created_at=1.0,
        last_active_at=1.0,
    )


def test_a_compacted_child_is_verifiable_after_a_crash(tmp_path: Path) -> None:
    """The prompt check reads the file's opening, before the boundary."""
    path = tmp_path / "t.jsonl"
    write_compacted(path)
    verdict = recovery.repair_child_transcript(_record(path, "task T1"))
    assert verdict.outcome == "completed" and verdict.result_text == "done"
    foreign = recovery.repair_child_transcript(_record(path, "another task"))
    assert foreign.outcome == "failed"


def test_a_notification_summarised_away_is_not_delivered_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    note = "<task-notification><task-id>a00000009</task-id>done</task-notification>"
    log = TranscriptWriter(path)
    for message in (user("go"), assistant("waiting"), user(note), assistant("heard")):
        log.append(message)
    log.flush()
    log.record(boundary())
    log.append(user("summary: a child reported"))
    log.close()
    loaded = recovery.load_session(path)
    assert loaded.messages == [user("summary: a child reported")]
    child = SidecarRecord(
        agent_id="a00000009",
        agent_type="Explore",
        description="d",
        prompt="p",
        session_id="s",
        project_path="/p",
        lineage=Lineage(root_agent_id="a00000009"),
        status="completed",
        is_background=True,
        result=RunResult(text="r", reason="completed"),
        created_at=1.0,
        last_active_at=1.0,
    )
    assert recovery.pending_notifications(loaded.messages, [child], max_result=100) != []
    owed = recovery.pending_notifications(
        loaded.messages, [child], max_result=100, earlier=loaded.earlier
    )
    assert owed == []
