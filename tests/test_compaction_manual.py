"""Manual compaction of a saved session: ``subagents compact`` and ``Session.compact``
(issue 18 item 1), through the CLI on the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

from cli_helpers import recorded, run_cli, run_script, start_script, tool_call, write_script
from subagents import Session, SessionOptions
from subagents.events import CompactionEvent, Event
from test_compaction import (
    ENV,
    SUMMARY,
    THRESHOLD,
    big_file,
    compact_entry,
    request_tokens,
    text_of,
)


def saved_session(tmp_path: Path) -> str:
    """A finished session whose history holds a large read (no automatic compaction)."""
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [{"tool_calls": [tool_call("Read", file_path=str(big))]}, {"text": "first"}],
    }
    run = run_script(write_script(tmp_path, [main]), tmp_path)
    assert run.code == 0, run.stderr
    session_id: str = run.json()["session_id"]
    return session_id


def test_compact_then_resume_continues_from_the_summary(tmp_path: Path) -> None:
    session_id = saved_session(tmp_path)
    script = write_script(tmp_path, [compact_entry()], name="compact.json")
    compacted = run_cli(
        "compact",
        session_id,
        "--model",
        f"scripted:{script}",
        "--instructions",
        "keep the line numbers",
        "--output-format",
        "json",
        cwd=tmp_path,
        env=ENV,
    )
    assert compacted.code == 0, compacted.stderr
    result = compacted.json()
    assert (result["session_id"], result["trigger"], result["method"]) == (
        session_id,
        "manual",
        "summary",
    )
    assert result["summary"] == SUMMARY
    assert result["tokens_after"] < result["tokens_before"]
    summary_request = recorded(tmp_path)[-1]
    assert (summary_request["agent_type"], summary_request["agent_id"]) == ("compact", session_id)
    assert "line 0399" in text_of(summary_request)
    assert "keep the line numbers" in text_of(summary_request)

    again = write_script(
        tmp_path, [{"agent_type": "main", "turns": [{"text": "second"}]}], name="again.json"
    )
    resumed = run_script(again, tmp_path, "--resume", session_id, prompt="and now?", env=ENV)
    assert resumed.code == 0, resumed.stderr
    request = recorded(tmp_path)[-1]
    assert SUMMARY in text_of(request) and "and now?" in text_of(request)
    assert "line 0399" not in text_of(request)
    assert request_tokens(request) < THRESHOLD < request_tokens(summary_request)
    assert recorded(tmp_path)[-2] == summary_request  # the resumed run needed no compaction


def test_session_compact_emits_the_event_and_needs_a_saved_session(tmp_path: Path) -> None:
    session_id = saved_session(tmp_path)
    script = write_script(tmp_path, [compact_entry()], name="compact.json")
    events: list[Event] = []
    session = Session(SessionOptions(model=f"scripted:{script}", cwd=tmp_path, resume=session_id))
    result = asyncio.run(session.compact(on_event=events.append))
    assert result.method == "summary"
    (event,) = [e for e in events if isinstance(e, CompactionEvent)]
    assert event.to_dict()["trigger"] == "manual"
    assert event.to_dict()["agent_id"] == session_id
    fresh = Session(SessionOptions(model=f"scripted:{script}", cwd=tmp_path))
    try:
        asyncio.run(fresh.compact())
    except ValueError as error:
        assert "saved session" in str(error)
    else:
        raise AssertionError("a session without resume= has nothing to compact")


def test_compact_refuses_what_it_cannot_find_in_one_line(tmp_path: Path) -> None:
    model = f"scripted:{write_script(tmp_path, [compact_entry()])}"
    nothing = run_cli("compact", "--model", model, cwd=tmp_path)
    assert nothing.code == 2 and "no earlier session" in nothing.stderr
    unknown = run_cli("compact", "nope", "--model", model, cwd=tmp_path)
    assert unknown.code == 2 and "no such session" in unknown.stderr
    assert unknown.stderr.count("\n") == 1
    assert json.loads(run_cli("tasks", "list", "--json", cwd=tmp_path).stdout) == []


def test_pre_and_post_compact_hooks_see_the_trigger_and_a_block_skips(tmp_path: Path) -> None:
    """PreCompact (matcher: the trigger) gets the instructions and exit 2 skips the compaction;
    PostCompact gets the summary."""
    session_id = saved_session(tmp_path)
    log = tmp_path / "hooks.log"
    gate = tmp_path / "block"
    gate.write_text("")

    def hook(extra: str = "") -> dict[str, object]:
        command = f"cat >> {log}; echo >> {log}{extra}"
        return {"matcher": "manual", "hooks": [{"type": "command", "command": command}]}

    block = f"; if [ -e {gate} ]; then echo 'not now' >&2; exit 2; fi"
    settings = {"hooks": {"PreCompact": [hook(block)], "PostCompact": [hook()]}}
    folder = tmp_path / ".claude"
    folder.mkdir(exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings))
    script = write_script(tmp_path, [compact_entry()], name="compact.json")
    args = ["compact", session_id, "--model", f"scripted:{script}", "--output-format", "json"]
    blocked = run_cli(*args, "--instructions", "focus", cwd=tmp_path, env=ENV)
    assert blocked.code == 1 and "not now" in blocked.stderr
    assert blocked.json()["method"] == "skipped"
    assert [r["agent_type"] for r in recorded(tmp_path)].count("compact") == 0
    gate.unlink()
    done = run_cli(*args, cwd=tmp_path, env=ENV)
    assert done.code == 0, done.stderr
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    names = [(e["hook_event_name"], e["trigger"]) for e in events]
    assert names == [("PreCompact", "manual"), ("PreCompact", "manual"), ("PostCompact", "manual")]
    assert events[0]["custom_instructions"] == "focus"
    assert events[2]["compact_summary"] == SUMMARY


def test_a_held_session_compacts_between_turns_and_resumes_from_the_summary(
    tmp_path: Path,
) -> None:
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("Read", file_path=str(big))]},
            {"text": "first"},
            {"text": "second"},
        ],
    }
    script = write_script(tmp_path, [main, compact_entry()])
    options = SessionOptions(model=f"scripted:{script}", cwd=tmp_path)

    async def held() -> tuple[str, list[Event]]:
        events: list[Event] = []
        async with Session(options) as session:
            await session.run("read big.txt")
            result = await session.compact("keep the line numbers", on_event=events.append)
            assert (result.trigger, result.method) == ("manual", "summary")
            assert result.tokens_after < result.tokens_before
            answer = await session.run("and now?")
            assert answer.result == "second"
            assert session.total_usage().output_tokens > 0
            return session.session_id, events

    session_id, events = asyncio.run(held())
    assert [e.to_dict()["trigger"] for e in events if isinstance(e, CompactionEvent)] == ["manual"]
    summary_request, after = recorded(tmp_path)[-2:]
    assert summary_request["agent_type"] == "compact"
    assert "keep the line numbers" in text_of(summary_request)
    assert "line 0399" in text_of(summary_request)
    assert SUMMARY in text_of(after) and "and now?" in text_of(after)
    assert "line 0399" not in text_of(after), "the next turn starts from the summary"

    again = write_script(
        tmp_path, [{"agent_type": "main", "turns": [{"text": "third"}]}], name="again.json"
    )
    resumed = run_script(again, tmp_path, "--resume", session_id, prompt="still there?")
    assert resumed.code == 0, resumed.stderr
    request = recorded(tmp_path)[-1]
    assert SUMMARY in text_of(request) and "and now?" in text_of(request)
    assert "line 0399" not in text_of(request), "the transcript holds the boundary too"


def test_a_held_session_refuses_to_compact_while_a_turn_runs(tmp_path: Path) -> None:
    main = {"agent_type": "main", "turns": [{"text": "slow", "delay_ms": 1500}]}
    script = write_script(tmp_path, [main, compact_entry()])

    async def racing() -> str:
        async with Session(SessionOptions(model=f"scripted:{script}", cwd=tmp_path)) as session:
            turn = asyncio.create_task(session.run("go"))
            await asyncio.sleep(0.3)
            try:
                await session.compact()
            except (RuntimeError, ValueError) as error:
                message = str(error)
            else:
                message = "compacted"
            await turn
            return message

    assert asyncio.run(racing()) == "a turn is running: compact between turns"


def test_compact_refuses_a_session_another_process_is_running_until_it_ends(
    tmp_path: Path,
) -> None:
    session_id = saved_session(tmp_path)
    before = len(recorded(tmp_path))
    slow = write_script(
        tmp_path,
        [{"agent_type": "main", "turns": [{"text": "late", "delay_ms": 60000}]}],
        name="slow.json",
    )
    running = start_script(slow, tmp_path, "--resume", session_id, prompt="take your time")
    try:
        deadline = time.monotonic() + 60
        while len(recorded(tmp_path)) == before:  # until the resumed run's request arrives
            assert running.poll() is None, running.communicate()
            assert time.monotonic() < deadline, "the resumed run never called the model"
            time.sleep(0.05)
        model = f"scripted:{write_script(tmp_path, [compact_entry()], name='compact.json')}"
        refused = run_cli("compact", session_id, "--model", model, cwd=tmp_path)
        assert refused.code == 2
        assert f"compact {session_id}: the session is running in another process" in (
            refused.stderr
        )
        assert len(recorded(tmp_path)) == before + 1, "the refused compaction called no model"
    finally:
        os.kill(running.pid, signal.SIGKILL)  # a crash drops the lock with the process
        running.communicate()
    compacted = run_cli("compact", session_id, "--model", model, cwd=tmp_path)
    assert compacted.code == 0, compacted.stderr
    assert recorded(tmp_path)[-1]["agent_type"] == "compact"
