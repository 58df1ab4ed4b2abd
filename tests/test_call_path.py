"""The per-model-call path through the public Session API (docs/performance.md, issue 20 item 5).

What the lean per-call path must keep: a tool's progress reaches whoever listens; each denied
call of a turn is recorded under its own tool_use id; an agent's recent activities are its last
five tool calls, however many one turn made; a model switched mid-session answers the next
call whether it streams or answers whole; transcripts hold every line a durable turn wrote;
the calls kept in ``call_outputs`` are those whose output carries metadata.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from step_tool import StepTool
from subagents import (
    CallInfo,
    Event,
    ProgressEvent,
    ScriptedModel,
    Session,
    SessionOptions,
    ToolContext,
    ToolOutput,
    Usage,
    core_tools,
)
from subagents.agents.agent_run import AgentRun
from subagents.distributed.remote import Progress, apply_progress, progress_of
from subagents.events import AgentRef
from subagents.loop.query import LoopStats
from subagents.models.base import MessageDone, ModelRequest, RequestMetadata, StreamEvent


def options(tmp_path: Path, script: dict[str, Any], **extra: Any) -> SessionOptions:
    return SessionOptions(
        model=ScriptedModel.from_dict(script),
        cwd=tmp_path,
        home=tmp_path / "home",
        tools=[*core_tools(), StepTool()],
        load_settings=False,
        **extra,
    )


def main_turns(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"agents": [{"agent_type": "main", "turns": list(turns)}]}


def step(path: str) -> dict[str, Any]:
    return {"name": "Step", "input": {"path": path}}


async def test_tool_progress_reaches_a_listener_and_nothing_breaks_without_one(
    tmp_path: Path,
) -> None:
    script = main_turns({"tool_calls": [step("a"), step("b")]}, {"text": "done"})
    events: list[Event] = []
    result = await Session(options(tmp_path, script)).run("go", on_event=events.append)
    assert result.result == "done"
    progress = [e for e in events if isinstance(e, ProgressEvent) and e.subtype == "tool_progress"]
    sent = [
        b["id"]
        for m in result.agents[0].messages
        if m["role"] == "assistant" and not isinstance(m["content"], str)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert len(sent) == 2
    assert [(e.tool_use_id, e.data) for e in progress] == [
        (sent[0], {"at": "a"}),
        (sent[1], {"at": "b"}),
    ]
    quiet = await Session(options(tmp_path / "q", script)).run("go")
    assert quiet.result == "done"
    assert "stepped a" in json.dumps(quiet.agents[0].messages)


async def test_each_denied_call_of_a_turn_is_recorded_under_its_own_id(tmp_path: Path) -> None:
    write = {"name": "Write", "input": {"file_path": str(tmp_path / "x.txt"), "content": "x"}}
    script = main_turns(
        {"tool_calls": [write, step("a"), write]},
        {"tool_calls": [write]},
        {"text": "gave up"},
    )
    result = await Session(options(tmp_path, script)).run("go")
    assert result.result == "gave up"
    denials = result.payload["permission_denials"]
    sent = [
        b["id"]
        for m in result.agents[0].messages
        if m["role"] == "assistant" and not isinstance(m["content"], str)
        for b in m["content"]
        if b["type"] == "tool_use" and b["name"] == "Write"
    ]
    assert len(sent) == 3
    assert [d["tool_use_id"] for d in denials] == sent
    assert all(d["tool_name"] == "Write" for d in denials)
    assert not (tmp_path / "x.txt").exists()


async def test_recent_activities_are_the_last_five_calls_however_many_a_turn_made(
    tmp_path: Path,
) -> None:
    script = main_turns(
        {"tool_calls": [step(f"p{i}") for i in range(7)]},
        {"tool_calls": [step("last")]},
        {"text": "done"},
    )
    result = await Session(options(tmp_path, script)).run("go")
    stats = result.agents[0].stats
    assert stats.activities == [f"Step: {p}" for p in ("p3", "p4", "p5", "p6", "last")]
    assert stats.tool_use_count == 8
    assert stats.num_turns == 3


async def test_every_call_of_a_loop_sends_its_one_request_with_the_live_history(
    tmp_path: Path,
) -> None:
    seen: list[tuple[ModelRequest, int, str]] = []

    def answer(request: ModelRequest) -> dict[str, Any]:
        seen.append((request, len(request.messages), request.model))
        if len(seen) == 1:
            return {"tool_calls": [step("a")]}
        return {"text": "done"}

    model = ScriptedModel.from_function(answer, name="fn-model")
    opts = options(tmp_path, main_turns())
    opts.model = model
    result = await Session(opts).run("go")
    assert result.result == "done"
    (first, one, model_name), (second, three, _) = seen
    assert second is first  # built once per loop, not per call
    assert (one, three, model_name) == (1, 3, "fn-model")
    assert first.messages is result.agents[0].messages  # the live history, grown in place
    assert first.metadata.agent_type == "main" and first.metadata.prompt == "go"


def test_activities_are_described_when_read_and_a_remote_report_is_kept_as_sent() -> None:
    stats = LoopStats()
    stats.recent_calls += [
        {"type": "tool_use", "id": "t1", "name": "Grep", "input": {"pattern": "TODO"}},
        {"type": "tool_use", "id": "t2", "name": "Note", "input": {"text": "x"}},
    ]
    assert stats.activities == ["Grep: TODO", "Note"]
    assert progress_of(stats).activities == ("Grep: TODO", "Note")
    # A driver's copy of a remote child takes the node's described activities as they came.
    run = AgentRun(ref=AgentRef(agent_id="a1", agent_type="worker"))
    sent = Progress(num_turns=2, tool_use_count=2, usage=Usage(), activities=("Read: f", "Bash"))
    apply_progress(run, sent)
    assert run.stats.activities == ["Read: f", "Bash"]
    assert (run.stats.num_turns, run.stats.tool_use_count) == (2, 2)


class StreamOnly:
    """A model with ``stream`` alone (no ``respond``): the caller drains its stream."""

    name = "stream-only"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        text = f"streamed {self.calls}"
        yield MessageDone(
            message={"role": "assistant", "content": [{"type": "text", "text": text}]}
        )


async def test_a_model_switched_mid_session_answers_the_next_call(tmp_path: Path) -> None:
    first = main_turns({"text": "scripted one"})
    async with Session(options(tmp_path, first)) as session:
        assert (await session.run("one")).result == "scripted one"
        streaming = StreamOnly()
        session.set_model(streaming)
        assert (await session.run("two")).result == "streamed 1"
        session.set_model(ScriptedModel.from_dict(main_turns({"text": "scripted again"})))
        assert (await session.run("three")).result == "scripted again"
    assert streaming.calls == 1


async def test_the_transcript_holds_each_turn_in_order_odd_characters_too(tmp_path: Path) -> None:
    # A lone surrogate is not UTF-8: the line goes through the standard library's escape.
    script = main_turns({"tool_calls": [step("a")]}, {"text": "done \ud800 odd"})
    result = await Session(options(tmp_path, script)).run("go")
    assert result.result.startswith("done")
    path = result.agents[0].transcript_path
    assert path is not None
    records = [json.loads(line) for line in Path(path).read_text().splitlines()]
    kinds = [r["type"] if r["type"] != "message" else r["message"]["role"] for r in records]
    assert kinds == [
        "user",
        "turn_completed",
        "assistant",
        "user",
        "turn_completed",
        "assistant",
        "turn_completed",
    ]
    answers = [r["message"] for r in records if r.get("type") == "message"]
    assert answers[-1]["content"][0]["text"] == "done \ud800 odd"
    markers = [r["turn"] for r in records if r["type"] == "turn_completed"]
    assert markers == list(range(1, len(markers) + 1))


async def test_call_outputs_keep_the_calls_whose_output_carries_metadata(tmp_path: Path) -> None:
    target = tmp_path / "x.txt"
    write = {"name": "Write", "input": {"file_path": str(target), "content": "x"}}
    script = main_turns({"tool_calls": [step("a"), write, step("b")]}, {"text": "done"})
    result = await Session(options(tmp_path, script, permission_mode="acceptEdits")).run("go")
    assert result.result == "done"
    kept = result.agents[0].stats.call_outputs
    assert [c.tool_name for c in kept] == ["Write"]  # the Steps' plain results are not kept
    output = kept[0].output
    assert output is not None and output.metadata is not None
    assert output.metadata["files_changed"] == [str(target)]
    assert "stepped b" in json.dumps(result.agents[0].messages)


async def test_a_scripted_answer_and_a_tool_call_info_are_built_whole(tmp_path: Path) -> None:
    """The scripted model's ``MessageDone`` and ``Usage`` and a tool's ``CallInfo`` are built
    without keyword calls on the per-call path: each still has every field, equal to the
    object the keyword constructor gives (an unset field would raise here)."""
    script = main_turns(
        {"tool_calls": [{"name": "Info", "input": {"path": "a"}}]},
        {"text": "done", "usage": {"input_tokens": 7, "output_tokens": 2}},
    )
    model = ScriptedModel.from_dict(script)
    request = ModelRequest(
        model="scripted",
        system="s",
        messages=[{"role": "user", "content": "go"}],
        tools=[],
        metadata=RequestMetadata(agent_id="a1", agent_type="main", prompt="go"),
    )
    done = await model.respond(request)
    rebuilt = MessageDone(
        message=done.message, usage=Usage(**done.usage.to_dict()), stop_reason="tool_use"
    )
    rebuilt.model = "scripted"
    assert done == rebuilt and done.type == "message_done"
    assert done.usage.input_tokens + done.usage.cache_creation_input_tokens >= 1
    request.messages += [done.message, {"role": "user", "content": "more"}]
    final = await model.respond(request)
    assert final == MessageDone(
        message=final.message, usage=Usage(input_tokens=7, output_tokens=2), model="scripted"
    )

    seen: list[CallInfo] = []

    class InfoTool(StepTool):
        name = "Info"

        async def call(self, args: Any, ctx: ToolContext, info: CallInfo) -> ToolOutput:
            seen.append(info)
            return await super().call(args, ctx, info)

    opts = options(tmp_path, script)
    opts.tools = [*core_tools(), InfoTool()]
    result = await Session(opts).run("go")
    assert result.result == "done"
    [info] = seen
    assert info == CallInfo(tool_use_id=info.tool_use_id, progress=info.progress)
    assert info.tool_use_id.startswith("toolu_")


async def test_a_lone_call_runs_without_its_concurrency_question(tmp_path: Path) -> None:
    """A one-call turn is a group of its own: the call is validated, checked and run, and the
    tool is not asked whether it is concurrency-safe (the answer only groups calls); a
    two-call turn asks for each. Invalid and unknown lone calls still get their errors."""
    asked: list[str] = []

    class AskedTool(StepTool):
        name = "Asked"

        def is_concurrency_safe(self, args: Any) -> bool:
            asked.append(args.path)
            return True

    def asked_call(path: str) -> dict[str, Any]:
        return {"name": "Asked", "input": {"path": path}}

    script = main_turns(
        {"tool_calls": [asked_call("lone")]},
        {"tool_calls": [asked_call("one"), asked_call("two")]},
        {"tool_calls": [{"name": "Asked", "input": {}}]},
        {"tool_calls": [{"name": "Missing", "input": {}}]},
        {"text": "done"},
    )
    opts = options(tmp_path, script)
    opts.tools = [*core_tools(), AskedTool()]
    result = await Session(opts).run("go")
    assert result.result == "done"
    assert asked == ["one", "two"]
    results = [
        b
        for m in result.agents[0].messages
        if m["role"] == "user" and not isinstance(m["content"], str)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert [b["content"] for b in results[:3]] == ["stepped lone", "stepped one", "stepped two"]
    assert results[3].get("is_error") and "Asked was called with invalid input" in str(
        results[3]["content"]
    )
    assert results[4].get("is_error") and "No such tool available: Missing" in str(
        results[4]["content"]
    )


async def test_a_results_message_is_counted_as_message_chars_counts_it(tmp_path: Path) -> None:
    """The running token count grows by a tool-results message's characters / 4, counted as
    its blocks are taken (the results, then the reminders riding along): the figure an
    automatic compaction reports as ``tokens_before`` is the plain ``message_chars`` of the
    message the model was sent, after the call's usage."""
    from subagents import RuntimeConfig
    from subagents.events import CompactionEvent
    from subagents.loop.history_trim import message_chars
    from subagents.store.transcript import read_records

    (tmp_path / "seen.txt").write_text("x")
    used = {"input_tokens": 20, "output_tokens": 10}
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "Agent",
                                "input": {
                                    "description": "check",
                                    "prompt": "check the work",
                                    "subagent_type": "verification",
                                },
                            }
                        ],
                        "usage": used,
                    },
                    {"text": "ok", "usage": used},
                ],
            },
            {
                "agent_type": "verification",
                "turns": [
                    {
                        "tool_calls": [{"name": "Glob", "input": {"pattern": "*.txt"}}],
                        "usage": used,
                    },
                    {"text": "VERDICT: PASS", "usage": used},
                ],
            },
            {"agent_type": "compact", "turns": [{"text": "SUMMARY"}]},
        ]
    }
    model = ScriptedModel.from_dict(script)
    events: list[Event] = []
    opts = SessionOptions(
        model=model,
        cwd=tmp_path,
        home=tmp_path / "home",
        load_settings=False,
        config=RuntimeConfig(autocompact_tokens=1),  # every agent compacts after its first turn
    )
    result = await Session(opts).run("go", on_event=events.append)
    assert result.result == "ok"
    (child,) = [r for r in result.agents if r.ref.agent_type == "verification"]
    compactions = {e.agent.agent_id: e for e in events if isinstance(e, CompactionEvent)}
    # The message as sent and written: the transcript keeps it after the compaction.
    assert child.transcript_path is not None
    results = next(
        r["message"]
        for r in read_records(child.transcript_path)
        if r["type"] == "message"
        and r["message"]["role"] == "user"
        and any(b["type"] == "tool_result" for b in r["message"]["content"])
    )
    texts = [b.get("text", "") for b in results["content"]]
    assert any("verification-only task" in text for text in texts)  # a reminder rides along
    expected = used["input_tokens"] + used["output_tokens"] + message_chars(results) // 4
    assert compactions[child.ref.agent_id].tokens_before == expected


