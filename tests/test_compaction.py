"""Context compaction end to end through the CLI on the scripted model (docs/compaction.md).

Every test runs the real ``subagents`` command with ``SUBAGENTS_AUTOCOMPACT_TOKENS`` low and a
file larger than that, so reading it pushes the agent over the threshold; the script's
``"agent_type": "compact"`` entry serves the summary (SPEC §20).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import agent_call, recorded, run_script, tool_call, write_script
from subagents.store.transcript import read_messages, read_records

THRESHOLD = 6000
SUMMARY = "SUMMARY-7f3a: the file big.txt was read; its lines are numbered 0000-0399."
ENV = {"SUBAGENTS_AUTOCOMPACT_TOKENS": str(THRESHOLD)}


def big_file(folder: Path, name: str = "big.txt") -> Path:
    path = folder / name
    path.write_text("".join(f"line {i:04d} {'x' * 90}\n" for i in range(400)))  # ~40,000 chars
    return path


def compact_entry(text: str = SUMMARY, **extra: Any) -> dict[str, Any]:
    return {"agent_type": "compact", **extra, "turns": [{"text": text}]}


def request_tokens(request: dict[str, Any]) -> int:
    """A request's size as the scripted model counts it: system prompt and messages / 4."""
    return (len(request["system"]) + len(json.dumps(request["messages"]))) // 4


def text_of(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"], ensure_ascii=False)


def test_a_session_over_the_threshold_compacts_and_completes(tmp_path: Path) -> None:
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("Read", file_path=str(big))]},
            {"text": "final answer"},
        ],
    }
    script = write_script(tmp_path, [main, compact_entry()])
    run = run_script(script, tmp_path, output_format="stream-json", env=ENV)
    assert run.code == 0, run.stderr
    events = run.events()
    requests = recorded(tmp_path)
    assert [r["agent_type"] for r in requests] == ["main", "compact", "main"]
    summary_request, after = requests[1], requests[2]
    session_id = events[0]["session_id"]
    assert summary_request["agent_id"] == session_id and summary_request["compaction"] == 1
    # the summariser saw the whole history, the file included, and was asked for sections
    assert "line 0399" in text_of(summary_request)
    assert "Pending tasks" in summary_request["messages"][-1]["content"][-1]["text"]
    # the next request carries the summary verbatim and is under the threshold
    assert SUMMARY in text_of(after)
    assert request_tokens(after) < THRESHOLD < request_tokens(summary_request)
    assert len(after["messages"]) == 1
    assert "Agent types you can launch" in text_of(after)  # the catalog is restated
    (compaction,) = [e for e in events if e["type"] == "compaction"]
    assert compaction["method"] == "summary" and compaction["trigger"] == "auto"
    assert compaction["tokens_before"] >= THRESHOLD > compaction["tokens_after"]
    assert compaction["agent_id"] == session_id
    assert events[-1]["subtype"] == "success" and events[-1]["result"] == "final answer"


def test_the_continuation_restores_the_file_read_last(tmp_path: Path) -> None:
    big = big_file(tmp_path)
    small = tmp_path / "notes.txt"
    small.write_text("remember: the answer is 42\n")
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("Read", file_path=str(small))]},
            {"tool_calls": [tool_call("Read", file_path=str(big))]},
            {"text": "done"},
        ],
    }
    small.write_text("remember: the answer is 43\n")  # changed after the script was written
    script = write_script(tmp_path, [main, compact_entry()])
    assert run_script(script, tmp_path, env=ENV).code == 0
    after = recorded(tmp_path)[-1]
    blocks = after["messages"][0]["content"]
    texts = [b["text"] for b in blocks]
    restored = [t for t in texts if t.startswith("Contents of ")]
    assert [t.split(",")[0] for t in restored] == [f"Contents of {big}", f"Contents of {small}"]
    assert "the answer is 43" in restored[1]
    assert texts[1] == "go"  # the task, verbatim, in a block of its own


