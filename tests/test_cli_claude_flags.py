"""Claude Code's headless flags on the ``subagents`` command (what claude-agent-sdk sends)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import recorded, run_cli, tool_call, write_script
from subagents.cli.claude_models import choose, claude_family
from subagents.cli.flags import split_list


def text_script(tmp_path: Path, text: str = "ok") -> Path:
    return write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": text}]}])


def test_print_is_a_flag_and_the_prompt_positional_or_stdin(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "{{prompt}}"}]}])
    model = f"scripted:{script}"
    assert run_cli("-p", "hello there", "--model", model, cwd=tmp_path).stdout == "hello there\n"
    assert run_cli("--print", "--model", model, "positional", cwd=tmp_path).stdout == (
        "positional\n"
    )
    piped = subprocess.run(
        [sys.executable, "-m", "subagents", "-p", "--model", model],
        input="from stdin",
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == "from stdin\n"


@pytest.mark.parametrize(("argument", "piped"), [(None, ""), (None, " \n\t\n"), ("", None)])
def test_an_empty_prompt_is_refused_before_any_model_call(
    tmp_path: Path, argument: str | None, piped: str | None
) -> None:
    script = text_script(tmp_path)
    prompt = [] if argument is None else [argument]
    run = subprocess.run(
        [sys.executable, "-m", "subagents", "-p", *prompt, "--model", f"scripted:{script}"],
        input=piped,
        stdin=subprocess.DEVNULL if piped is None else None,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Before: the run went on and sent the model an empty user message (`-p </dev/null`).
    assert run.returncode == 2
    assert "no prompt" in run.stderr and run.stdout == ""
    assert not (tmp_path / "requests.jsonl").exists()


def test_sdk_flags_are_honoured_and_values_starting_with_a_dash_bind(tmp_path: Path) -> None:
    script = text_script(tmp_path)
    run = run_cli(
        "-p", "go", "--model", f"scripted:{script}", "--output-format", "json",
        "--system-prompt", "-you are terse-",
        "--append-system-prompt", "APPENDED",
        "--tools", "Read,Glob Grep",
        "--allowedTools", "Bash(git log:*),Read",
        "--disallowedTools", "Grep",
        "--setting-sources=user,project,local",
        "--verbose",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.code == 0, run.stderr
    assert "warning" not in run.stderr
    [request] = recorded(tmp_path)
    assert request["system"].startswith("-you are terse-")
    assert request["system"].rstrip().endswith("APPENDED")
    assert [t["name"] for t in request["tools"]] == ["Glob", "Read"]
    result = run.json()
    assert result["total_cost_usd"] == 0 and result["permission_denials"] == []


def test_add_dir_is_a_root_of_the_file_tools_and_an_empty_system_prompt_is_empty(
    tmp_path: Path,
) -> None:
    project, extra, other = (tmp_path / n for n in ("project", "extra", "other"))
    for folder in (project, extra, other):
        folder.mkdir()
        (folder / "note.txt").write_text(f"in {folder.name}\n")
    (project / "CLAUDE.md").write_text("Be brief.\n")
    reads = [tool_call("Read", file_path=str(d / "note.txt")) for d in (extra, other)]
    turns = [{"tool_calls": reads}, {"text": "{{tool_results}}"}]
    script = write_script(project, [{"agent_type": "main", "turns": turns}])
    run = run_cli(
        "-p", "read", "--model", f"scripted:{script}", "--output-format", "json",
        "--add-dir", str(extra), "--system-prompt", "",
        cwd=project,
    )  # fmt: skip
    assert run.code == 0, run.stderr
    result = run.json()["result"]
    assert "in extra" in result and "in other" not in result and "outside" in result
    first = recorded(project)[0]
    assert first["system"] == ""  # no guidance, no environment, no context
    assert "Be brief." in json.dumps(first["messages"][0])


def test_accepted_but_unhonoured_flags_warn_once_each(tmp_path: Path) -> None:
    script = text_script(tmp_path)
    run = run_cli(
        "-p", "go", "--model", f"scripted:{script}",
        "--betas", "x", "--effort", "high", "--max-thinking-tokens", "100",
        "--mcp-config", '{"mcpServers": {}}', "--permission-mode", "auto",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.code == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if "not honoured" in line]
    assert len(lines) == 4
    for flag in ("--betas", "--effort", "--max-thinking-tokens", "auto"):
        assert sum(flag in line for line in lines) == 1, flag
    assert "--mcp-config" not in run.stderr  # honoured (MCP, issue 17)


def test_unknown_flags_and_bad_values_fail_with_a_clear_line(tmp_path: Path) -> None:
    script = text_script(tmp_path)
    model = f"scripted:{script}"
    unknown = run_cli("-p", "go", "--model", model, "--no-such-flag", cwd=tmp_path)
    assert unknown.code == 2 and "--no-such-flag" in unknown.stderr
    bad_tools = run_cli("-p", "go", "--model", model, "--tools", "Read,Nope", cwd=tmp_path)
    assert bad_tools.code == 2 and "Nope" in bad_tools.stderr
    bad_schema = run_cli("-p", "go", "--model", model, "--json-schema", "[1", cwd=tmp_path)
    assert bad_schema.code == 2 and "--json-schema" in bad_schema.stderr
    bad_budget = run_cli("-p", "go", "--model", model, "--max-budget-usd", "lots", cwd=tmp_path)
    assert bad_budget.code == 2 and "USD" in bad_budget.stderr
    bad_id = run_cli("-p", "go", "--model", model, "--session-id", "x", cwd=tmp_path)
    assert bad_id.code == 2 and "UUID" in bad_id.stderr


def test_session_id_and_fork_session(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {"agent_type": "main", "match": "^one", "turns": [{"text": "first"}]},
            {"agent_type": "main", "match": "^two", "turns": [{"text": "forked"}]},
        ],
    )
    new_id = "0f2ab0f2-3c2d-4e47-9a4e-5d3f0e2a1b00"
    fork_id = "1f2ab0f2-3c2d-4e47-9a4e-5d3f0e2a1b00"
    model = f"scripted:{script}"
    first = run_cli(
        "-p", "one", "--model", model, "--output-format", "json", "--session-id", new_id,
        cwd=tmp_path,
    )  # fmt: skip
    assert first.json()["session_id"] == new_id
    fork = run_cli(
        "-p", "two", "--model", model, "--output-format", "json", "--resume", new_id,
        "--fork-session", "--session-id", fork_id,
        cwd=tmp_path,
    )  # fmt: skip
    assert fork.code == 0, fork.stderr
    assert fork.json()["session_id"] == fork_id
    assert len(recorded(tmp_path)[-1]["messages"]) == 3  # the forked history came along


def test_claude_model_names_map_onto_the_configured_provider() -> None:
    assert claude_family("claude-sonnet-4-5-20250929") == "sonnet"
    assert claude_family("claude-3-5-haiku-latest") == "haiku"
    assert claude_family("opus[1m]") == "opus"
    assert claude_family("gpt-4o") is None
    on_openai = choose("claude-opus-4-5", "openai:my-model")
    assert on_openai.spec == "openai:my-model" and "configured model" in on_openai.note
    on_claude = choose("sonnet[1m]", "anthropic:sonnet")
    assert on_claude.spec == "anthropic:sonnet"
    assert choose("openai:other", "openai:my-model").spec == "openai:other"
    assert choose(None, "local").spec == "local"


def test_claude_model_name_with_alias_table_entry(monkeypatch: object) -> None:
    import os

    os.environ["SUBAGENTS_MODEL_ALIASES"] = json.dumps({"opus": {"openai": "big-one"}})
    try:
        assert choose("claude-opus-4-5", "openai:small").spec == "openai:big-one"
    finally:
        del os.environ["SUBAGENTS_MODEL_ALIASES"]


def test_list_flags_split_like_claude_code() -> None:
    assert split_list("Bash(git log:*),Read Edit") == ["Bash(git log:*)", "Read", "Edit"]
    assert split_list("Bash(npm run test, lint)") == ["Bash(npm run test, lint)"]
    assert split_list("") == []


def test_stream_json_input_runs_turn_after_turn_and_survives_bad_lines(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [{"agent_type": "main", "turns": [
            {"tool_calls": [tool_call("Glob", pattern="*.json")]},
            {"text": "one: {{tool_results}}"},
            {"text": "two: {{last_user}}"},
        ]}],
    )  # fmt: skip
    lines = [
        json.dumps({"type": "control_request", "request_id": "r1",
                    "request": {"subtype": "initialize", "hooks": None}}),
        "this is not json",
        json.dumps({"type": "user", "message": {"role": "user", "content": "first"}}),
        json.dumps({"type": "control_request", "request_id": "r2",
                    "request": {"subtype": "rewind_files", "user_message_id": "x"}}),
        json.dumps({"type": "user", "message": {"role": "user",
                    "content": [{"type": "text", "text": "second"}]}}),
    ]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "subagents", "--input-format", "stream-json",
         "--output-format", "stream-json", "--model", f"scripted:{script}"],
        input="\n".join(lines) + "\n",
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "not JSON" in proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    responses = {e["response"]["request_id"]: e["response"] for e in events
                 if e["type"] == "control_response"}  # fmt: skip
    assert responses["r1"]["subtype"] == "success"
    assert responses["r2"]["subtype"] == "error" and "rewind_files" in responses["r2"]["error"]
    results = [e for e in events if e["type"] == "result"]
    assert [r["result"] for r in results] == ["one: script.json", "two: second"]
    assert len({r["session_id"] for r in results}) == 1
    inits = [e for e in events if e.get("subtype") == "init"]
    assert len(inits) == 2 and all(e["claude_code_version"] for e in inits)


def test_stream_json_user_lines_carry_one_tool_result_each(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [{"agent_type": "main", "turns": [
            {"tool_calls": [tool_call("Glob", pattern="*.json"), tool_call("Glob", pattern="*.x")]},
            {"text": "done"},
        ]}],
    )  # fmt: skip
    run = run_cli(
        "-p", "go", "--model", f"scripted:{script}", "--output-format", "stream-json",
        cwd=tmp_path,
    )  # fmt: skip
    users = [e for e in run.events() if e["type"] == "user"]
    assert [len(u["message"]["content"]) for u in users] == [1, 1]
    assert [u["tool_use_result"]["num_files"] for u in users] == [1, 0]
    assert all(u["agent_type"] == "main" and u["uuid"] for u in users)
