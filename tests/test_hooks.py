"""HookEngine with real hook scripts: event inputs, exit codes, JSON output, scoping, pairing."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.hooks import MAX_CONSECUTIVE_STOP_BLOCKS, HookConfigError, HookEngine, parse_hooks
from subagents.loop.query import LoopSpec, run_loop
from subagents.loop.scheduling import execute_call, prepare_calls
from subagents.messages import Message, Usage, user_message
from subagents.models.base import MessageDone, ModelRequest, StreamEvent
from subagents.models.retry import ModelCaller, RetryPolicy
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolInput, ToolOutput

# -- fixtures ----------------------------------------------------------------------------------


class Setup:
    """A project dir, hook scripts that log their stdin, and an engine over them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = root / "proj"
        self.project.mkdir()
        self.logs = root / "logs"
        self.logs.mkdir()
        self.warnings: list[str] = []
        self.transcript = root / "main.jsonl"

    def script(self, name: str, body: str) -> str:
        path = self.root / f"{name}.sh"
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return str(path)

    def recorder(self, name: str, then: str = "exit 0") -> str:
        """A hook that appends its stdin JSON as one line to ``logs/<name>.jsonl``, then ``then``."""
        log = self.logs / f"{name}.jsonl"
        return self.script(name, f'cat >> "{log}"; echo >> "{log}"\n{then}')

    def calls(self, name: str) -> list[dict[str, Any]]:
        log = self.logs / f"{name}.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]

    def engine(self, hooks: dict[str, Any]) -> HookEngine:
        return HookEngine(
            parse_hooks(hooks, "settings.json"),
            session_id="sess-1",
            transcript_path=self.transcript,
            project_dir=self.project,
            on_warning=self.warnings.append,
        )

    def ctx(
        self,
        agent_id: str = "main",
        agent_type: str = "main",
        parent: str | None = None,
        hooks: HookEngine | None = None,
    ) -> ToolContext:
        return ToolContext(
            cwd=self.project,
            roots=(self.project,),
            abort=AbortSignal(),
            agent=AgentRef(agent_id=agent_id, agent_type=agent_type, parent_agent_id=parent),
            hooks=hooks,
        )


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def group(command: str, matcher: str | None = None, timeout: float | None = None) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        hook["timeout"] = timeout
    out: dict[str, Any] = {"hooks": [hook]}
    if matcher is not None:
        out["matcher"] = matcher
    return out


def prints(payload: dict[str, Any]) -> str:
    """Shell that prints ``payload`` as JSON on stdout."""
    return f"printf '%s' '{json.dumps(payload)}'"


class EchoInput(ToolInput):
    text: str


class EchoTool(Tool[EchoInput]):
    name = "Echo"
    description = "echo"
    input_model = EchoInput

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def call(self, args: EchoInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        self.seen.append(args.text)
        return ToolOutput(content=f"echo {args.text}")


async def run_echo(ctx: ToolContext, tool: EchoTool, text: str) -> tuple[str, bool]:
    """One Echo call through the loop's scheduler, hooks included: (content, is_error)."""
    block: Any = {"type": "tool_use", "id": "tu1", "name": "Echo", "input": {"text": text}}
    [prepared] = prepare_calls([block], {"Echo": tool})
    result = await execute_call(prepared, ctx)
    content = result.block["content"]
    assert isinstance(content, str)
    return content, bool(result.block.get("is_error"))


async def gone(pid: int, limit_s: float = 3.0) -> bool:
    """Whether ``pid`` is dead (or a zombie awaiting its new parent) within ``limit_s``."""
    for _ in range(int(limit_s / 0.02)):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):  # ESRCH: it exited mid-read
            return True
        if state == "Z":
            return True
        await asyncio.sleep(0.02)
    return False


# -- tool events -------------------------------------------------------------------------------


async def test_pre_tool_use_input_for_main_and_child(setup: Setup) -> None:
    engine = setup.engine({"PreToolUse": [group(setup.recorder("pre"))]})
    verdict = await engine.pre_tool_use("Echo", {"text": "hi"}, "tu1", setup.ctx())
    assert verdict.decision is None
    await engine.pre_tool_use("Echo", {"text": "yo"}, "tu2", setup.ctx("c1", "Explore", "main"))
    main_call, child_call = setup.calls("pre")
    assert main_call == {
        "session_id": "sess-1",
        "transcript_path": str(setup.transcript),
        "cwd": str(setup.project),
        "hook_event_name": "PreToolUse",
        "tool_name": "Echo",
        "tool_input": {"text": "hi"},
        "tool_use_id": "tu1",
    }
    assert child_call["agent_id"] == "c1"
    assert child_call["agent_type"] == "Explore"
    assert child_call["tool_use_id"] == "tu2"


