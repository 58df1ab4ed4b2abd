"""The scripted model: SPEC §19 behaviour that end-to-end tests and users rely on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import subagents.testing as testing
from subagents.messages import (
    ContentBlock,
    Message,
    text_block,
    tool_result_block,
    user_message,
)
from subagents.models.base import (
    MessageDone,
    Model,
    ModelError,
    ModelRequest,
    RequestMetadata,
    ToolSchema,
    complete,
)
from subagents.models.resolve import (
    MODEL_ALIASES,
    PROVIDERS,
    register_provider,
    resolve_alias,
    resolve_model,
)
from subagents.models.retry import ModelCaller, RetryPolicy
from subagents.testing import ScriptedModel, ScriptError, ScriptTurn

# --- helpers ---------------------------------------------------------------------------------


def request(
    agent_id: str = "a1",
    agent_type: str = "main",
    prompt: str = "hello",
    messages: list[Message] | None = None,
    *,
    system: str = "",
    tools: list[ToolSchema] | None = None,
) -> ModelRequest:
    return ModelRequest(
        model="scripted",
        system=system,
        messages=messages if messages is not None else [user_message(prompt)],
        tools=tools or [],
        metadata=RequestMetadata(agent_id=agent_id, agent_type=agent_type, prompt=prompt),
    )


def text_of(done: MessageDone) -> str:
    content = done.message["content"]
    assert isinstance(content, list)
    return "".join(b["text"] for b in content if b["type"] == "text")


def blocks(done: MessageDone) -> list[ContentBlock]:
    content = done.message["content"]
    assert isinstance(content, list)
    return content


def results_message(*texts: str) -> Message:
    return user_message([tool_result_block(f"t{i}", t) for i, t in enumerate(texts)])


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- binding ---------------------------------------------------------------------------------


async def test_binds_by_agent_type_and_absent_type_means_any() -> None:
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {"agent_type": "Explore", "turns": [{"text": "explorer"}]},
                {"turns": [{"text": "anyone"}]},
                {"agent_type": "main", "turns": [{"text": "never reached"}]},
            ]
        }
    )
    assert text_of(await complete(model, request("x", "Explore"))) == "explorer"
    assert text_of(await complete(model, request("m", "main"))) == "anyone"


async def test_match_is_a_regex_search_and_nonmatching_entries_are_skipped() -> None:
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {"match": "^exact$", "turns": [{"text": "anchored"}]},
                {"match": r"token (\w+)", "turns": [{"text": "got {{match.1}} in {{match.0}}"}]},
            ]
        }
    )
    done = await complete(model, request("a", "Explore", "please look for token B2 now"))
    assert text_of(done) == "got B2 in token B2"


async def test_binding_happens_once_at_first_request() -> None:
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {"match": "first", "turns": [{"text": "one"}, {"text": "two"}]},
                {"turns": [{"text": "other"}]},
            ]
        }
    )
    assert text_of(await complete(model, request("a", prompt="first"))) == "one"
    # Same agent, different prompt in metadata: still bound to its entry.
    assert text_of(await complete(model, request("a", prompt="changed"))) == "two"


async def test_two_agents_interleaved_keep_their_own_counters() -> None:
    model = ScriptedModel.from_dict(
        {"agents": [{"agent_type": "Explore", "turns": [{"text": "t0"}, {"text": "t1"}]}]}
    )
    seen = [
        text_of(await complete(model, request(agent, "Explore"))) for agent in ("a", "b", "a", "b")
    ]
    assert seen == ["t0", "t0", "t1", "t1"]


async def test_no_matching_entry_is_an_error_naming_agent_type_and_prompt() -> None:
    model = ScriptedModel.from_dict({"agents": [{"agent_type": "main", "turns": [{"text": "x"}]}]})
    long_prompt = "investigate " + "z" * 500
    with pytest.raises(ModelError) as caught:
        await complete(model, request("agent-7", "Explore", long_prompt))
    message = str(caught.value)
    assert caught.value.kind == "invalid_request"
    assert "agent-7" in message
    assert "Explore" in message
    assert "investigate zzz" in message
    assert "z" * 300 not in message  # the prompt is truncated


async def test_more_requests_than_turns_is_an_error_naming_the_agent() -> None:
    model = ScriptedModel.from_dict({"agents": [{"turns": [{"text": "only"}]}]})
    await complete(model, request("solo", "Plan", "the plan prompt"))
    with pytest.raises(ModelError) as caught:
        await complete(model, request("solo", "Plan", "the plan prompt"))
    assert caught.value.kind == "invalid_request"
    for part in ("solo", "Plan", "the plan prompt", "request 2", "1 turn"):
        assert part in str(caught.value)


# --- turns -----------------------------------------------------------------------------------


async def test_text_with_tool_calls_gives_text_then_tool_uses_with_deterministic_ids() -> None:
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "turns": [
                        {"text": "on it"},
                        {
                            "text": "calling",
                            "tool_calls": [
                                {"name": "Glob", "input": {"pattern": "*.py"}},
                                {"name": "Read", "input": {"file_path": "/a"}},
                            ],
                        },
                    ]
                }
            ]
        }
    )
    first = await complete(model, request("ag"))
    assert first.stop_reason == "end_turn"
    second = await complete(model, request("ag"))
    assert second.stop_reason == "tool_use"
    assert [b["type"] for b in blocks(second)] == ["text", "tool_use", "tool_use"]
    uses = [b for b in blocks(second) if b["type"] == "tool_use"]
    assert [u["id"] for u in uses] == ["toolu_ag_1_0", "toolu_ag_1_1"]
    assert [u["name"] for u in uses] == ["Glob", "Read"]
    assert uses[0]["input"] == {"pattern": "*.py"}


async def test_served_tool_inputs_are_fresh_dicts() -> None:
    model = ScriptedModel.from_dict(
        {"agents": [{"turns": [{"tool_calls": [{"name": "Glob", "input": {"pattern": "*"}}]}]}]}
    )
    done_a = await complete(model, request("a"))
    done_b = await complete(model, request("b"))
    use_a, use_b = blocks(done_a)[0], blocks(done_b)[0]
    assert use_a["type"] == "tool_use" and use_b["type"] == "tool_use"
    use_a["input"]["pattern"] = "mutated"
    assert use_b["input"] == {"pattern": "*"}


async def test_delay_is_cancellable_and_the_turn_stays_consumed() -> None:
    model = ScriptedModel.from_dict(
        {"agents": [{"turns": [{"text": "slow", "delay_ms": 60_000}, {"text": "after"}]}]}
    )
    task = asyncio.create_task(complete(model, request("d")))
    await asyncio.sleep(0.01)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=5)
    assert text_of(await complete(model, request("d"))) == "after"


async def test_short_delay_is_waited() -> None:
    model = ScriptedModel.from_dict({"agents": [{"turns": [{"text": "x", "delay_ms": 30}]}]})
    loop = asyncio.get_running_loop()
    started = loop.time()
    await complete(model, request())
    assert loop.time() - started >= 0.025


# --- templates -------------------------------------------------------------------------------


async def test_tool_results_templates_in_text_and_nested_inputs() -> None:
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "turns": [
                        {"text": "start"},
                        {
                            "text": "all: {{tool_results}} | first: {{tool_results.0}} | "
                            "second: {{ tool_results.1 }} | none: {{tool_results.5}}",
                            "tool_calls": [
                                {
                                    "name": "SendMessage",
                                    "input": {
                                        "to": "{{tool_results.1}}",
                                        "nested": [{"deep": "<{{tool_results.0}}>"}, 3, True],
                                        "count": 2,
                                    },
                                }
                            ],
                        },
                    ]
                }
            ]
        }
    )
    messages: list[Message] = [user_message("go")]
    done = await complete(model, request("a", messages=messages))
    messages += [done.message, results_message("alpha", "beta")]
    done = await complete(model, request("a", messages=messages))
    assert text_of(done) == (
        "all: alpha\nbeta | first: alpha | second: beta | none: {{tool_results.5}}"
    )
    use = blocks(done)[1]
    assert use["type"] == "tool_use"
    assert use["input"] == {"to": "beta", "nested": [{"deep": "<alpha>"}, 3, True], "count": 2}


async def test_last_user_prompt_agent_id_and_unknown_placeholders() -> None:
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "turns": [
                        {
                            "text": "[{{last_user}}] {{prompt}} {{agent_id}} {{nope}} "
                            "{{match.1}} {{capture.missing}}"
                        }
                    ]
                }
            ]
        }
    )
    last = user_message([tool_result_block("t0", "result text"), text_block("a notification")])
    done = await complete(model, request("agent-9", prompt="the task", messages=[last]))
    assert text_of(done) == (
        "[result text\na notification] the task agent-9 {{nope}} {{match.1}} {{capture.missing}}"
    )


async def test_capture_keeps_first_group_or_whole_match_for_later_turns() -> None:
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "turns": [
                        {"text": "launch"},
                        {
                            "capture": {"ID": r"agentId: (\w+)", "WHOLE": r"status \w+"},
                            "text": "now {{capture.ID}}",
                        },
                        {
                            "tool_calls": [
                                {"name": "TaskOutput", "input": {"task_id": "{{capture.ID}}"}}
                            ],
                            "text": "{{capture.WHOLE}}",
                        },
                    ]
                }
            ]
        }
    )
    messages: list[Message] = [user_message("go")]
    done = await complete(model, request("c", messages=messages))
    messages += [done.message, results_message("Launched. agentId: af12cd status running")]
    done = await complete(model, request("c", messages=messages))
    assert text_of(done) == "now af12cd"
    messages += [done.message, user_message("unrelated")]
    done = await complete(model, request("c", messages=messages))
    assert text_of(done) == "status running"
    use = blocks(done)[1]
    assert use["type"] == "tool_use"
    assert use["input"] == {"task_id": "af12cd"}


async def test_captures_are_per_agent() -> None:
    model = ScriptedModel.from_dict(
        {"agents": [{"turns": [{"capture": {"X": r"x=(\d+)"}, "text": "{{capture.X}}"}]}]}
    )
    one = await complete(model, request("p", messages=[user_message("x=1")]))
    two = await complete(model, request("q", messages=[user_message("x=2")]))
    assert (text_of(one), text_of(two)) == ("1", "2")


# --- errors ----------------------------------------------------------------------------------


async def test_error_turn_fails_n_times_then_serves_its_content() -> None:
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "turns": [
                        {"text": "finally", "error": {"type": "api_error", "times": 2}},
                        {"text": "next"},
                    ]
                }
            ]
        }
    )
    for _ in range(2):
        with pytest.raises(ModelError) as caught:
            await complete(model, request("e"))
        assert caught.value.kind == "api_error"
        assert caught.value.status == 500
        assert caught.value.retryable
    assert text_of(await complete(model, request("e"))) == "finally"
    assert text_of(await complete(model, request("e"))) == "next"


@pytest.mark.parametrize(
    ("error_type", "kind"),
    [("overloaded", "overloaded"), ("rate_limit", "rate_limit"), ("fallback", "fallback")],
)
async def test_error_types_map_to_model_error_kinds(error_type: str, kind: str) -> None:
    model = ScriptedModel.from_dict(
        {"agents": [{"turns": [{"text": "ok", "error": {"type": error_type}}]}]}
    )
    with pytest.raises(ModelError) as caught:
        await complete(model, request())
    assert caught.value.kind == kind
    assert text_of(await complete(model, request())) == "ok"


async def test_model_caller_retries_injected_errors_with_one_notice_per_retry() -> None:
    model = ScriptedModel.from_dict(
        {"agents": [{"turns": [{"text": "survived", "error": {"type": "overloaded", "times": 3}}]}]}
    )
    notices: list[tuple[str, dict[str, Any]]] = []
    caller = ModelCaller(
        model=model,
        policy=RetryPolicy(base_delay_s=0.001),
        on_notice=lambda kind, data: notices.append((kind, data)),
    )
    done = await caller.call(request())
    assert text_of(done) == "survived"
    assert [kind for kind, _ in notices] == ["api_retry"] * 3
    assert [data["attempt"] for _, data in notices] == [1, 2, 3]
    assert {data["error"] for _, data in notices} == {"overloaded"}


async def test_model_caller_switches_to_fallback_on_fallback_error() -> None:
    primary = ScriptedModel.from_dict(
        {"agents": [{"turns": [{"text": "primary", "error": {"type": "fallback", "times": 5}}]}]},
        name="scripted:primary",
    )
    backup = ScriptedModel.from_dict(
        {"agents": [{"turns": [{"text": "from backup"}]}]}, name="scripted:backup"
    )
    notices: list[str] = []
    caller = ModelCaller(
        model=primary,
        policy=RetryPolicy(base_delay_s=0.001),
        fallback=backup,
        on_notice=lambda kind, data: notices.append(kind),
    )
    done = await caller.call(request())
    assert text_of(done) == "from backup"
    assert done.model == "scripted:backup"
    assert notices == ["model_fallback"]


# --- recording -------------------------------------------------------------------------------


async def test_record_file_has_one_flushed_line_per_request_failed_ones_with_error(
    tmp_path: Path,
) -> None:
    script = write_json(
        tmp_path / "script.json",
        {
            "record": "out/requests.jsonl",
            "agents": [
                {
                    "agent_type": "main",
                    "turns": [{"text": "done", "error": {"type": "rate_limit", "times": 1}}],
                }
            ],
        },
    )
    model = ScriptedModel.from_file(script)
    record = tmp_path / "out" / "requests.jsonl"
    tools = [ToolSchema(name="Glob", description="find files", input_schema={"type": "object"})]
    req = request("r1", "main", "the prompt", system="SYS", tools=tools)
    req.thinking = {"type": "enabled", "budget_tokens": 1024}
    with pytest.raises(ModelError):
        await complete(model, req)
    lines = record.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1  # written and flushed before the caller even sees the error
    failed = json.loads(lines[0])
    assert failed["error"] == "rate_limit"
    await complete(model, req)
    with pytest.raises(ModelError):
        await complete(model, request("stranger", "Explore", "unmatched"))
    lines = record.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    served, unmatched = json.loads(lines[1]), json.loads(lines[2])
    assert served == {
        "agent_id": "r1",
        "agent_type": "main",
        "prompt": "the prompt",
        "model": "scripted",
        "system": "SYS",
        "tools": [
            {"name": "Glob", "description": "find files", "input_schema": {"type": "object"}}
        ],
        "messages": [{"role": "user", "content": "the prompt"}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    assert unmatched["error"] == "invalid_request"
    assert unmatched["agent_id"] == "stranger"
    assert [r.get("error") for r in model.requests] == ["rate_limit", None, "invalid_request"]


async def test_requests_keep_each_calls_messages_as_they_were(tmp_path: Path) -> None:
    model = ScriptedModel.from_dict(
        {"record": "rec.jsonl", "agents": [{"turns": [{"text": "a"}, {"text": "b"}]}]},
        base_dir=tmp_path,
    )
    messages: list[Message] = [user_message("go")]
    done = await complete(model, request("k", messages=messages))
    messages += [done.message, user_message("more")]
    await complete(model, request("k", messages=messages))
    assert [len(r["messages"]) for r in model.requests] == [1, 3]
    lines = (tmp_path / "rec.jsonl").read_text(encoding="utf-8").splitlines()
    first, second = (json.loads(line)["messages"] for line in lines)
    assert second[: len(first)] == first  # the prefix a cache would reuse


async def test_keep_requests_false_without_record_keeps_nothing(tmp_path: Path) -> None:
    script = write_json(tmp_path / "s.json", {"agents": [{"turns": [{"text": "a"}]}]})
    model = ScriptedModel.from_file(script, keep_requests=False)
    await complete(model, request())
    assert model.requests == []
    assert list(tmp_path.iterdir()) == [script]


# --- files -----------------------------------------------------------------------------------


async def test_yaml_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(
        "record: rec.jsonl\n"
        "agents:\n"
        "  - agent_type: Explore\n"
        "    match: 'token (\\w+)'\n"
        "    turns:\n"
        "      - text: 'found {{match.1}}'\n",
        encoding="utf-8",
    )
    model = ScriptedModel.from_file(script)
    done = await complete(model, request("y", "Explore", "find token Q7"))
    assert text_of(done) == "found Q7"
    assert (tmp_path / "rec.jsonl").exists()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {
                "agents": [
                    {"turns": [{"text": "ok"}]},
                    {"turns": [{"error": {"type": "boom"}}]},
                ]
            },
            "requests.json: agents[1].turns[0].error.type: "
            "must be one of overloaded|rate_limit|api_error|fallback",
        ),
        (
            {"agents": [{"turns": [{"txet": "typo"}]}]},
            "requests.json: agents[0].turns[0].txet: unknown field",
        ),
        (
            {"agents": [{"match": "(unclosed", "turns": []}]},
            "requests.json: agents[0].match: invalid regex '(unclosed'",
        ),
        (
            {"agents": [{"turns": [{"tool_calls": [{"input": {}}]}]}]},
            "requests.json: agents[0].turns[0].tool_calls[0].name: required field is missing",
        ),
        (
            {"agents": [{"turns": [{"error": {"type": "overloaded", "times": 0}}]}]},
            "requests.json: agents[0].turns[0].error.times: must be greater than or equal to 1",
        ),
        (
            {"agents": [{"turns": [{"capture": {"ID": "(x"}}]}]},
            "requests.json: agents[0].turns[0].capture: ID: invalid regex '(x'",
        ),
        ([1, 2], "requests.json: a script must be an object"),
    ],
)
def test_malformed_script_names_file_and_field(tmp_path: Path, data: Any, expected: str) -> None:
    path = write_json(tmp_path / "requests.json", data)
    with pytest.raises(ScriptError) as caught:
        ScriptedModel.from_file(path)
    assert str(caught.value).startswith(expected)
    assert isinstance(caught.value, ValueError)


def test_invalid_json_and_missing_file_name_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"agents": [', encoding="utf-8")
    with pytest.raises(ScriptError, match=r"broken\.json: invalid JSON at line 1"):
        ScriptedModel.from_file(broken)
    bad_yaml = tmp_path / "bad.yml"
    bad_yaml.write_text("agents: [unclosed\n", encoding="utf-8")
    with pytest.raises(ScriptError, match=r"bad\.yml: invalid YAML"):
        ScriptedModel.from_file(bad_yaml)
    with pytest.raises(ScriptError, match=r"absent\.json"):
        ScriptedModel.from_file(tmp_path / "absent.json")


# --- function-driven -------------------------------------------------------------------------


async def test_function_model_sync_returns_text_dict_or_turn() -> None:
    answers: list[Any] = [
        "plain text {{agent_id}}",
        {"tool_calls": [{"name": "Glob", "input": {"pattern": "*.md"}}]},
        ScriptTurn(text="as a turn", usage={"input_tokens": 5, "output_tokens": 6}),
    ]
    seen: list[str] = []

    def answer(req: ModelRequest) -> Any:
        seen.append(req.metadata.prompt)
        return answers[len(seen) - 1]

    model = ScriptedModel.from_function(answer)
    first = await complete(model, request("f", prompt="p1"))
    second = await complete(model, request("f", prompt="p2"))
    third = await complete(model, request("f", prompt="p3"))
    assert text_of(first) == "plain text f"
    assert second.stop_reason == "tool_use"
    assert blocks(second)[0]["type"] == "tool_use"
    assert blocks(second)[0]["id"] == "toolu_f_1_0"
    assert text_of(third) == "as a turn"
    assert (third.usage.input_tokens, third.usage.output_tokens) == (5, 6)
    assert seen == ["p1", "p2", "p3"]
    assert len(model.requests) == 3


async def test_function_model_async_and_error_turn_is_not_asked_again() -> None:
    calls = 0

    async def answer(req: ModelRequest) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        return {"text": f"answer {calls}", "error": {"type": "overloaded", "times": 2}}

    model = ScriptedModel.from_function(answer)
    for _ in range(2):
        with pytest.raises(ModelError, match="overloaded"):
            await complete(model, request())
    assert text_of(await complete(model, request())) == "answer 1"
    assert calls == 1
    # The first failure is the function's turn, the second its pending one: both recorded.
    assert [r.get("error") for r in model.requests] == ["overloaded", "overloaded", None]


async def test_function_model_bad_result_is_a_script_error() -> None:
    model = ScriptedModel.from_function(lambda req: {"text": 3})
    with pytest.raises(ScriptError, match=r"function result: text: "):
        await complete(model, request())
    with pytest.raises(ScriptError, match="got int"):
        await complete(ScriptedModel.from_function(lambda req: 42), request())


# --- usage -----------------------------------------------------------------------------------


async def test_usage_estimates_from_characters() -> None:
    model = ScriptedModel.from_dict(
        {"agents": [{"turns": [{"text": "x" * 40}, {"text": "y"}, {"text": "z"}]}]}
    )
    messages: list[Message] = [user_message("u" * 80)]
    done = await complete(model, request("u", messages=messages, system="s" * 20))
    assert done.usage.output_tokens == 10
    assert done.usage.input_tokens == (20 + 80) // 4
    assert done.usage.cache_read_input_tokens == 0
    assert done.usage.cache_creation_input_tokens == 0
    messages += [done.message, user_message("v" * 40)]
    done = await complete(model, request("u", messages=messages, system="s" * 20))
    assert done.usage.output_tokens == 1  # at least one
    # The first request's prefix is a cache read now; the short new tail is plain input.
    assert done.usage.cache_read_input_tokens == (20 + 80) // 4
    assert done.usage.input_tokens == (20 + 80 + 40 + 40) // 4 - (20 + 80) // 4
    # Compaction: the history shrank, so it is counted afresh (only the system is cached).
    compacted: list[Message] = [user_message("w" * 8)]
    done = await complete(model, request("u", messages=compacted, system="s" * 20))
    assert done.usage.cache_read_input_tokens == 20 // 4
    assert done.usage.input_tokens == (20 + 8) // 4 - 20 // 4


async def test_usage_estimate_recounts_a_replaced_history_of_the_same_length() -> None:
    model = ScriptedModel.from_dict({"agents": [{"turns": [{"text": "a"}, {"text": "b"}]}]})
    await complete(model, request("same", messages=[user_message("x" * 400)]))
    # A resumed agent reusing the id sends a different history of the same length.
    done = await complete(model, request("same", messages=[user_message("y" * 40)]))
    assert done.usage.input_tokens == 10


async def test_usage_estimate_counts_tool_blocks_and_script_usage_is_verbatim() -> None:
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "turns": [
                        {"tool_calls": [{"name": "Glob", "input": {"pattern": "abcd"}}]},
                        {"text": "t", "usage": {"input_tokens": 100, "output_tokens": 7}},
                    ]
                }
            ]
        }
    )
    done = await complete(model, request("g"))
    assert done.usage.output_tokens == (4 + 7 + 4) // 4  # name + key + value
    done = await complete(model, request("g"))
    assert done.usage.to_dict() == {
        "input_tokens": 100,
        "output_tokens": 7,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


# --- completeness, resolution, exports ---------------------------------------------------------


async def test_assert_complete_reports_unserved_turns() -> None:
    model = ScriptedModel.from_dict({"agents": [{"turns": [{"text": "a"}, {"text": "b"}]}]})
    await complete(model, request("half"))
    with pytest.raises(AssertionError, match=r"'half'.*served 1 of 2"):
        model.assert_complete()
    await complete(model, request("half"))
    model.assert_complete()


def test_resolve_model_scripted_and_unknown_provider(tmp_path: Path) -> None:
    script = write_json(tmp_path / "s.json", {"agents": [{"turns": [{"text": "a"}]}]})
    model = resolve_model(f"scripted:{script}")
    assert isinstance(model, ScriptedModel)
    assert model.name == f"scripted:{script}"
    with pytest.raises(ValueError, match=r"'nosuch:claude-x'.*available providers: .*scripted"):
        resolve_model("nosuch:claude-x")
    with pytest.raises(ValueError, match="needs a script path"):
        resolve_model("scripted:")


async def test_resolve_model_leaves_requests_off_by_default(tmp_path: Path) -> None:
    script = write_json(tmp_path / "s.json", {"agents": [{"turns": [{"text": "a"}]}]})
    model = resolve_model(f"scripted:{script}")
    await complete(model, request())
    assert isinstance(model, ScriptedModel)
    assert model.requests == []


class _FamilyModel:
    """A stand-in provider model that can make siblings for other model ids."""

    provider = "fake"

    def __init__(self, name: str) -> None:
        self.name = name

    def with_model_id(self, model_id: str) -> _FamilyModel:
        return _FamilyModel(model_id)

    async def stream(self, request: ModelRequest) -> Any:  # pragma: no cover - never called
        yield MessageDone(message={"role": "assistant", "content": []})


def test_resolve_alias_scripted_same_instance_and_table_for_others(tmp_path: Path) -> None:
    scripted = ScriptedModel.from_dict({"agents": []})
    for alias in (*MODEL_ALIASES, None, "inherit", "claude-some-id"):
        assert resolve_alias(scripted, alias) is scripted
    base = _FamilyModel("fake-default")
    table = {"haiku": {"fake": "fake-small"}}
    small = resolve_alias(base, "haiku", aliases=table)
    assert small.name == "fake-small"
    assert resolve_alias(base, "opus", aliases=table).name == "opus"  # not in table: a model id
    assert resolve_alias(base, "sonnet") is base  # default table has no 'fake' entry
    assert resolve_alias(base, "inherit") is base


def test_register_provider_extends_the_table(tmp_path: Path) -> None:
    made: list[str] = []

    def factory(rest: str, keep: bool) -> ScriptedModel:
        made.append(rest)
        return ScriptedModel.from_dict({"agents": []}, keep_requests=keep)

    register_provider("unit-test-provider", factory)
    try:
        resolve_model("unit-test-provider:xyz")
    finally:
        PROVIDERS.pop("unit-test-provider")
    assert made == ["xyz"]


def test_testing_package_public_names() -> None:
    assert {"ScriptedModel", "ScriptTurn", "ScriptError"} <= set(testing.__all__)
    assert issubclass(testing.ScriptError, ValueError)
    assert isinstance(ScriptedModel.from_dict({"agents": []}), Model)


def test_alias_table_is_configurable_from_the_environment(monkeypatch: Any) -> None:
    from subagents.models.resolve import configured_aliases

    monkeypatch.setenv("SUBAGENTS_MODEL_ALIASES", '{"sonnet": {"openai": "big-local"}}')
    table = configured_aliases()
    assert table["sonnet"]["openai"] == "big-local"
    assert "anthropic" in table["sonnet"]
    monkeypatch.setenv("SUBAGENTS_MODEL_ALIASES", "{nope")
    with pytest.raises(ValueError, match="SUBAGENTS_MODEL_ALIASES"):
        configured_aliases()
