"""Prompt-cache accounting of the scripted model: reads from shared prefixes, writes, cost."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from subagents.config import RuntimeConfig
from subagents.messages import Message, Usage, user_message
from subagents.models import scripted_cache
from subagents.models.base import MessageDone, ModelRequest, RequestMetadata, ToolSchema
from subagents.models.scripted import CACHE_WRITE_MIN_TOKENS, ScriptedModel
from subagents.session import Session, SessionOptions

SYSTEM = "s" * 400
TOOLS = [ToolSchema(name="Read", description="read a file", input_schema={"type": "object"})]


def request(
    agent_id: str,
    messages: list[Message],
    *,
    agent_type: str = "main",
    system: str = SYSTEM,
    tools: list[ToolSchema] | None = None,
) -> ModelRequest:
    return ModelRequest(
        model="scripted",
        system=system,
        messages=messages,
        tools=TOOLS if tools is None else tools,
        metadata=RequestMetadata(agent_id=agent_id, agent_type=agent_type, prompt=agent_id),
    )


async def complete(model: ScriptedModel, req: ModelRequest) -> MessageDone:
    events = [event async for event in model.stream(req)]
    done = events[-1]
    assert isinstance(done, MessageDone)
    return done


def input_total(usage: Usage) -> int:
    return usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens


def echo_model(**turn: Any) -> ScriptedModel:
    return ScriptedModel.from_function(lambda req: {"text": "ok", **turn})


async def test_second_request_reads_exactly_the_shared_prefix() -> None:
    model = echo_model()
    first = await complete(model, request("a", [user_message("a" * 4000)]))
    assert first.usage.cache_read_input_tokens == 0
    assert input_total(first.usage) == (400 + 4000) // 4
    # Another agent: equal content in new objects, then one more message of its own.
    second = await complete(
        model, request("b", [user_message("a" * 4000), user_message("b" * 800)])
    )
    assert second.usage.cache_read_input_tokens == (400 + 4000) // 4
    assert input_total(second.usage) == (400 + 4000 + 800) // 4
    assert second.usage.input_tokens == (400 + 4000 + 800) // 4 - (400 + 4000) // 4
    assert second.usage.cache_creation_input_tokens == 0


async def test_a_different_tool_array_or_system_breaks_the_prefix() -> None:
    model = echo_model()
    await complete(model, request("a", [user_message("a" * 4000)]))
    other_tools = [ToolSchema(name="Bash", description="run", input_schema={"type": "object"})]
    done = await complete(model, request("b", [user_message("a" * 4000)], tools=other_tools))
    assert done.usage.cache_read_input_tokens == 0
    done = await complete(model, request("c", [user_message("a" * 4000)], system="t" * 400))
    assert done.usage.cache_read_input_tokens == 0
    # A different first message still shares the root (system + tools).
    done = await complete(model, request("d", [user_message("z" * 4000)]))
    assert done.usage.cache_read_input_tokens == 400 // 4


async def test_a_tool_array_is_told_by_its_schemas_content_in_order() -> None:
    """Every child gets a list of its own made of shared schema objects: the root is found
    by content whether the list or its schemas are new objects; order and content matter."""
    read = ToolSchema(name="Read", description="read", input_schema={"type": "object"})
    bash = ToolSchema(name="Bash", description="run", input_schema={"type": "object"})
    model = echo_model()
    await complete(model, request("a", [user_message("a" * 4000)], tools=[read, bash]))
    again = [
        [read, bash],  # the same schemas in a new list
        [ToolSchema(name="Read", description="read", input_schema={"type": "object"}), bash],
    ]
    for index, tools in enumerate(again):
        done = await complete(model, request(f"b{index}", [user_message("z")], tools=tools))
        assert done.usage.cache_read_input_tokens == 400 // 4
    changed = [
        [bash, read],
        [read, ToolSchema(name="Bash", description="run!", input_schema={"type": "object"})],
        [read, ToolSchema(name="Bash", description="run", input_schema={"type": "array"})],
        [read],
    ]
    for index, tools in enumerate(changed):
        done = await complete(model, request(f"c{index}", [user_message("z")], tools=tools))
        assert done.usage.cache_read_input_tokens == 0, tools


async def test_a_long_new_part_is_cache_creation() -> None:
    model = echo_model()
    long_text = "x" * (CACHE_WRITE_MIN_TOKENS * 4 + 400)
    done = await complete(model, request("a", [user_message(long_text)]))
    assert done.usage.cache_creation_input_tokens == (400 + len(long_text)) // 4
    assert done.usage.input_tokens == 0
    assert done.usage.cache_read_input_tokens == 0


async def test_fork_like_requests_read_at_least_90_percent_from_the_cache() -> None:
    model = echo_model()
    history: list[Message] = [user_message("task " + "h" * 20_000)]
    done = await complete(model, request("parent", history))
    history.append(done.message)
    history.append(user_message("tool output " + "r" * 10_000))
    done = await complete(model, request("parent", history))
    history.append(done.message)
    for index in range(5):
        fork = [*history, user_message(f"<fork_directive>job {index}</fork_directive>")]
        done = await complete(model, request(f"fork-{index}", fork, agent_type="fork"))
        assert done.usage.cache_read_input_tokens >= 0.9 * input_total(done.usage)


async def test_explicit_usage_is_used_as_written() -> None:
    written = {"input_tokens": 7, "output_tokens": 3}
    model = echo_model(usage=written)
    for agent in ("a", "b"):
        done = await complete(model, request(agent, [user_message("a" * 4000)]))
        assert done.usage.to_dict() == {
            "input_tokens": 7,
            "output_tokens": 3,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }


async def test_messages_are_fingerprinted_only_where_histories_branch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int] = []
    real = scripted_cache.message_fingerprint

    def counting(message: Message) -> int:
        seen.append(id(message))
        return real(message)

    monkeypatch.setattr(scripted_cache, "message_fingerprint", counting)
    model = echo_model()
    history: list[Message] = [user_message("start")]
    for turn in range(20):
        done = await complete(model, request("a", history))
        history += [done.message, user_message(f"result {turn}")]
    # One history growing call after call is never fingerprinted: nothing else follows its
    # prefixes, so there is nothing to tell its messages apart from.
    assert seen == []
    # Forks made while the parent waits for its tool results: its history so far (the same
    # message objects, its last answer included) and a directive each. They walk the parent's
    # prefixes by identity; the first one to branch off fingerprints nothing either.
    sent = history[:-1]
    directives = [user_message(f"directive {index}") for index in range(3)]
    done = await complete(model, request("fork-0", [*sent, directives[0]]))
    assert seen == []
    assert done.usage.cache_read_input_tokens > 0
    # The second fork at that point tells the two directives apart; each later one, its own.
    done = await complete(model, request("fork-1", [*sent, directives[1]]))
    assert seen == [id(directives[0]), id(directives[1])]
    assert done.usage.cache_read_input_tokens > 0
    await complete(model, request("fork-2", [*sent, directives[2]]))
    assert seen == [id(d) for d in directives]
    # The parent goes on past the branch: its own next message, once.
    done = await complete(model, request("a", history))
    assert seen == [*(id(d) for d in directives), id(history[-1])]
    chars = len(SYSTEM) + sum(map(scripted_cache.message_chars, history))
    assert done.usage.cache_read_input_tokens == (chars - len("result 19")) // 4


async def test_a_full_prefix_tree_starts_afresh_and_agents_keep_their_own_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scripted_cache, "MEMO_LIMIT", 3)
    model = echo_model()
    history: list[Message] = [user_message("a" * 4000)]
    done = await complete(model, request("a", history))  # the root and one prefix
    history += [done.message, user_message("r" * 40)]
    other = await complete(model, request("b", [user_message("a" * 4000), user_message("b")]))
    assert other.usage.cache_read_input_tokens == (400 + 4000) // 4  # a third prefix
    await complete(model, request("c", [user_message("c" * 40)]))  # the fourth: the tree is full
    # A new agent finds nothing served (the tree started afresh) ...
    fresh = await complete(model, request("d", [user_message("a" * 4000)]))
    assert fresh.usage.cache_read_input_tokens == 0
    # ... and an agent that was running goes on from its own prefixes.
    again = await complete(model, request("a", history))
    assert again.usage.cache_read_input_tokens == (400 + 4000) // 4
    assert input_total(again.usage) == (400 + 4000 + 2 + 40) // 4


async def test_session_with_five_forks_reads_from_the_cache(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text(
        "".join(f"line {i:04d} " + "w" * 90 + "\n" for i in range(400))
    )
    calls = [
        {"name": "Agent", "input": {"description": "forked job", "prompt": f"scope: part {i}"}}
        for i in range(5)
    ]
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "agent_type": "main",
                    "turns": [
                        {"tool_calls": [{"name": "Read", "input": {"file_path": "big.txt"}}]},
                        {"tool_calls": calls},
                        {"text": "merged"},
                    ],
                },
                {"agent_type": "fork", "turns": [{"text": "Scope: {{prompt}}\nResult: ok"}]},
            ]
        }
    )
    options = SessionOptions(model=model, cwd=tmp_path, config=RuntimeConfig(), transcripts=False)
    result = await Session(options).run("read big.txt, then fork five workers")
    assert result.subtype == "success", result.payload
    forks = [run for run in result.agents if run.agent_type == "fork"]
    assert len(forks) == 5
    for run in forks:
        assert run.usage.cache_read_input_tokens >= 0.9 * input_total(run.usage)
    totals = result.payload["usage"]
    assert totals["cache_read_input_tokens"] == sum(
        run.usage.cache_read_input_tokens for run in result.agents
    )


async def test_an_answer_is_counted_as_it_was_built_and_as_sent_again() -> None:
    """The characters an answer is remembered with (counted while building it: texts, rendered
    templates, tool inputs) are what ``message_chars`` counts of the message sent back."""
    turns = [
        {"text": "plain", "tool_calls": [{"name": "Read", "input": {"file_path": "/a/b"}}]},
        {"tool_calls": [{"name": "Note", "input": {"text": "{{prompt}}", "n": [1, {"k": "v"}]}}]},
        {"text": "said {{prompt}} twice: {{prompt}}"},
        {"tool_calls": []},
    ]
    model = ScriptedModel.from_dict({"agents": [{"turns": turns}]})
    history: list[Message] = [user_message("go")]
    for _ in turns:
        done = await complete(model, request("agent-x", history))
        state = model._agents["agent-x"].prefix
        assert state.answer is done.message
        assert state.answer_chars == scripted_cache.message_chars(done.message)
        # Every prefix's size, the answers' built counts among them, is a fresh count.
        assert state.tip is not None
        assert state.tip.size == len(SYSTEM) + sum(map(scripted_cache.message_chars, history))
        history += [done.message, user_message("next")]


def test_a_message_fingerprint_is_its_content() -> None:
    def tool_use(value: Any) -> Message:
        block: Any = {"type": "tool_use", "id": "t1", "name": "Note", "input": {"n": value}}
        return {"role": "assistant", "content": [block]}

    fingerprint = scripted_cache.message_fingerprint
    assert fingerprint(tool_use([1, {"a": "b"}])) == fingerprint(tool_use([1, {"a": "b"}]))
    assert len({fingerprint(tool_use(v)) for v in (1, 1.0, True, "1", None, [1])}) == 6
    assert fingerprint(user_message("a")) != fingerprint(user_message("b"))
    # What orjson refuses (an integer beyond 64 bits) is still fingerprinted, by its content.
    assert fingerprint(tool_use(1 << 70)) == fingerprint(tool_use(1 << 70))
    assert fingerprint(tool_use(1 << 70)) != fingerprint(tool_use(1 << 71))


def test_random_histories_read_the_longest_prefix_any_earlier_request_served() -> None:
    """Agents growing their histories, forks sending their parent's message objects, equal
    content in new objects, retries, a shortened history, another system or tool array: every
    answer's usage is what a plain search over all served prefixes (by content) gives."""
    rng = random.Random(9)
    texts = ["alpha " * 300, "beta " * 40, "gamma", "delta " * 700]
    answers = iter(rng.choice(texts[:3]) for _ in range(100_000))
    model = ScriptedModel.from_function(lambda req: {"text": next(answers)})
    systems = [SYSTEM, "t" * 5000]
    tools = [TOOLS, [*TOOLS, ToolSchema(name="Note", description="n", input_schema={})]]
    served: set[tuple[Any, ...]] = set()
    histories: dict[str, list[Message]] = {}
    setups: dict[str, tuple[str, list[ToolSchema]]] = {}
    for step in range(600):
        agent = rng.choice([*histories, f"agent-{step}"]) if histories else "agent-0"
        if agent not in histories or rng.random() < 0.05:
            parent = rng.choice(list(histories.values())) if histories else []
            # A fork sends its parent's message objects; others start afresh.
            start = parent[: rng.randrange(len(parent) + 1)] if rng.random() < 0.5 else []
            histories[agent] = [*start, user_message(rng.choice(texts))]
            system = rng.choice(systems)
            setups[agent] = (system, list(rng.choice(tools)))  # equal content, a new list
        history = histories[agent]
        if rng.random() < 0.05 and len(history) > 2:
            del history[rng.randrange(1, len(history)) :]  # a compaction, a resumed agent
        if rng.random() < 0.03:
            setups[agent] = (rng.choice(systems), rng.choice(tools))
        system, tool_list = setups[agent]
        req = request(agent, list(history), system=system, tools=tool_list)
        keys = [(system, tuple(scripted_cache.schema_fingerprint(t) for t in tool_list))]
        sizes = [len(system)]
        for message in history:
            keys.append(scripted_cache.message_fingerprint(message))
            sizes.append(sizes[-1] + scripted_cache.message_chars(message))
        prefixes = [tuple(keys[: n + 1]) for n in range(len(keys))]
        known = [n for n, prefix in enumerate(prefixes) if prefix in served]
        shared = sizes[max(known)] if known else 0
        served.update(prefixes)
        done = asyncio.run(complete(model, req))
        total = sizes[-1] // 4 or 1
        read = min(shared // 4, total)
        written = total - read if total - read >= CACHE_WRITE_MIN_TOKENS else 0
        assert (done.usage.cache_read_input_tokens, done.usage.cache_creation_input_tokens) == (
            read,
            written,
        ), step
        assert done.usage.input_tokens == total - read - written, step
        if rng.random() < 0.9:
            history += [done.message, user_message(rng.choice(texts))]
