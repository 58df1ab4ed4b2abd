"""Two MCP servers whose tool names come out the same (``my.srv`` and ``my_srv`` both normalise
to ``my_srv``; ``a__b``'s ``c`` and ``a``'s ``b__c`` are both ``mcp__a__b__c``) must not give the
model one name twice: a provider refuses a request whose tool names repeat (Anthropic: "tool
names must be unique"), so every model call of the session would fail. The first server's tool
keeps the name; the other is left out with a warning naming both servers."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import run_script, tool_call, write_script
from mcp_helpers import demo, env_for, project, requests_of, tool_results


def test_tools_of_two_servers_with_one_name_are_offered_once(tmp_path: Path) -> None:
    root = project(tmp_path, {"my.srv": demo(), "my_srv": demo()}, allow=["mcp__my_srv"])
    script = write_script(
        root,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [tool_call("mcp__my_srv__add", a=2, b=3)]},
                    {"text": "ok"},
                ],
            }
        ],
    )
    run = run_script(script, root, env=env_for(tmp_path))
    assert run.code == 0, run.stderr
    main = requests_of(root, "main")
    names = [t["name"] for t in main[0]["tools"]]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert "mcp__my_srv__add" in names
    assert tool_results(main[1])[0]["content"] == "5"
    clash = [line for line in run.stderr.splitlines() if "mcp__my_srv__add" in line]
    assert len(clash) == 1, run.stderr
    assert "'my.srv'" in clash[0] and "'my_srv'" in clash[0], clash