async def test_each_call_is_timed_counted_and_its_tool_calls_taken_in_order(tmp_path: Path) -> None:
    """What a model call adds to an agent's figures (the answer taken after the awaited call):
    the time waited for the model, the four usage counters and the turn, and the answer's
    tool calls in order with its text blocks left out."""
    usage = {
        "input_tokens": 7,
        "output_tokens": 3,
        "cache_creation_input_tokens": 11,
        "cache_read_input_tokens": 13,
    }
    script = main_turns(
        {
            "text": "first a, then b",
            "tool_calls": [step("a"), step("b")],
            "usage": usage,
            "delay_ms": 40,
        },
        {"text": "done", "usage": usage, "delay_ms": 40},
    )
    result = await Session(options(tmp_path, script)).run("go")
    assert result.result == "done"
    (main,) = result.agents
    assert main.stats.num_turns == 2
    assert main.stats.usage.to_dict() == {key: 2 * value for key, value in usage.items()}
    assert result.payload["usage"] == main.stats.usage.to_dict()
    assert result.payload["duration_api_ms"] == main.stats.api_ms >= 80
    assert main.stats.tool_use_count == 2
    assert [call["input"] for call in main.stats.recent_calls] == [{"path": "a"}, {"path": "b"}]
    results = main.messages[2]["content"]
    assert [b["content"] for b in results if b["type"] == "tool_result"] == [
        "stepped a",
        "stepped b",
    ]


