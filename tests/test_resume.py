"""``resume_from``: new ids, lineage, the frozen snapshot, and every refusal (issue 5 item 2).

Through the real CLI (two processes sharing a session via ``--resume``) and the library
(``Session`` with ``ScriptedModel``); sidecars are read back with a ``FileStore``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_helpers import agent_call, recorded, run_script, tool_call, write_script
from subagents.agents.resume import INTERRUPTED_RESULT, resume_messages
from subagents.messages import Message, tool_result_block, user_message
from subagents.session import Session, SessionOptions, SessionResult
from subagents.state import ProjectState
from subagents.store import FileStore, Lineage, SidecarRecord
from subagents.testing import ScriptedModel

AGENT_ID = r"agentId: (\w+)"
X_AGENTS = json.dumps({"x": {"description": "test agent x", "prompt": "You are X."}})


def definition(version: str, tools: str) -> str:
    return f"---\nname: x\ndescription: test agent x\ntools: {tools}\n---\nYou are X {version}.\n"


def sidecar(cwd: Path, agent_id: str) -> SidecarRecord:
    record = FileStore(ProjectState.for_cwd(cwd)).get(agent_id)
    assert record is not None, f"no sidecar for {agent_id}"
    return record


def texts(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b["type"] == "text")


async def run_session(
    tmp_path: Path, script: dict[str, Any], prompt: str = "go", **options: Any
) -> tuple[Session, SessionResult]:
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script),
            cwd=tmp_path,
            agents_json=X_AGENTS,
            background_wait_ms=options.pop("background_wait_ms", 5_000),
            **options,
        )
    )
    result = await session.run(prompt)
    return session, result


def test_resume_across_processes_uses_the_frozen_snapshot_not_the_edited_definition(
    tmp_path: Path,
) -> None:
    agents_dir = tmp_path / ".claude" / "agents"
    agents_dir.mkdir(parents=True)
    (agents_dir / "x.md").write_text(definition("version one", "Read, Glob"))
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    first = write_script(
        one,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("first task", subagent_type="x")]},
                    {"text": "{{tool_results}}"},
                ],
            },
            {"agent_type": "x", "turns": [{"text": "first answer"}]},
        ],
    )
    run1 = run_script(first, tmp_path)
    assert run1.code == 0, run1.stderr
    source_id = run1.json()["agents"][1]["agentId"]
    session_id = run1.json()["session_id"]

    (agents_dir / "x.md").write_text(definition("version two", "Read, Glob, Grep, Bash"))
    second = write_script(
        two,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "capture": {"id": r"resume (\w+)"},
                        "tool_calls": [
                            agent_call(
                                "follow-up task", subagent_type="x", resume_from="{{capture.id}}"
                            )
                        ],
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {"agent_type": "x", "match": "follow-up", "turns": [{"text": "second answer"}]},
        ],
    )
    run2 = run_script(second, tmp_path, "--resume", session_id, prompt=f"resume {source_id}")
    assert run2.code == 0, run2.stderr
    result = run2.json()
    assert "second answer" in result["result"]
    new_id = result["agents"][1]["agentId"]
    assert new_id != source_id

    source_request = next(r for r in recorded(one) if r["agent_type"] == "x")
    resumed_request = next(r for r in recorded(two) if r["agent_type"] == "x")
    assert resumed_request["system"] == source_request["system"]
    assert "version one" in resumed_request["system"]
    assert resumed_request["tools"] == source_request["tools"]
    assert {t["name"] for t in resumed_request["tools"]} == {"Read", "Glob"}
    history = resumed_request["messages"]
    assert history[0] == source_request["messages"][0]
    assert history[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "first answer"}],
    }
    assert texts(history[-1]) == "follow-up task"

    record = sidecar(tmp_path, new_id)
    assert record.lineage == Lineage(
        root_agent_id=source_id, resumed_from=source_id, resume_depth=1
    )
    assert record.status == "completed" and record.agent_type == "x"
    assert record.config.system_prompt == sidecar(tmp_path, source_id).config.system_prompt
    assert sidecar(tmp_path, source_id).lineage.resume_depth == 0


async def test_a_chain_of_two_resumes_keeps_the_root_and_counts_depth(tmp_path: Path) -> None:
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("start", subagent_type="x")]},
                    {
                        "capture": {"first": AGENT_ID},
                        "tool_calls": [agent_call("again", resume_from="{{capture.first}}")],
                    },
                    {
                        "capture": {"second": AGENT_ID},
                        "tool_calls": [agent_call("third", resume_from="{{capture.second}}")],
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {"agent_type": "x", "match": "start", "turns": [{"text": "one"}]},
            {"agent_type": "x", "match": "again", "turns": [{"text": "two"}]},
            {"agent_type": "x", "match": "third", "turns": [{"text": "three: {{last_user}}"}]},
        ]
    }
    session, result = await run_session(tmp_path, script)
    assert result.subtype == "success", result.result
    first, second, third = (run.agent_id for run in session.agents[1:])
    assert len({first, second, third}) == 3
    assert sidecar(tmp_path, second).lineage == Lineage(
        root_agent_id=first, resumed_from=first, resume_depth=1
    )
    assert sidecar(tmp_path, third).lineage == Lineage(
        root_agent_id=first, resumed_from=second, resume_depth=2
    )
    last = session.agents[3].messages
    assert [texts(m) for m in last if m["role"] == "user"] == ["start", "again", "third"]
    assert "three: third" in result.result


async def test_a_killed_child_is_resumable(tmp_path: Path) -> None:
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("slow work", subagent_type="x", run_in_background=True)
                        ]
                    },
                    {
                        "capture": {"id": AGENT_ID},
                        "delay_ms": 300,
                        "tool_calls": [tool_call("TaskStop", task_id="{{capture.id}}")],
                    },
                    {
                        "tool_calls": [
                            agent_call(
                                "continue now", subagent_type="x", resume_from="{{capture.id}}"
                            )
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "x",
                "match": "slow work",
                "turns": [
                    {"tool_calls": [tool_call("Glob", pattern="*")]},
                    {"text": "never", "delay_ms": 10_000},
                ],
            },
            {"agent_type": "x", "match": "continue now", "turns": [{"text": "picked up again"}]},
        ]
    }
    session, result = await run_session(tmp_path, script)
    killed, resumed = session.agents[1], session.agents[2]
    assert killed.status == "killed"
    assert resumed.status == "completed" and "picked up again" in result.result
    assert sidecar(tmp_path, killed.agent_id).status == "killed"
    assert sidecar(tmp_path, resumed.agent_id).lineage.resumed_from == killed.agent_id
    # The killed run's history (a Glob call and its result) comes first, the new prompt last.
    messages = resumed.messages
    assert texts(messages[0]) == "slow work"
    assert messages[1]["role"] == "assistant" and messages[1]["content"][0]["type"] == "tool_use"
    # It was stopped after its tool results: the prompt joins that user message (no two user
    # messages in a row).
    assert messages[2]["content"][0]["type"] == "tool_result"
    assert messages[2]["content"][-1] == {"type": "text", "text": "continue now"}
    assert messages[3]["role"] == "assistant"


def test_a_history_cut_after_tool_calls_gets_interrupted_results() -> None:
    history: list[Message] = [
        user_message("task"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Glob", "input": {}}],
        },
    ]
    messages = resume_messages(history, "go on")
    assert messages[:2] == history
    blocks = messages[2]["content"]
    assert isinstance(blocks, list)
    assert blocks[0] == tool_result_block("t1", INTERRUPTED_RESULT, is_error=True)
    assert blocks[1] == {"type": "text", "text": "go on"}
    assert resume_messages([*history[:1], {"role": "assistant", "content": "done"}], "more")[
        -1
    ] == user_message([{"type": "text", "text": "more"}])


async def test_running_wrong_type_and_unknown_sources_are_refused(tmp_path: Path) -> None:
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("done quickly", subagent_type="x"),
                            agent_call("keep going", subagent_type="x", run_in_background=True),
                        ]
                    },
                    {
                        "capture": {"done": r"agentId: (\w+) ·", "busy": r"agentId: (\w+)\n"},
                        "tool_calls": [
                            agent_call("r1", resume_from="{{capture.busy}}"),
                            agent_call(
                                "r2", subagent_type="Explore", resume_from="{{capture.done}}"
                            ),
                            agent_call("r3", resume_from="a00000000"),
                            agent_call("r4", resume_from="{{capture.done}}", model="opus"),
                        ],
                    },
                    {"text": "{{tool_results}}"},
                    {"text": "end"},
                ],
            },
            {"agent_type": "x", "match": "done quickly", "turns": [{"text": "quick"}]},
            {
                "agent_type": "x",
                "match": "keep going",
                "turns": [{"text": "slow", "delay_ms": 1500}],
            },
        ]
    }
    session, _ = await run_session(tmp_path, script, background_wait_ms=0)
    first = session.agents[0].messages
    results = [
        b["content"]
        for m in first
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ][2:]
    assert len(results) == 4, results
    running, wrong_type, unknown, override = results
    assert "is still running" in running
    assert "is of type 'x', not 'Explore'" in wrong_type
    assert "no agent with id 'a00000000'" in unknown
    assert "frozen configuration: omit model" in override
    assert len(session.agents) == 3  # no refused resume started a run


async def test_a_child_of_another_session_is_refused(tmp_path: Path) -> None:
    first = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("mine", subagent_type="x")]},
                    {"text": "ok"},
                ],
            },
            {"agent_type": "x", "turns": [{"text": "done"}]},
        ]
    }
    owner, _ = await run_session(tmp_path, first)
    child_id = owner.agents[1].agent_id
    second = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("steal", resume_from=child_id)]},
                    {"text": "{{tool_results}}"},
                ],
            }
        ]
    }
    other, result = await run_session(tmp_path, second)
    assert other.session_id != owner.session_id
    assert "belongs to another session or project" in result.result
    assert len(other.agents) == 1
    # The owner's own session, resumed, may resume it.
    third = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("mine again", resume_from=child_id)]},
                    {"text": "{{tool_results}}"},
                ],
            },
            {"agent_type": "x", "match": "mine again", "turns": [{"text": "back"}]},
        ]
    }
    _, again = await run_session(tmp_path, third, resume=owner.session_id)
    assert "back" in again.result


async def test_a_user_stopped_child_is_resumable_after_a_restart(tmp_path: Path) -> None:
    first = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("long job", subagent_type="x", run_in_background=True)
                        ]
                    },
                    {
                        "capture": {"id": AGENT_ID},
                        "delay_ms": 200,
                        "tool_calls": [tool_call("TaskStop", task_id="{{capture.id}}")],
                    },
                    {"text": "stopped"},
                    {"text": "{{last_user}}"},
                ],
            },
            {
                "agent_type": "x",
                "match": "long job",
                "turns": [
                    {"tool_calls": [tool_call("Glob", pattern="*")]},
                    {"text": "never", "delay_ms": 10_000},
                ],
            },
        ]
    }
    owner, _ = await run_session(tmp_path, first)
    stopped = owner.agents[1].agent_id
    assert sidecar(tmp_path, stopped).status == "killed"
    second = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("pick it up", resume_from=stopped)]},
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "x",
                "match": "pick it up",
                "turns": [{"text": "resumed after restart"}],
            },
        ]
    }
    later, result = await run_session(tmp_path, second, resume=owner.session_id)
    assert "resumed after restart" in result.result
    resumed = later.agents[1]
    assert sidecar(tmp_path, resumed.agent_id).lineage == Lineage(
        root_agent_id=stopped, resumed_from=stopped, resume_depth=1
    )