async def test_exit_2_denies_the_call_with_stderr_fed_back(setup: Setup) -> None:
    deny = setup.script("deny", 'cat >/dev/null; echo "no echo today" >&2; exit 2')
    engine = setup.engine({"PreToolUse": [group(deny)]})
    tool = EchoTool()
    content, is_error = await run_echo(setup.ctx(hooks=engine), tool, "hi")
    assert is_error
    assert content == "Blocked by PreToolUse hook: no echo today"
    assert tool.seen == []


@pytest.mark.parametrize("decision", ["deny", "allow", "ask"])
async def test_json_permission_decision_is_honoured(setup: Setup, decision: str) -> None:
    output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": f"because {decision}",
        }
    }
    engine = setup.engine({"PreToolUse": [group(setup.recorder("p", prints(output)))]})
    verdict = await engine.pre_tool_use("Echo", {"text": "x"}, "tu1", setup.ctx())
    assert verdict.decision == decision
    assert verdict.reason == f"because {decision}"


async def test_updated_input_and_additional_context_reach_tool_and_model(setup: Setup) -> None:
    output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"text": "rewritten"},
            "additionalContext": "note from the hook",
        }
    }
    engine = setup.engine({"PreToolUse": [group(setup.recorder("p", prints(output)))]})
    tool = EchoTool()
    content, is_error = await run_echo(setup.ctx(hooks=engine), tool, "original")
    assert not is_error
    assert tool.seen == ["rewritten"]
    assert content == "echo rewritten\n\nnote from the hook"


async def test_deny_wins_over_allow_among_concurrent_hooks(setup: Setup) -> None:
    allow = {"hookSpecificOutput": {"permissionDecision": "allow", "additionalContext": "A"}}
    deny = {"decision": "block", "reason": "policy says no"}
    engine = setup.engine(
        {
            "PreToolUse": [
                group(setup.recorder("allow", prints(allow))),
                group(setup.recorder("deny", prints(deny))),
            ]
        }
    )
    verdict = await engine.pre_tool_use("Echo", {"text": "x"}, "tu1", setup.ctx())
    assert verdict.decision == "deny"
    assert verdict.reason == "policy says no"
    assert verdict.additional_context == "A"


async def test_other_exit_codes_are_warnings_not_decisions(setup: Setup) -> None:
    failing = setup.script("fail", 'cat >/dev/null; echo "linter crashed" >&2; exit 1')
    engine = setup.engine({"PreToolUse": [group(failing)]})
    verdict = await engine.pre_tool_use("Echo", {"text": "x"}, "tu1", setup.ctx())
    assert verdict.decision is None
    assert verdict.reason == ""
    [warning] = setup.warnings
    assert "exit code 1" in warning
    assert "linter crashed" in warning
    assert failing in warning


async def test_continue_false_stops_the_agent(setup: Setup) -> None:
    output = {"continue": False, "stopReason": "budget exhausted"}
    engine = setup.engine({"PreToolUse": [group(setup.recorder("p", prints(output)))]})
    ctx = setup.ctx()
    verdict = await engine.pre_tool_use("Echo", {"text": "x"}, "tu1", ctx)
    assert verdict.decision == "deny"
    assert verdict.reason == "budget exhausted"
    assert ctx.abort.aborted
    assert "budget exhausted" in (ctx.abort.reason or "")