async def test_turn_markers_are_the_plain_encoding_past_the_kept_ones_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn marker comes from a table of encoded markers (``transcript._marker``): its bytes
    are the plain encoding of ``{"type": "turn_completed", "turn": N}`` whether it was kept,
    made now or past the kept ones, numbered from 1 in every transcript."""
    import orjson

    from subagents.store import transcript

    monkeypatch.setattr(transcript, "MARKERS_KEPT", 4)
    monkeypatch.setattr(transcript, "_markers", {})
    script = main_turns(*({"tool_calls": [step(str(i))]} for i in range(6)), {"text": "done"})
    for run in ("first", "second"):  # the second finds turns 1-3 kept by the first
        result = await Session(options(tmp_path / run, script)).run("go")
        assert result.result == "done"
        path = result.agents[0].transcript_path
        assert path is not None
        lines = Path(path).read_bytes().split(b"\n")
        assert lines[-1] == b""
        markers = [line for line in lines if b'"turn_completed"' in line]
        # the task's turn, six tool turns and the answer's
        assert markers == [orjson.dumps({"type": "turn_completed", "turn": n}) for n in range(1, 9)]
    assert sorted(transcript._markers) == [1, 2, 3]  # none past the limit is kept


async def test_a_transcript_line_is_its_record_encoded_whole(tmp_path: Path) -> None:
    """A message line is written as its head's constant bytes and the message's encoding
    (``TranscriptWriter.append``): every line is the plain encoding of the record it holds,
    odd characters, a lone surrogate (json_codec's escape) and an integer orjson refuses too."""
    from subagents.json_codec import dumps

    big = 1 << 70  # beyond orjson's 64 bits: the record goes through json_codec whole
    script = main_turns(
        {"tool_calls": [step('ü " \\ \n é')]},
        {"tool_calls": [{"name": "Step", "input": {"path": "x", "extra": big}}]},
        {"text": "done \ud800 odd"},
    )
    result = await Session(options(tmp_path, script)).run("go")
    assert result.result.startswith("done")
    path = result.agents[0].transcript_path
    assert path is not None
    lines = Path(path).read_bytes().split(b"\n")[:-1]
    records = [json.loads(line) for line in lines]
    assert [line for line in lines] == [dumps(record) for record in records]
    assert {"path": "x", "extra": big} in [
        b["input"]
        for r in records
        if r["type"] == "message" and r["message"]["role"] == "assistant"
        for b in r["message"]["content"]
        if b["type"] == "tool_use"
    ]


def test_turn_markers_made_by_many_threads_at_once_are_each_their_turns() -> None:
    """Sessions may run on loops in several threads: markers made concurrently, switching
    threads as often as the interpreter allows, are still each their own turn's."""
    import sys
    import threading

    from subagents.store import transcript

    def expected(n: int) -> bytes:
        return b'{"type":"turn_completed","turn":%d}\n' % n

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(20):
            transcript._markers.clear()
            start = threading.Barrier(4)
            wrong: list[int] = []

            def make(start: threading.Barrier = start, wrong: list[int] = wrong) -> None:
                start.wait()
                for n in range(1, 300):
                    if transcript._marker(n) != expected(n):
                        wrong.append(n)

            threads = [threading.Thread(target=make) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not wrong
            assert all(transcript._markers[n] == expected(n) for n in transcript._markers)
    finally:
        sys.setswitchinterval(interval)
        transcript._markers.clear()