def test_resume_of_a_compacted_session_continues_from_the_summary(tmp_path: Path) -> None:
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [{"tool_calls": [tool_call("Read", file_path=str(big))]}, {"text": "first"}],
    }
    script = write_script(tmp_path, [main, compact_entry()])
    first = run_script(script, tmp_path, env=ENV)
    assert first.code == 0, first.stderr
    session_id = first.json()["session_id"]
    again = write_script(
        tmp_path, [{"agent_type": "main", "turns": [{"text": "second"}]}], name="again.json"
    )
    second = run_script(again, tmp_path, "--resume", session_id, prompt="and now?", env=ENV)
    assert second.code == 0, second.stderr
    assert second.json()["result"] == "second"
    resumed = recorded(tmp_path)[-1]
    assert resumed["agent_type"] == "main"
    assert SUMMARY in text_of(resumed) and "and now?" in text_of(resumed)
    assert "line 0399" not in text_of(resumed)  # the raw read is behind the boundary
    assert request_tokens(resumed) < THRESHOLD


def test_the_transcript_keeps_everything_and_records_the_boundary(tmp_path: Path) -> None:
    from subagents.state import ProjectState

    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [{"tool_calls": [tool_call("Read", file_path=str(big))]}, {"text": "ok"}],
    }
    script = write_script(tmp_path, [main, compact_entry()])
    home = tmp_path / "home"
    run = run_script(script, tmp_path, env={**ENV, "SUBAGENTS_HOME": str(home)})
    session_id = run.json()["session_id"]
    path = ProjectState.for_cwd(tmp_path, home).session_transcript(session_id)
    records = list(read_records(path))
    (boundary,) = [r for r in records if r["type"] == "compaction"]
    assert boundary["summary"] == SUMMARY and boundary["method"] == "summary"
    assert any("line 0399" in json.dumps(r) for r in records if r["type"] == "message")
    history = read_messages(path)
    assert SUMMARY in json.dumps(history) and "line 0399" not in json.dumps(history)


def test_a_background_child_compacts_and_notifies_once(tmp_path: Path) -> None:
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [agent_call("token B", "Explore", run_in_background=True)]},
            {"text": "waiting"},
            {"text": "heard {{last_user}}"},
        ],
    }
    child = {
        "agent_type": "Explore",
        "match": "token B",
        "turns": [
            {"tool_calls": [tool_call("Read", file_path=str(big))]},
            {"text": "child report after {{last_user}}"},
        ],
    }
    script = write_script(tmp_path, [main, child, compact_entry(match="token B")])
    run = run_script(script, tmp_path, output_format="stream-json", env=ENV)
    assert run.code == 0, run.stderr
    events = run.events()
    requests = recorded(tmp_path)
    child_id = next(r["agent_id"] for r in requests if r["agent_type"] == "Explore")
    summary = [r for r in requests if r["agent_type"] == "compact"]
    assert [(r["agent_id"], r["compaction"]) for r in summary] == [(child_id, 1)]
    child_after = [r for r in requests if r["agent_type"] == "Explore"][-1]
    assert SUMMARY in text_of(child_after) and "token B" in text_of(child_after)
    notices = [e for e in events if e["type"] == "task_notification"]
    assert [e["task_id"] for e in notices] == [child_id]
    final = [r for r in requests if r["agent_type"] == "main"][-1]
    assert text_of(final).count(f"<task-id>{child_id}</task-id>") == 1
    assert [e["agent_id"] for e in events if e["type"] == "compaction"] == [child_id]


def test_a_failed_summary_is_retried_then_the_oldest_turns_are_dropped(tmp_path: Path) -> None:
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("Read", file_path=str(big))]},
            {"text": "still going"},
        ],
    }
    failing = {"agent_type": "compact", "turns": [{"error": {"type": "api_error", "times": 50}}]}
    script = write_script(tmp_path, [main, failing])
    run = run_script(
        script, tmp_path, output_format="stream-json", env={**ENV, "SUBAGENTS_MAX_RETRIES": "1"}
    )
    assert run.code == 0, run.stderr
    requests = recorded(tmp_path)
    assert [r["agent_type"] for r in requests].count("compact") == 6  # 3 attempts x 2 tries
    after = requests[-1]
    assert after["agent_type"] == "main"
    assert "earlier message(s) of this conversation were removed" in text_of(after)
    assert request_tokens(after) < THRESHOLD
    (compaction,) = [e for e in run.events() if e["type"] == "compaction"]
    assert compaction["method"] == "truncated"
    assert run.events()[-1]["result"] == "still going"