async def test_post_tool_use_gets_the_response_and_returns_context(setup: Setup) -> None:
    context = {
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "lint ok"}
    }
    engine = setup.engine(
        {
            "PostToolUse": [group(setup.recorder("post", prints(context)))],
            "PostToolUseFailure": [
                group(setup.recorder("fail", 'echo "retry with --force" >&2; exit 2'))
            ],
        }
    )
    ctx = setup.ctx("c1", "worker", "main")
    ok = ToolOutput(content="done", metadata={"exit_code": 0})
    added = await engine.post_tool_use("Echo", {"text": "x"}, "tu1", ok, ctx)
    assert added == "lint ok"
    [post] = setup.calls("post")
    assert post["hook_event_name"] == "PostToolUse"
    assert post["tool_response"] == {"content": "done", "metadata": {"exit_code": 0}}
    assert post["agent_id"] == "c1"
    assert setup.calls("fail") == []

    bad = ToolOutput(content="file not found", is_error=True)
    added = await engine.post_tool_use("Echo", {"text": "y"}, "tu2", bad, ctx)
    assert "retry with --force" in added
    [fail] = setup.calls("fail")
    assert fail["hook_event_name"] == "PostToolUseFailure"
    assert fail["error"] == "file not found"
    assert fail["tool_input"] == {"text": "y"}
    assert len(setup.calls("post")) == 1  # PostToolUse did not fire for the failure


# -- matchers ----------------------------------------------------------------------------------


async def test_matchers_select_hooks_by_tool_name(setup: Setup) -> None:
    engine = setup.engine(
        {
            "PreToolUse": [
                group(setup.recorder("edits"), "Write|Edit"),
                group(setup.recorder("reads"), "Read, Grep"),
                group(setup.recorder("mcp"), "mcp__.*"),
                group(setup.recorder("star"), "*"),
                group(setup.recorder("empty"), ""),
                group(setup.recorder("absent")),
            ]
        }
    )
    names = ["Edit", "Grep", "mcp__gh__list", "NotebookEdit"]
    for name in names:
        await engine.pre_tool_use(name, {}, "tu", setup.ctx())

    def seen(log: str) -> list[str]:
        return [c["tool_name"] for c in setup.calls(log)]

    assert seen("edits") == ["Edit"]
    assert seen("reads") == ["Grep"]
    assert seen("mcp") == ["mcp__gh__list"]
    assert seen("star") == names
    assert seen("empty") == names
    assert seen("absent") == names


async def test_subagent_events_match_on_agent_type(setup: Setup) -> None:
    engine = setup.engine(
        {
            "SubagentStart": [group(setup.recorder("start"), "Explore|Plan")],
            "SubagentStop": [group(setup.recorder("stop"), "^gen")],
        }
    )
    await engine.subagent_start("a1", "Explore")
    await engine.subagent_start("a2", "general-purpose")
    await engine.ensure_stopped("a1", "Explore", "t1")
    await engine.ensure_stopped("a2", "general-purpose", "t2")
    assert [c["agent_id"] for c in setup.calls("start")] == ["a1"]
    assert [c["agent_id"] for c in setup.calls("stop")] == ["a2"]


# -- timeouts and environment ------------------------------------------------------------------


async def test_hanging_hook_is_killed_at_its_timeout(setup: Setup) -> None:
    hang = setup.script("hang", f'cat >/dev/null; echo $$ > "{setup.root}/pid"; exec sleep 60')
    engine = setup.engine({"PreToolUse": [group(hang, timeout=0.5)]})
    verdict = await engine.pre_tool_use("Echo", {}, "tu", setup.ctx())
    assert verdict.decision is None  # a timeout is a non-blocking error
    pid = int((setup.root / "pid").read_text())
    assert await gone(pid)
    [warning] = setup.warnings
    assert "timed out after 0.5s" in warning


