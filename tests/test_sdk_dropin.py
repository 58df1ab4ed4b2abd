"""The official ``claude-agent-sdk`` (pinned in the dev extra) drives ``subagents`` unchanged.

Every test runs the SDK's own ``query()`` or ``ClaudeSDKClient`` with ``cli_path`` pointed at our
``subagents`` command and the scripted model chosen through the environment, so the whole
protocol is exercised: flags, the ``initialize`` handshake, stream-json in and out, control
requests both ways, and the SDK's message parser (which raises on any message it cannot parse).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AgentDefinition,
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    PermissionUpdate,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TaskNotificationMessage,
    TaskStartedMessage,
    TextBlock,
    ToolPermissionContext,
    ToolUseBlock,
    UserMessage,
    query,
)
from claude_agent_sdk._errors import ResultError

from cli_helpers import agent_call, tool_call, write_script

CLI = Path(sys.executable).with_name("subagents")


def options(script: Path, cwd: Path, **extra: Any) -> ClaudeAgentOptions:
    env = {
        "SUBAGENTS_MODEL": f"scripted:{script}",
        "PYTHONDONTWRITEBYTECODE": "",  # short-lived processes: reuse compiled bytecode
        **extra.pop("env", {}),
    }
    return ClaudeAgentOptions(cli_path=CLI, cwd=cwd, env=env, **extra)


async def collect(prompt: str, opts: ClaudeAgentOptions) -> list[Any]:
    return [message async for message in query(prompt=prompt, options=opts)]


def result_of(messages: list[Any]) -> ResultMessage:
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert results, messages
    return results[-1]


def texts(messages: list[Any]) -> list[str]:
    return [
        block.text
        for m in messages
        if isinstance(m, AssistantMessage)
        for block in m.content
        if isinstance(block, TextBlock)
    ]


def recorded(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "requests.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# -- query() ----------------------------------------------------------------------------------


async def test_one_shot_query_parses_every_message(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("Answer in haiku.\n")
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [tool_call("Glob", pattern="*.json")]},
                    {"text": "found: {{tool_results}}"},
                ],
            }
        ],
    )
    messages = await collect("list files", options(script, tmp_path))
    init = messages[0]
    assert isinstance(init, SystemMessage) and init.subtype == "init"
    assert init.data["claude_code_version"] and init.data["permissionMode"] == "default"
    assert "Agent" in init.data["tools"] and init.data["uuid"]
    assistant = [m for m in messages if isinstance(m, AssistantMessage)]
    assert assistant[0].model == f"scripted:{script}"
    assert assistant[0].usage and assistant[0].stop_reason == "tool_use"
    assert assistant[0].session_id == init.data["session_id"]
    [tool_result] = [m for m in messages if isinstance(m, UserMessage)]
    assert tool_result.tool_use_result == {"num_files": 1}
    result = result_of(messages)
    assert result.subtype == "success" and result.result == "found: script.json"
    assert result.num_turns == 2 and result.duration_api_ms >= 0
    assert result.session_id == init.data["session_id"]
    assert result.model_usage and result.total_cost_usd == 0.0
    # No system_prompt: the SDK sends --system-prompt "", an empty prompt as with Claude Code;
    # the project's instructions still reach the model, in the first user message.
    first = recorded(tmp_path)[0]
    assert first["system"] == ""
    opening = first["messages"][0]["content"]
    assert "<system-reminder>" in opening[1]["text"] and "Answer in haiku." in opening[1]["text"]
    assert opening[2]["text"] == "list files"


async def test_system_prompt_tools_and_claude_model_name_reach_the_model(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "ok"}]}])
    opts = options(
        script,
        tmp_path,
        system_prompt={"type": "preset", "preset": "claude_code", "append": "ALWAYS SAY MOO"},
        tools=["Read", "Glob"],
        disallowed_tools=["Glob"],
        model="claude-sonnet-4-5",
    )
    messages = await collect("hi", opts)
    init = messages[0]
    assert init.data["tools"] == ["Read"]
    assert init.data["requested_model"] == "claude-sonnet-4-5"
    assert "runs as" in init.data["model_note"]
    [request] = recorded(tmp_path)
    assert request["system"].rstrip().endswith("ALWAYS SAY MOO")
    assert [t["name"] for t in request["tools"]] == ["Read"]
    assert result_of(messages).result == "ok"


async def test_agents_option_defines_a_child_whose_messages_name_the_call(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("review the code", "reviewer")]},
                    {"text": "child said: {{tool_results}}"},
                ],
            },
            {"agent_type": "reviewer", "turns": [{"text": "LGTM from reviewer"}]},
        ],
    )
    opts = options(
        script,
        tmp_path,
        agents={
            "reviewer": AgentDefinition(
                description="Reviews code", prompt="Review.", tools=["Read"], model="sonnet"
            )
        },
    )
    messages = await collect("go", opts)
    assert "reviewer" in messages[0].data["agents"]
    call = next(
        b
        for m in messages
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, ToolUseBlock)
    )
    child = [m for m in messages if isinstance(m, AssistantMessage) and m.parent_tool_use_id]
    assert child and child[0].parent_tool_use_id == call.id
    assert "LGTM from reviewer" in result_of(messages).result
    reviewer = next(r for r in recorded(tmp_path) if r["agent_type"] == "reviewer")
    assert reviewer["system"].startswith("Review.")
    assert [t["name"] for t in reviewer["tools"]] == ["Read"]


async def test_background_child_is_a_task_with_structured_launch_result(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("token Q7", "Explore", run_in_background=True)]},
                    {"text": "launched"},
                    {"text": "notified: {{last_user}}"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "report Q7", "delay_ms": 300}]},
        ],
    )
    messages = await collect("go", options(script, tmp_path))
    launched = next(m for m in messages if isinstance(m, UserMessage) and m.tool_use_result)
    assert launched.tool_use_result["status"] == "async_launched"
    agent_id = launched.tool_use_result["agentId"]
    assert Path(launched.tool_use_result["outputFile"]).name.startswith(agent_id)
    started = [m for m in messages if isinstance(m, TaskStartedMessage)]
    assert [m.task_id for m in started] == [agent_id] and started[0].task_type == "local_agent"
    [note] = [m for m in messages if isinstance(m, TaskNotificationMessage)]
    assert note.task_id == agent_id and note.status == "completed"
    assert note.output_file == launched.tool_use_result["outputFile"]
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert "report Q7" in results[-1].result


async def test_resume_continues_the_session(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {"agent_type": "main", "match": "^first", "turns": [{"text": "one"}]},
            {"agent_type": "main", "match": "^follow", "turns": [{"text": "two: {{last_user}}"}]},
        ],
    )
    first = result_of(await collect("first question", options(script, tmp_path)))
    second = result_of(
        await collect("follow up", options(script, tmp_path, resume=first.session_id))
    )
    assert second.session_id == first.session_id
    # The resumed message carries the agent catalog (a system-reminder) before the prompt.
    assert second.result.startswith("two: ") and second.result.endswith("follow up")
    last = recorded(tmp_path)[-1]
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "user"]


async def test_max_budget_usd_stops_the_run(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [tool_call("Glob", pattern="*")],
                        "usage": {"input_tokens": 1000, "output_tokens": 10},
                    },
                    {"text": "never reached"},
                ],
            }
        ],
    )
    prices = json.dumps({"scripted": {"input": 100, "output": 100}})  # $0.101 per call here
    opts = options(script, tmp_path, max_budget_usd=0.05, env={"SUBAGENTS_PRICES": prices})
    messages: list[Any] = []
    with pytest.raises(ResultError):
        async for message in query(prompt="go", options=opts):
            messages.append(message)
    result = result_of(messages)
    assert result.subtype == "error_max_budget_usd" and result.is_error
    assert result.total_cost_usd == pytest.approx(0.101)
    assert "never reached" not in texts(messages)


async def test_structured_output(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [tool_call("StructuredOutput", answer="four")]},
                    {"tool_calls": [tool_call("StructuredOutput", answer=4)]},
                    {"text": "done"},
                ],
            }
        ],
    )
    opts = options(script, tmp_path, output_format={"type": "json_schema", "schema": schema})
    messages = await collect("2+2?", opts)
    result = result_of(messages)
    assert result.subtype == "success" and result.structured_output == {"answer": 4}
    [first_try, _] = [m for m in messages if isinstance(m, UserMessage)]
    assert "does not match the schema" in str(first_try.content[0].content)
    request = recorded(tmp_path)[0]
    tool = next(t for t in request["tools"] if t["name"] == "StructuredOutput")
    assert tool["input_schema"] == schema


async def test_partial_messages_stream_before_each_message(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "hello world"}]}])
    messages = await collect("hi", options(script, tmp_path, include_partial_messages=True))
    events = [m.event for m in messages if isinstance(m, StreamEvent)]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert "".join(deltas) == "hello world"
    last_stream = max(i for i, m in enumerate(messages) if isinstance(m, StreamEvent))
    assistant = next(i for i, m in enumerate(messages) if isinstance(m, AssistantMessage))
    assert last_stream < assistant


# -- control protocol ------------------------------------------------------------------------


async def test_can_use_tool_allow_with_updated_input_and_deny(tmp_path: Path) -> None:
    extra = tmp_path.with_name(f"{tmp_path.name}-extra")  # outside the working directory
    extra.mkdir()
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            tool_call("Write", file_path=str(tmp_path / "a.txt"), content="x")
                        ]
                    },
                    {
                        "tool_calls": [
                            tool_call("Write", file_path=str(tmp_path / "b.txt"), content="y")
                        ]
                    },
                    {
                        "tool_calls": [
                            tool_call("Write", file_path=str(extra / "c.txt"), content="z")
                        ]
                    },
                    {"text": "results: {{tool_results}}"},
                ],
            }
        ],
    )
    asked: list[tuple[str, dict[str, Any], ToolPermissionContext]] = []

    async def can_use_tool(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        asked.append((name, tool_input, context))
        if tool_input["file_path"].endswith("a.txt"):
            # An added directory is a root of the file tools from now on.
            more = PermissionUpdate(type="addDirectories", directories=[str(extra)])
            changed = {**tool_input, "content": "changed"}
            return PermissionResultAllow(updated_input=changed, updated_permissions=[more])
        if tool_input["file_path"].endswith("c.txt"):
            return PermissionResultAllow()
        return PermissionResultDeny(message="b is off limits")

    messages = await collect("write", options(script, tmp_path, can_use_tool=can_use_tool))
    assert (tmp_path / "a.txt").read_text() == "changed"
    assert not (tmp_path / "b.txt").exists()
    assert (extra / "c.txt").read_text() == "z"
    assert [a[0] for a in asked] == ["Write", "Write", "Write"]
    assert asked[0][2].tool_use_id and asked[0][2].agent_id is None
    assert asked[0][2].suggestions[0].type == "addRules"
    result = result_of(messages)
    assert "c.txt" in result.result  # the last Write's result
    assert "b is off limits" in json.dumps(recorded(tmp_path)[2]["messages"][-1])
    assert [d["tool_name"] for d in result.permission_denials or []] == ["Write"]


async def test_background_child_asks_reach_the_sdk_user(tmp_path: Path) -> None:
    target = tmp_path / "child.txt"
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("write it", "general-purpose", run_in_background=True)
                        ]
                    },
                    {"text": "launched"},
                    {"text": "done: {{last_user}}"},
                ],
            },
            {
                "agent_type": "general-purpose",
                "turns": [
                    {"tool_calls": [tool_call("Write", file_path=str(target), content="hi")]},
                    {"text": "wrote: {{tool_results}}"},
                ],
            },
        ],
    )
    asked: list[ToolPermissionContext] = []

    async def can_use_tool(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow:
        asked.append(context)
        return PermissionResultAllow()

    messages = await collect("go", options(script, tmp_path, can_use_tool=can_use_tool))
    assert target.read_text() == "hi"
    launched = next(m for m in messages if isinstance(m, UserMessage) and m.tool_use_result)
    assert [c.agent_id for c in asked] == [launched.tool_use_result["agentId"]]
    assert "wrote:" in result_of(messages).result


async def test_a_process_teammates_asks_reach_the_sdk_user(tmp_path: Path) -> None:
    """A teammate in its own process asks through its lead (docs/teams.md, "Permission
    asks"): the SDK's ``can_use_tool`` answers, and the teammate acts on the answer."""
    from test_teams_e2e import TEAMS_ENV
    from test_teams_permission_relay import teammate_asking_script

    asked: list[str] = []

    async def can_use_tool(
        name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        asked.append(f"{name}: {tool_input.get('command')}")
        if "allowed.txt" in str(tool_input.get("command")):
            return PermissionResultAllow()
        return PermissionResultDeny(message="not that one")

    env = {**TEAMS_ENV, "SUBAGENTS_TEAMMATE_MODE": "process"}
    script = teammate_asking_script(tmp_path)
    messages = await collect("go", options(script, tmp_path, can_use_tool=can_use_tool, env=env))
    assert result_of(messages).subtype == "success"
    assert asked == ["Bash: touch allowed.txt", "Bash: touch denied.txt"]
    assert (tmp_path / "allowed.txt").exists() and not (tmp_path / "denied.txt").exists()
    w1_reads = [json.dumps(r["messages"][-1]) for r in recorded(tmp_path) if r.get("name") == "w1"]
    assert "not that one" in w1_reads[2]


async def test_sdk_pre_tool_use_hook_denies(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [tool_call("Bash", command="echo ./foo.sh")]},
                    {"text": "{{tool_results}}"},
                ],
            }
        ],
    )
    seen: list[dict[str, Any]] = []

    async def guard(data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        seen.append({**data, "_tool_use_id": tool_use_id})
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "no foo.sh here",
            }
        }

    hooks: Any = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[guard])]}
    opts = options(script, tmp_path, hooks=hooks, permission_mode="bypassPermissions")
    result = result_of(await collect("run it", opts))
    assert "no foo.sh here" in result.result
    [event] = seen
    assert event["hook_event_name"] == "PreToolUse" and event["tool_name"] == "Bash"
    assert event["tool_input"] == {"command": "echo ./foo.sh"}
    assert event["_tool_use_id"] == event["tool_use_id"] and event["session_id"]