def test_without_a_compact_entry_the_run_still_completes(tmp_path: Path) -> None:
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [{"tool_calls": [tool_call("Read", file_path=str(big))]}, {"text": "fine"}],
    }
    script = write_script(tmp_path, [main])
    run = run_script(script, tmp_path, env=ENV)
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "fine"


@pytest.mark.parametrize("switch", ["SUBAGENTS_DISABLE_AUTOCOMPACT", "DISABLE_AUTO_COMPACT"])
def test_automatic_compaction_can_be_turned_off(tmp_path: Path, switch: str) -> None:
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [{"tool_calls": [tool_call("Read", file_path=str(big))]}, {"text": "fine"}],
    }
    script = write_script(tmp_path, [main, compact_entry()])
    run = run_script(script, tmp_path, env={**ENV, switch: "1"})
    assert run.code == 0, run.stderr
    assert [r["agent_type"] for r in recorded(tmp_path)] == ["main", "main"]


def test_old_large_results_are_cleared_instead_of_summarised(tmp_path: Path) -> None:
    """The first big read is old by the time the threshold is crossed: clearing it is enough."""
    old = tmp_path / "old.txt"
    old.write_text("".join(f"old {i:04d} {'y' * 180}\n" for i in range(400)))  # ~76,000 chars
    big = big_file(tmp_path)
    smalls = [tmp_path / f"s{i}.txt" for i in range(5)]
    for path in smalls:
        path.write_text("small\n")
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("Read", file_path=str(old))]},
            {"tool_calls": [tool_call("Read", file_path=str(p)) for p in smalls]},
            {"tool_calls": [tool_call("Read", file_path=str(big))]},
            {"text": "done"},
        ],
    }
    script = write_script(tmp_path, [main, compact_entry()])
    home = tmp_path / "home"
    env = {"SUBAGENTS_AUTOCOMPACT_TOKENS": "24000", "SUBAGENTS_HOME": str(home)}
    run = run_script(script, tmp_path, output_format="stream-json", env=env)
    assert run.code == 0, run.stderr
    requests = recorded(tmp_path)
    assert "compact" not in [r["agent_type"] for r in requests]
    last = text_of(requests[-1])
    assert f"[Earlier result of Read (file_path: {old})" in last and "old 0399" not in last
    assert "line 0399" in last  # the newest result is kept
    (compaction,) = [e for e in run.events() if e["type"] == "compaction"]
    assert compaction["method"] == "cleared"
    assert compaction["tokens_after"] < 24000 * 0.75 < compaction["tokens_before"]
    # durable: the transcript still holds the old result and says it was cleared
    from subagents.state import ProjectState

    session_id = run.events()[0]["session_id"]
    path = ProjectState.for_cwd(tmp_path, home).session_transcript(session_id)
    assert any(r["type"] == "tool_results_cleared" for r in read_records(path))
    assert "old 0399" in path.read_text()
    assert "old 0399" not in json.dumps(read_messages(path))


def test_a_notification_summarised_away_is_not_delivered_again_on_resume(tmp_path: Path) -> None:
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [agent_call("token B", "Explore", run_in_background=True)]},
            {"text": "waiting"},
            {"tool_calls": [tool_call("Read", file_path=str(big))]},
            {"text": "first"},
        ],
    }
    child = {"agent_type": "Explore", "turns": [{"text": "child report"}]}
    first = run_script(write_script(tmp_path, [main, child, compact_entry()]), tmp_path, env=ENV)
    assert first.code == 0, first.stderr
    assert "compact" in [r["agent_type"] for r in recorded(tmp_path)]
    again = write_script(
        tmp_path, [{"agent_type": "main", "turns": [{"text": "second"}]}], name="again.json"
    )
    session_id = first.json()["session_id"]
    second = run_script(
        again, tmp_path, "--resume", session_id, output_format="stream-json", env=ENV
    )
    assert second.code == 0, second.stderr
    assert not [e for e in second.events() if e["type"] == "task_notification"]
    assert "<task-id>" not in text_of(recorded(tmp_path)[-1])