async def test_engine_gives_hooks_a_clean_environment(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    dump = setup.script("dump", f'cat >/dev/null; env > "{setup.root}/env.txt"')
    engine = setup.engine({"SessionStart": [group(dump)]})
    await engine.session_start("startup")
    env = (setup.root / "env.txt").read_text()
    assert "SECRET_TOKEN" not in env
    assert f"CLAUDE_PROJECT_DIR={setup.project}\n" in env
    assert f"SUBAGENTS_PROJECT_DIR={setup.project}\n" in env


# -- Stop / SubagentStop -----------------------------------------------------------------------


async def test_main_agent_stop_fires_stop_and_can_block(setup: Setup) -> None:
    engine = setup.engine(
        {
            "Stop": [group(setup.recorder("stop", 'echo "tests still fail" >&2; exit 2'))],
            "SubagentStop": [group(setup.recorder("substop"))],
        }
    )
    verdict = await engine.stop("all done", setup.ctx())
    assert verdict.block
    assert verdict.reason == "tests still fail"
    [call] = setup.calls("stop")
    assert call["hook_event_name"] == "Stop"
    assert call["stop_hook_active"] is False
    assert call["last_assistant_message"] == "all done"
    assert "agent_id" not in call
    assert setup.calls("substop") == []


async def test_subagent_stop_blocks_at_most_eight_times_in_a_row(setup: Setup) -> None:
    keep_going = setup.recorder("substop", 'echo "keep going" >&2; exit 2')
    engine = setup.engine({"SubagentStop": [group(keep_going)]})
    ctx = setup.ctx("c1", "worker", "main")
    await engine.subagent_start("c1", "worker", transcript_path=setup.root / "c1.jsonl")
    verdicts = [await engine.stop("answer", ctx) for _ in range(MAX_CONSECUTIVE_STOP_BLOCKS + 1)]
    assert [v.block for v in verdicts] == [True] * 8 + [False]
    assert {v.reason for v in verdicts[:8]} == {"keep going"}
    calls = setup.calls("substop")
    assert len(calls) == 9
    assert [c["stop_hook_active"] for c in calls] == [False] + [True] * 8
    assert calls[0]["agent_transcript_path"] == str(setup.root / "c1.jsonl")
    assert calls[0]["last_assistant_message"] == "answer"
    assert any("8 times in a row" in w for w in setup.warnings)
    # The ninth stop went through: the agent is stopped, nothing fires again.
    await engine.ensure_stopped("c1", "worker", setup.root / "c1.jsonl")
    assert len(setup.calls("substop")) == 9


async def test_a_stop_that_is_not_blocked_resets_the_count(setup: Setup) -> None:
    flag = setup.root / "allow"
    body = f'[ -e "{flag}" ] && exit 0; echo "again" >&2; exit 2'
    engine = setup.engine({"Stop": [group(setup.recorder("stop", body))]})
    ctx = setup.ctx()
    for _ in range(5):
        assert (await engine.stop("x", ctx)).block
    flag.touch()
    assert not (await engine.stop("x", ctx)).block
    flag.unlink()
    # A fresh run of eight blocks is allowed again.
    assert all([(await engine.stop("x", ctx)).block for _ in range(8)])


# -- pairing -----------------------------------------------------------------------------------


async def test_start_and_stop_are_paired_once_each(setup: Setup) -> None:
    start = setup.recorder("start", "echo 'Remember the style guide.'")
    engine = setup.engine(
        {"SubagentStart": [group(start)], "SubagentStop": [group(setup.recorder("stop"))]}
    )
    assert await engine.subagent_start("c1", "Explore") == "Remember the style guide."
    assert await engine.subagent_start("c1", "Explore") == ""
    assert setup.calls("start") == [
        {
            "session_id": "sess-1",
            "transcript_path": str(setup.transcript),
            "cwd": str(setup.project),
            "hook_event_name": "SubagentStart",
            "agent_id": "c1",
            "agent_type": "Explore",
        }
    ]
    verdict = await engine.subagent_stop("c1", "Explore", setup.root / "c1.jsonl")
    assert not verdict.block
    await engine.ensure_stopped("c1", "Explore", setup.root / "c1.jsonl")
    await engine.subagent_stop("c1", "Explore", setup.root / "c1.jsonl")
    [stop] = setup.calls("stop")
    assert stop["hook_event_name"] == "SubagentStop"
    assert stop["agent_transcript_path"] == str(setup.root / "c1.jsonl")
    assert stop["stop_hook_active"] is False

    # A resumed agent gets a new pair.
    await engine.subagent_start("c1", "Explore")
    await engine.ensure_stopped("c1", "Explore", setup.root / "c1.jsonl")
    assert len(setup.calls("start")) == 2
    assert len(setup.calls("stop")) == 2


async def test_ensure_stopped_covers_recovered_and_concurrent_callers(setup: Setup) -> None:
    engine = setup.engine({"SubagentStop": [group(setup.recorder("stop"))]})
    # Recovered after a crash: never started in this process, still gets its SubagentStop.
    await asyncio.gather(*(engine.ensure_stopped("r1", "Plan", "r1.jsonl") for _ in range(3)))
    await engine.ensure_stopped("r1", "Plan", "r1.jsonl")
    assert [c["agent_id"] for c in setup.calls("stop")] == ["r1"]


async def test_killed_child_after_a_blocked_stop_still_gets_its_stop(setup: Setup) -> None:
    flag = setup.root / "blocked-once"
    body = f'[ -e "{flag}" ] && exit 0; touch "{flag}"; echo "not yet" >&2; exit 2'
    engine = setup.engine({"SubagentStop": [group(setup.recorder("stop", body))]})
    ctx = setup.ctx("c1", "worker", "main")
    await engine.subagent_start("c1", "worker")
    assert (await engine.stop("first", ctx)).block  # keeps running ... and is then killed
    await engine.ensure_stopped("c1", "worker", "c1.jsonl")
    await engine.ensure_stopped("c1", "worker", "c1.jsonl")
    calls = setup.calls("stop")
    assert len(calls) == 2
    assert calls[1]["stop_hook_active"] is True
    assert "last_assistant_message" not in calls[1]


async def test_subagent_start_context_from_json_and_exit_2_only_warns(setup: Setup) -> None:
    output = {"hookSpecificOutput": {"hookEventName": "SubagentStart", "additionalContext": "C"}}
    engine = setup.engine(
        {
            "SubagentStart": [
                group(setup.recorder("json", prints(output))),
                group(setup.recorder("two", 'echo "cannot block" >&2; exit 2')),
            ]
        }
    )
    assert await engine.subagent_start("c1", "Explore") == "C"
    [warning] = setup.warnings
    assert "cannot block" in warning


# -- frontmatter hooks -------------------------------------------------------------------------


async def test_frontmatter_hooks_apply_only_to_their_agent_and_stop_becomes_subagent_stop(
    setup: Setup,
) -> None:
    engine = setup.engine({"PreToolUse": [group(setup.recorder("settings_pre"))]})
    child_engine = engine.for_agent(
        {
            "PreToolUse": [group(setup.recorder("fm_pre"), "Echo")],
            "Stop": [group(setup.recorder("fm_stop"))],
        },
        "c1",
        "worker",
        transcript_path=setup.root / "c1.jsonl",
    )
    child = setup.ctx("c1", "worker", "main", hooks=child_engine)
    await child_engine.subagent_start("c1", "worker")
    await child_engine.pre_tool_use("Echo", {}, "tu1", child)
    await engine.pre_tool_use("Echo", {}, "tu2", setup.ctx())
    await child_engine.pre_tool_use("Echo", {}, "tu3", setup.ctx("c2", "worker", "main"))
    assert [c["tool_use_id"] for c in setup.calls("settings_pre")] == ["tu1", "tu2", "tu3"]
    assert [c["tool_use_id"] for c in setup.calls("fm_pre")] == ["tu1"]
    assert engine.config.commands_for("SubagentStop", "worker") == []
    assert len(child_engine.config.commands_for("SubagentStop", "worker")) == 1

    assert not (await child_engine.stop("final words", child)).block
    [stop] = setup.calls("fm_stop")
    assert stop["hook_event_name"] == "SubagentStop"
    assert stop["agent_id"] == "c1"
    assert stop["agent_transcript_path"] == str(setup.root / "c1.jsonl")
    assert stop["last_assistant_message"] == "final words"
    # The agent has ended: its frontmatter hooks are gone.
    await child_engine.pre_tool_use("Echo", {}, "tu4", child)
    assert len(setup.calls("fm_pre")) == 1
    assert len(setup.calls("settings_pre")) == 4


def test_malformed_frontmatter_hooks_name_the_definition(setup: Setup) -> None:
    engine = setup.engine({})
    with pytest.raises(HookConfigError, match=r"^/a/worker\.md: hooks\.Stop\[0\]\.hooks\[0\]"):
        engine.for_agent(
            {"Stop": [{"hooks": [{"type": "command"}]}]}, "c1", "w", source="/a/worker.md"
        )


# -- team and session events -------------------------------------------------------------------


async def test_task_created_block_returns_the_reason(setup: Setup) -> None:
    log = setup.logs / "task.jsonl"
    body = f'tail -n 1 "{log}" | grep -q forbidden && {{ echo "no forbidden tasks" >&2; exit 2; }}'
    engine = setup.engine({"TaskCreated": [group(setup.recorder("task", body))]})
    assert await engine.task_created("7", "ship it", "do it well", "alice", "core") is None
    reason = await engine.task_created("8", "forbidden", "x", None, None)
    assert reason == "no forbidden tasks"
    first = setup.calls("task")[0]
    assert {k: first[k] for k in first if k.startswith(("task", "team"))} == {
        "task_id": "7",
        "task_subject": "ship it",
        "task_description": "do it well",
        "teammate_name": "alice",
        "team_name": "core",
    }
    assert first["hook_event_name"] == "TaskCreated"


async def test_teammate_idle_feedback_keeps_it_working(setup: Setup) -> None:
    body = 'echo "pick up task 3" >&2; exit 2'
    engine = setup.engine({"TeammateIdle": [group(setup.recorder("idle", body))]})
    assert await engine.teammate_idle("bob", "core") == "pick up task 3"
    [call] = setup.calls("idle")
    assert (call["teammate_name"], call["team_name"]) == ("bob", "core")


async def test_session_start_matches_source_and_returns_context(setup: Setup) -> None:
    engine = setup.engine(
        {
            "SessionStart": [group(setup.recorder("start", "echo 'branch: main'"), "startup")],
            "SessionEnd": [group(setup.recorder("end"))],
        }
    )
    assert await engine.session_start("startup") == "branch: main"
    assert await engine.session_start("resume") == ""
    await engine.session_end("prompt_input_exit")
    assert [c["source"] for c in setup.calls("start")] == ["startup"]
    [end] = setup.calls("end")
    assert (end["hook_event_name"], end["reason"]) == ("SessionEnd", "prompt_input_exit")


async def test_user_prompt_submit_adds_context_or_refuses_the_prompt(setup: Setup) -> None:
    log = setup.logs / "prompt.jsonl"
    refuse = setup.script(
        "prompt",
        f'input=$(cat); echo "$input" >> "{log}"\n'
        'case "$input" in *secret*) echo "no secrets" >&2; exit 2;; esac\necho "cwd is clean"',
    )
    engine = setup.engine({"UserPromptSubmit": [group(refuse)]})
    fine = await engine.user_prompt_submit("fix the bug")
    assert (fine.refusal, fine.context) == (None, "cwd is clean")
    assert (await engine.user_prompt_submit("the secret is 42")).refusal == "no secrets"
    stop = setup.engine(
        {"UserPromptSubmit": [group(prints({"continue": False, "stopReason": "closed"}))]}
    )
    assert (await stop.user_prompt_submit("hi")).refusal == "closed"
    first = setup.calls("prompt")[0]
    assert (first["hook_event_name"], first["prompt"]) == ("UserPromptSubmit", "fix the bug")


async def test_bad_json_and_system_message_are_shown_to_the_user(setup: Setup) -> None:
    engine = setup.engine(
        {
            "SubagentStart": [group(setup.recorder("bad", "echo '{not json'"))],
            "SessionStart": [group(setup.recorder("msg", prints({"systemMessage": "heads up"})))],
        }
    )
    assert await engine.subagent_start("c1", "x") == "{not json"
    await engine.session_start("startup")
    assert len(setup.warnings) == 2
    assert "invalid JSON" in setup.warnings[0]
    assert setup.warnings[1] == "heads up"


# -- through the real loop ---------------------------------------------------------------------


class TwoAnswers:
    """A model that answers twice; records the history it was shown each time."""

    name = "two-answers"

    def __init__(self) -> None:
        self.seen: list[list[Message]] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.seen.append(list(request.messages))
        text = f"answer {len(self.seen)}"
        message: Message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
        yield MessageDone(message=message, usage=Usage(input_tokens=1, output_tokens=1))


async def test_subagent_stop_block_keeps_the_child_loop_running(setup: Setup) -> None:
    flag = setup.root / "blocked-once"
    body = f'[ -e "{flag}" ] && exit 0; touch "{flag}"; echo "run the tests first" >&2; exit 2'
    engine = setup.engine({"SubagentStop": [group(setup.recorder("stop", body))]})
    model = TwoAnswers()
    ctx = setup.ctx("c1", "worker", "main", hooks=engine)
    outcome = await run_loop(
        LoopSpec(
            caller=ModelCaller(model=model, policy=RetryPolicy(base_delay_s=0.001)),
            system="sys",
            tools=[],
            ctx=ctx,
            messages=[user_message("go")],
            prompt="go",
        )
    )
    assert outcome.reason == "completed"
    assert outcome.final_text == "answer 2"
    assert "run the tests first" in json.dumps(model.seen[1][-1])
    assert [c["last_assistant_message"] for c in setup.calls("stop")] == ["answer 1", "answer 2"]
