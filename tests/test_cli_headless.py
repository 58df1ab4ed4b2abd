"""`subagents -p` end to end, through the real command and scripted model files (SPEC §19)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import recorded, run_cli, run_script, write_script


def main_agent(*turns: dict[str, object]) -> dict[str, object]:
    return {"agent_type": "main", "turns": list(turns)}


def test_json_result_shape_and_tool_use(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    script = write_script(
        tmp_path,
        [
            main_agent(
                {"tool_calls": [{"name": "Glob", "input": {"pattern": "*.py"}}]},
                {"text": "saw {{tool_results}}", "usage": {"input_tokens": 11, "output_tokens": 3}},
            )
        ],
    )
    run = run_script(script, tmp_path, prompt="list py files")
    assert run.code == 0, run.stderr
    result = run.json()
    assert result["type"] == "result"
    assert result["subtype"] == "success"
    assert result["is_error"] is False
    assert result["result"] == "saw a.py"
    assert result["num_turns"] == 2
    assert set(result["usage"]) == {
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    }
    assert result["agents"][0]["agentType"] == "main"
    assert result["agents"][0]["totalToolUseCount"] == 1
    assert isinstance(result["session_id"], str) and result["session_id"]


def test_text_output_and_stream_json_events(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            main_agent(
                {"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]},
                {"text": "done {{tool_results}}"},
            )
        ],
    )
    text = run_script(script, tmp_path, output_format="text")
    assert text.code == 0, text.stderr
    assert text.stdout == "done hi\n"

    script = write_script(
        tmp_path,
        [
            main_agent(
                {"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]},
                {"text": "done"},
            )
        ],
        name="s2.json",
    )
    stream = run_script(script, tmp_path, output_format="stream-json")
    assert stream.code == 0, stream.stderr
    events = stream.events()
    kinds = [e["type"] for e in events]
    assert kinds == ["system", "assistant", "user", "assistant", "result"]
    assert events[0]["subtype"] == "init"
    assert events[0]["session_id"] == events[-1]["session_id"]
    assert all("agent_id" in e for e in events[:-1])


def test_injected_overload_is_retried_then_succeeds(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [main_agent({"text": "finally", "error": {"type": "overloaded", "times": 2}})],
    )
    run = run_script(script, tmp_path, output_format="stream-json")
    assert run.code == 0, run.stderr
    events = run.events()
    retries = [e for e in events if e.get("subtype") == "api_retry"]
    assert [r["attempt"] for r in retries] == [1, 2]
    assert all(r["error"] == "overloaded" for r in retries)
    assert events[-1]["result"] == "finally"
    lines = recorded(tmp_path)
    assert [("error" in line) for line in lines] == [True, True, False]


def test_max_turns_ends_with_error_subtype_and_exit_1(tmp_path: Path) -> None:
    loop_turn = {"tool_calls": [{"name": "Glob", "input": {"pattern": "*"}}]}
    script = write_script(tmp_path, [main_agent(loop_turn, loop_turn, loop_turn, loop_turn)])
    run = run_script(script, tmp_path, "--max-turns", "2")
    assert run.code == 1
    result = run.json()
    assert result["subtype"] == "error_max_turns"
    assert result["is_error"] is True
    assert result["num_turns"] == 2
    assert "error_max_turns" in run.stderr


def test_bad_inputs_fail_with_one_clear_line(tmp_path: Path) -> None:
    bad_provider = run_cli("-p", "go", "--model", "nope:x", cwd=tmp_path)
    assert bad_provider.code == 2
    assert bad_provider.stderr.count("\n") == 1
    assert "nope" in bad_provider.stderr

    missing = run_cli("-p", "go", "--model", "scripted:missing.json", cwd=tmp_path)
    assert missing.code == 2
    assert "missing.json" in missing.stderr

    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"agents": [{"turns": [{"error": {"type": "meltdown"}}]}]}))
    invalid = run_cli("-p", "go", "--model", f"scripted:{broken}", cwd=tmp_path)
    assert invalid.code == 2
    assert "broken.json" in invalid.stderr and "agents[0].turns[0].error" in invalid.stderr
    assert "Traceback" not in invalid.stderr


def test_script_exhaustion_is_an_execution_error(tmp_path: Path) -> None:
    script = write_script(
        tmp_path, [main_agent({"tool_calls": [{"name": "Glob", "input": {"pattern": "*"}}]})]
    )
    run = run_script(script, tmp_path)
    assert run.code == 1
    assert run.json()["subtype"] == "error_during_execution"
    assert "main" in run.json()["result"]


def test_resume_continues_the_session_history(tmp_path: Path) -> None:
    first = write_script(tmp_path, [main_agent({"text": "remember 42"})], name="one.json")
    run1 = run_cli(
        "-p", "store", "--model", f"scripted:{first}", "--output-format", "json", cwd=tmp_path
    )
    session_id = run1.json()["session_id"]
    second = write_script(
        tmp_path, [main_agent({"text": "history had {{last_user}}"})], name="two.json"
    )
    run2 = run_cli(
        "-p",
        "recall",
        "--model",
        f"scripted:{second}",
        "--resume",
        session_id,
        "--output-format",
        "json",
        cwd=tmp_path,
    )
    assert run2.code == 0, run2.stderr
    assert run2.json()["session_id"] == session_id
    messages = recorded(tmp_path)[-1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][0]["text"] == "remember 42"

    run3 = run_cli(
        "-p",
        "again",
        "--model",
        f"scripted:{second}",
        "-c",
        "--output-format",
        "json",
        cwd=tmp_path,
    )
    assert run3.json()["session_id"] == session_id


def test_a_one_turn_answer_prints_the_answer_and_nothing_on_stderr(tmp_path: Path) -> None:
    """Nothing left behind on the way out: a task cancelled before it ran once left a coroutine
    never awaited, and Python said so on stderr after every quick run."""
    script = write_script(tmp_path, [main_agent({"text": "hi"})])
    for _ in range(3):
        run = run_script(script, tmp_path, output_format="text", env={"PYTHONWARNINGS": "default"})
        assert (run.code, run.stdout, run.stderr) == (0, "hi\n", "")
