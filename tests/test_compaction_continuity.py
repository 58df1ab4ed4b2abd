"""A compacted history keeps working for what comes after it: a fork of a compacted parent
shares its request prefix byte for byte, and a resumed child continues from its summary."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import agent_call, recorded, run_script, tool_call, write_script
from test_compaction import ENV, SUMMARY, big_file, compact_entry, text_of


def test_a_fork_of_a_compacted_parent_repeats_its_request_byte_for_byte(tmp_path: Path) -> None:
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("Read", file_path=str(big))]},
            {"tool_calls": [agent_call("scope: the summary", description="fork")]},
            {"text": "merged {{tool_results}}"},
        ],
    }
    fork = {"agent_type": "fork", "turns": [{"text": "Scope: done"}]}
    script = write_script(tmp_path, [main, fork, compact_entry()])
    run = run_script(script, tmp_path, env=ENV)
    assert run.code == 0, run.stderr
    requests = recorded(tmp_path)
    assert [r["agent_type"] for r in requests] == ["main", "compact", "main", "fork", "main"]
    parent, forked = requests[2], requests[3]
    assert SUMMARY in text_of(parent)
    assert forked["system"] == parent["system"]
    assert json.dumps(forked["tools"]) == json.dumps(parent["tools"])
    n = len(parent["messages"])
    assert json.dumps(forked["messages"][:n]) == json.dumps(parent["messages"])
    assert "line 0399" not in text_of(forked)
    assert "Scope: done" in run.json()["result"]


def test_a_compacted_child_resumed_later_continues_from_its_summary(tmp_path: Path) -> None:
    big = big_file(tmp_path)
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [agent_call("token C", "Explore")]},
            {
                "capture": {"id": r"agentId: (\w+)"},
                "tool_calls": [agent_call("and then?", "Explore", resume_from="{{capture.id}}")],
            },
            {"text": "done"},
        ],
    }
    child = {
        "agent_type": "Explore",
        "match": "token C",
        "turns": [{"tool_calls": [tool_call("Read", file_path=str(big))]}, {"text": "report R-51"}],
    }
    again = {"agent_type": "Explore", "match": "and then", "turns": [{"text": "second"}]}
    script = write_script(tmp_path, [main, child, again, compact_entry(match="token C")])
    run = run_script(script, tmp_path, env=ENV)
    assert run.code == 0, run.stderr
    first, resumed = run.json()["agents"][1:]
    assert resumed["agentId"] != first["agentId"]
    requests = [r for r in recorded(tmp_path) if r["agent_type"] == "Explore"]
    last = requests[-1]
    assert last["agent_id"] == resumed["agentId"]
    assert SUMMARY in text_of(last) and "and then?" in text_of(last)
    assert "line 0399" not in text_of(last)  # the raw read is behind the child's boundary
    assert "report R-51" in text_of(last)  # and what the child said after it is kept
    assert [r["agent_type"] for r in recorded(tmp_path)].count("compact") == 1
