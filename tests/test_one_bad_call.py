"""One bad input never ends a session (issue 13 item 6), through the real CLI.

Each hostile call below used to escape the loop (an ``UnboundLocalError`` in the scheduler, or
a lone surrogate failing the transcript or the printer) and end the run with exit 2; inside a
child, the child was reported ``killed``. Now each is one ``is_error`` result and the run goes on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_helpers import agent_call, run_script, tool_call, write_script
from subagents.store.transcript import read_messages
from test_hooks_permissions_e2e import hook, write_settings


def tool_results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block
        for event in events
        if event.get("type") == "user"
        for block in event["message"]["content"]
        if block.get("type") == "tool_result"
    ]


def main_then_done(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"agent_type": "main", "turns": [{"tool_calls": calls}, {"text": "still here"}]}]


def test_hostile_paths_are_error_results_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "loop_a").symlink_to("loop_b")
    (tmp_path / "loop_b").symlink_to("loop_a")
    calls = [
        tool_call("Write", file_path="a\x00b.txt", content="x"),
        tool_call("Edit", file_path="loop_a/f.txt", old_string="", new_string="x"),
        tool_call("Write", file_path="loop_a", content="x"),
        tool_call("Write", file_path="/proc/1/root/tmp/escape.txt", content="x"),
        tool_call("Read", file_path="/proc/1/root/etc/hostname"),
        tool_call("Read", file_path="/proc/self/root/etc/hostname"),
        tool_call("Grep", pattern="x", path="a\x00b"),
    ]
    script = write_script(tmp_path, main_then_done(calls))
    run = run_script(script, tmp_path, output_format="stream-json")
    assert run.code == 0, run.stderr
    events = run.events()
    results = tool_results(events)
    assert len(results) == len(calls)
    assert all(r.get("is_error") for r in results), results
    assert "NUL byte" in results[0]["content"] and "file_path" in results[0]["content"]
    assert "NUL byte" in results[-1]["content"] and "`path`" in results[-1]["content"]
    assert events[-1]["subtype"] == "success" and events[-1]["result"] == "still here"
    assert not Path("/tmp/escape.txt").exists()


def test_a_lone_surrogate_from_the_model_does_not_end_the_run(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [tool_call("Write", file_path="s\ud800.txt", content="\udc80")]},
                    {"text": "odd \ud800 text"},
                ],
            }
        ],
    )
    for output_format in ("json", "stream-json", "text"):
        run = run_script(script, tmp_path, output_format=output_format)
        assert run.code == 0, run.stderr
        if output_format == "json":
            data = run.json()
            assert data["subtype"] == "success" and data["result"] == "odd \ud800 text"
        elif output_format == "text":
            assert "odd \\ud800 text" in run.stdout


def test_the_surrogate_reaches_the_transcript_intact(tmp_path: Path) -> None:
    from subagents.store.transcript import TranscriptWriter

    writer = TranscriptWriter(tmp_path / "t.jsonl")
    writer.append({"role": "assistant", "content": [{"type": "text", "text": "a\ud800b"}]})
    writer.close()
    messages = read_messages(tmp_path / "t.jsonl")
    assert messages[0]["content"][0]["text"] == "a\ud800b"


def hook_script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\ncat > /dev/null\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_a_hooks_invalid_updated_input_is_one_error_result(tmp_path: Path) -> None:
    output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"file_path": 5, "content": "x"},
        }
    }
    command = hook_script(tmp_path, "bad.sh", f"echo '{json.dumps(output)}'")
    write_settings(tmp_path, {"hooks": {"PreToolUse": [hook(command, matcher="Write")]}})
    calls = [tool_call("Write", file_path="w.txt", content="x"), tool_call("Glob", pattern="*")]
    run = run_script(
        write_script(tmp_path, main_then_done(calls)), tmp_path, output_format="stream-json"
    )
    assert run.code == 0, run.stderr
    write, glob = tool_results(run.events())
    assert write["is_error"] and "updatedInput" in write["content"]
    assert "file_path" in write["content"]
    assert not glob.get("is_error")
    assert not (tmp_path / "w.txt").exists()


def test_deep_json_from_a_hook_is_one_error_result(tmp_path: Path) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    (tmp_path / "deep.json").write_text('{"decision": ' + deep + "}")
    command = hook_script(tmp_path, "deep.sh", f"cat {tmp_path / 'deep.json'}")
    write_settings(
        tmp_path,
        {"hooks": {"PreToolUse": [hook(command)], "PostToolUse": [hook(command)]}},
    )
    calls = [tool_call("Write", file_path="w.txt", content="x")]
    run = run_script(write_script(tmp_path, main_then_done(calls)), tmp_path, output_format="json")
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "still here"


def test_a_child_with_a_bad_call_completes_instead_of_being_killed(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [{"tool_calls": [agent_call("probe", "general-purpose")]}, {"text": "ok"}],
            },
            {
                "agent_type": "general-purpose",
                "turns": [
                    {"tool_calls": [tool_call("Write", file_path="/proc/1/root/x", content="x")]},
                    {"text": "child done: {{tool_results}}"},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    data = run.json()
    child = data["agents"][1]
    assert child["status"] == "completed", data