# -- ClaudeSDKClient -------------------------------------------------------------------------


async def test_client_multi_turn_conversation(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"text": "Paris"},
                    {"text": "you asked: {{last_user}}"},
                ],
            }
        ],
    )
    prompts: list[str] = []

    async def screen(data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        """UserPromptSubmit: refuse a prompt holding a password, else add context."""
        prompts.append(data["prompt"])
        if "password" in data["prompt"]:
            return {"decision": "block", "reason": "no secrets in prompts"}
        return {"hookSpecificOutput": {"additionalContext": "The user is in Lyon."}}

    hooks: Any = {"UserPromptSubmit": [HookMatcher(hooks=[screen])]}
    async with ClaudeSDKClient(options(script, tmp_path, hooks=hooks)) as client:
        info = await client.get_server_info()
        assert info is not None and info["output_style"] == "default"
        await client.query("capital of France?")
        first = [m async for m in client.receive_response()]
        await client.query("my password is hunter2")
        refused = [m async for m in client.receive_response()]
        await client.query("population?")
        second = [m async for m in client.receive_response()]
    assert prompts == ["capital of France?", "my password is hunter2", "population?"]
    assert result_of(first).result == "Paris"
    assert result_of(refused).is_error and "no secrets in prompts" in str(result_of(refused).result)
    assert result_of(second).result == "you asked: population?\n\nThe user is in Lyon."
    assert result_of(second).session_id == result_of(first).session_id
    requests = recorded(tmp_path)
    assert len(requests) == 2 and "hunter2" not in json.dumps(requests)
    assert [m["role"] for m in requests[-1]["messages"]] == ["user", "assistant", "user"]


async def test_client_interrupt_keeps_session_and_background_children(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("token K", "Explore", run_in_background=True)]},
                    {"tool_calls": [tool_call("Bash", command="sleep 30")]},
                    {"text": "after interrupt"},
                    {"text": "notified: {{last_user}}"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "child K done", "delay_ms": 1500}]},
        ],
    )
    opts = options(script, tmp_path, permission_mode="bypassPermissions")
    async with ClaudeSDKClient(opts) as client:
        await client.query("start")
        turn: list[Any] = []
        async for message in client.receive_messages():
            turn.append(message)
            blocks = message.content if isinstance(message, AssistantMessage) else []
            if any(isinstance(b, ToolUseBlock) and b.name == "Bash" for b in blocks):
                await asyncio.sleep(0.3)
                await client.interrupt()
            if isinstance(message, ResultMessage):
                break
        interrupted = result_of(turn)
        await client.query("go on")
        later: list[Any] = []
        async for message in client.receive_messages():
            later.append(message)
            if isinstance(message, TaskNotificationMessage):
                note = message
            if isinstance(message, ResultMessage) and "notified" in (message.result or ""):
                break
    assert interrupted.is_error and interrupted.subtype == "error_during_execution"
    assert "after interrupt" in texts(later)
    assert note.status == "completed"
    assert "child K done" in result_of(later).result


async def test_client_set_permission_mode_and_model(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            tool_call("Write", file_path=str(tmp_path / "w.txt"), content="1")
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            }
        ],
    )
    async with ClaudeSDKClient(options(script, tmp_path)) as client:
        await client.set_permission_mode("acceptEdits")
        await client.set_model("claude-opus-4-5")
        await client.query("write")
        messages = [m async for m in client.receive_response()]
    assert messages[0].data["permissionMode"] == "acceptEdits"
    assert (tmp_path / "w.txt").read_text() == "1"
    assert result_of(messages).subtype == "success"
