"""The agent catalog and ``Agent(a, b)`` allow-lists, judged by what the model receives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_helpers import agent_call, recorded, run_script, tool_call, write_script
from subagents.agents.agent_file import parse_agent_markdown
from subagents.agents.catalog import agent_allow_list, render_catalog, spawnable
from subagents.agents.definitions import DefinitionSet, load_definitions
from subagents.agents.schema import AgentDefinition

REVIEWER = {
    "reviewer": {
        "description": "Reviews a diff for bugs and style problems; use it after any edit.",
        "prompt": "You review diffs.",
        "tools": ["Read", "Grep"],
    }
}


def texts(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b["type"] == "text")


def deny_settings(folder: Path, *rules: str) -> Path:
    path = folder / "settings.json"
    path.write_text(json.dumps({"permissions": {"deny": list(rules)}}))
    return path


def test_catalog_names_custom_type_and_hides_denied_one(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "ok"}]}])
    settings = deny_settings(tmp_path, "Agent(Plan)")
    run = run_script(
        script, tmp_path, "--agents", json.dumps(REVIEWER), "--settings", str(settings)
    )
    assert run.code == 0, run.stderr
    first = recorded(tmp_path)[0]
    catalog = texts(first["messages"][0])
    assert "- reviewer: Reviews a diff for bugs and style problems" in catalog
    assert "(tools: Grep, Read)" in catalog
    assert "- Explore:" in catalog
    assert "- Plan:" not in catalog
    assert catalog.rstrip().endswith("go")  # the task comes after the catalog


def test_tool_array_does_not_depend_on_the_definitions(tmp_path: Path) -> None:
    """The catalog lives in the conversation: the tool array is the same bytes either way."""
    arrays = []
    for index, agents in enumerate(({}, REVIEWER)):
        folder = tmp_path / str(index)
        folder.mkdir()
        script = write_script(folder, [{"agent_type": "main", "turns": [{"text": "ok"}]}])
        assert run_script(script, folder, "--agents", json.dumps(agents)).code == 0
        arrays.append(json.dumps(recorded(folder)[0]["tools"]))
    assert arrays[0] == arrays[1]


LEAD = {
    "lead": {
        "description": "Coordinates research.",
        "prompt": "You coordinate.",
        "tools": ["Read", "Agent(Explore)"],
    }
}


def test_agent_explore_in_tools_refuses_general_purpose(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("coordinate", "lead")]},
                    {"text": "main: {{tool_results}}"},
                ],
            },
            {
                "agent_type": "lead",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("write things", "general-purpose"),
                            agent_call("look around", "Explore"),
                            agent_call("fork me"),
                        ]
                    },
                    {"text": "lead saw: {{tool_results}}"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "explored"}]},
        ],
    )
    run = run_script(script, tmp_path, "--agents", json.dumps(LEAD))
    assert run.code == 0, run.stderr
    agents = [a["agentType"] for a in run.json()["agents"]]
    assert agents == ["main", "lead", "Explore"]  # no general-purpose, no fork
    lead_requests = [r for r in recorded(tmp_path) if r["agent_type"] == "lead"]
    results = lead_requests[1]["messages"][-1]["content"]
    refused = [b for b in results if b["type"] == "tool_result" and b.get("is_error")]
    assert len(refused) == 2
    for block in refused:
        assert "'Agent(Explore)'" in block["content"]
        assert "agent 'lead'" in block["content"]
    # The lead's model is told only what it may spawn, and no fork.
    catalog = texts(lead_requests[0]["messages"][0])
    assert "- Explore:" in catalog
    assert "- general-purpose:" not in catalog
    assert "fork yourself" not in catalog


def test_definition_file_tools_restrict_too(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: Leads.\ntools: Read, Agent(Explore, Plan)\n---\nLead.\n"
    )
    definitions = load_definitions(cwd=tmp_path, home=tmp_path / "home")
    lead = definitions.find("lead")
    assert lead is not None
    assert agent_allow_list(lead) == ("Explore", "Plan")
    names = [d.name for d in spawnable(definitions, lead, None)]
    assert names == ["Explore", "Plan"]


def test_allow_list_parsing() -> None:
    def make(tools: tuple[str, ...] | None) -> AgentDefinition:
        return AgentDefinition(name="x", description="d", tools=tools, source="built-in")

    assert agent_allow_list(make(None)) is None
    assert agent_allow_list(make(("Read", "Agent"))) is None
    assert agent_allow_list(make(("Task(a,b)",))) == ("a", "b")
    assert agent_allow_list(make(("Agent", "Agent(Explore)"))) == ("Explore",)
    assert agent_allow_list(make(("Agent()",))) == ()
    parsed = parse_agent_markdown(
        "---\nname: y\ndescription: d\ntools: Agent(Explore, Plan), Read\n---\nbody\n",
        path="y.md",
        source="project",
    )
    assert agent_allow_list(parsed.definition) == ("Explore", "Plan")


def test_empty_catalog_says_so() -> None:
    text = render_catalog([], ["Read"], fork_enabled=False)
    assert "No agent types are available" in text
    assert DefinitionSet().names() == []


def test_new_definition_file_during_a_session_reaches_the_model(tmp_path: Path) -> None:
    body = "---\nname: newcomer\ndescription: Arrived mid-session.\n---\nHi.\n"
    target = tmp_path / ".claude" / "agents" / "newcomer.md"
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    # The delay lets the session's once-per-second definition check come due.
                    {
                        "tool_calls": [tool_call("Write", file_path=str(target), content=body)],
                        "delay_ms": 1100,
                    },
                    {"tool_calls": [agent_call("hello", "newcomer")]},
                    {"text": "done: {{tool_results}}"},
                ],
            },
            {"agent_type": "newcomer", "turns": [{"text": "newcomer here"}]},
        ],
    )
    run = run_script(script, tmp_path, "--permission-mode", "acceptEdits")
    assert run.code == 0, run.stderr
    assert "newcomer here" in run.json()["result"]
    requests = [r for r in recorded(tmp_path) if r["agent_type"] == "main"]
    assert "newcomer" not in texts(requests[0]["messages"][0])
    update = texts(requests[1]["messages"][-1])
    assert "have changed" in update
    assert "- newcomer: Arrived mid-session." in update
    # Announced once: the next turn carries no second copy.
    assert "have changed" not in texts(requests[2]["messages"][-1])
    assert json.dumps(requests[0]["tools"]) == json.dumps(requests[1]["tools"])
