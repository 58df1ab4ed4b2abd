"""A seeded, bounded fuzz of tool inputs through the loop (issue 13: "0 crashes, 0 hangs").

A scripted model (a Python function per turn) answers every turn of the main agent with a
handful of malformed or hostile calls of the tools the session actually offers, read from the
schemas in the request (so a tool added later is fuzzed too): wrong types, missing and unknown
fields, huge strings, NUL bytes, lone surrogates, deep JSON, special paths (``/dev/zero``,
``/proc/…``, a FIFO, a symlink loop, links out of the project), absurd numbers. Children it
starts answer at once. Then it says "survived".

Asserted: the run ends normally with that text, within a time bound; every call got exactly one
result; no result reports an internal exception type (an ``AttributeError`` in a result is a
bug, not an error message); nothing outside the project was written, and neither a denied file
nor a file outside the project was ever shown. Bash is denied by a rule, so its permission path
(the parser) is fuzzed but no generated command runs.

``SUBAGENTS_FUZZ_SOAK=1`` runs many more seeds and turns (not in CI).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest

from subagents.config import RuntimeConfig
from subagents.models.base import ModelRequest
from subagents.session import Session, SessionOptions
from subagents.testing import ScriptedModel

SOAK = os.environ.get("SUBAGENTS_FUZZ_SOAK") == "1"
SEEDS = range(200) if SOAK else range(12)
TURNS = 80 if SOAK else 15
CALLS_PER_TURN = 6
SECRET = "hunter2-secret-value"
OUTSIDE_SECRET = "outside-secret-value"
INTERNAL_ERRORS = re.compile(
    r"\b(AttributeError|TypeError|KeyError|IndexError|UnboundLocalError|NameError|"
    r"AssertionError|RecursionError|ZeroDivisionError|UnicodeEncodeError|"
    r"UnicodeDecodeError|NotImplementedError)\b"
)


def deep(depth: int) -> Any:
    value: Any = "leaf"
    for index in range(depth):
        value = {"k": value} if index % 2 else [value]
    return value


def special_paths(project: Path) -> list[str]:
    return [
        "/dev/zero",
        "/dev/null",
        "/dev/stdin",
        "/proc/self/mem",
        "/proc/self/environ",
        "/proc/1/root/etc/hostname",
        "/proc/self/root/etc/passwd",
        "/etc/passwd",
        "fifo",
        "loop_a/x",
        "loop_a",
        "out_link/secret.txt",
        "out_file",
        "zero_link",
        "secret/key.txt",
        "sub/../secret/key.txt",
        "../outside/secret.txt",
        "~/../../etc/passwd",
        "a\x00b",
        "new\nline.txt",
        "s\ud800.txt",
        "x" * 5000,
        "/" * 300,
        ".",
        "",
        " ",
        str(project),
        "dir/",
        "created.txt",
        "notes/deep/new.txt",
    ]


def strings(rng: random.Random, project: Path, field: str) -> Any:
    pool: list[Any] = [
        "",
        "\x00",
        "\ud800",
        "\udc80\udcff",
        "\u202e\u2066evil",
        "x" * rng.choice([10, 10_000, 300_000]),
        "line\n" * 2000,
        "(unclosed",
        "a" * 100 + "(?=" * 50,
        "[[:alpha:]]+",
        "(a+)+$",
        "\\p{L}+",
        "*" * 50,
        "**/**/**/*",
        "{a,{b,{c,d}}}" * 20,
        "$(rm -rf /)",
        "`reboot`",
        "'; DROP TABLE x; --",
        "%s%s%n",
        "\r\n\r\n",
        "TOKEN",
        "general-purpose",
        "Explore",
        "main",
    ]
    if "path" in field or field in ("pattern", "glob"):
        pool += special_paths(project) * 2
    return rng.choice(pool).replace("{{", "{ {")


def wrong_value(rng: random.Random) -> Any:
    return rng.choice(
        [
            None,
            True,
            0,
            -1,
            2**63,
            10**40,
            1.5,
            1e308,
            [],
            ["a", 1],
            {},
            {"nested": {"x": 1}},
            deep(rng.choice([50, 200])),
        ]
    )


def value_for(rng: random.Random, project: Path, name: str, schema: dict[str, Any]) -> Any:
    if rng.random() < 0.15:
        return wrong_value(rng)
    kinds = [schema.get("type")] + [option.get("type") for option in schema.get("anyOf", [])]
    if "enum" in schema:
        return rng.choice([*schema["enum"], "not-a-mode"])
    if "integer" in kinds or "number" in kinds:
        return rng.choice([0, 1, 5, -5, 999_999_999, 2**31, 10**20])
    if "boolean" in kinds:
        return rng.choice([True, False])
    return strings(rng, project, name)


def fuzz_input(rng: random.Random, project: Path, schema: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    raw: dict[str, Any] = {}
    for name, field_schema in properties.items():
        if name in required and rng.random() < 0.1:
            continue  # a missing required field
        if name not in required and rng.random() < 0.5:
            continue
        raw[name] = value_for(rng, project, name, field_schema)
    if rng.random() < 0.1:
        raw[rng.choice(["unknown", "__proto__", "file_path ", "-x"])] = "extra"
    return raw


class Fuzzer:
    """The scripted model's turn function: fuzzed calls for main, a quick answer for children."""

    def __init__(self, seed: int, project: Path) -> None:
        self.rng = random.Random(seed)
        self.project = project
        self.turns = 0
        self.calls = 0
        self.names: set[str] = set()

    def __call__(self, request: ModelRequest) -> dict[str, Any]:
        if request.metadata.agent_type != "main":
            return {"text": "child answered"}
        self.turns += 1
        if self.turns > TURNS:
            return {"text": "survived"}
        # The first turn calls every tool once; later turns pick at random.
        picks = (
            list(request.tools)
            if self.turns == 1
            else [self.rng.choice(request.tools) for _ in range(CALLS_PER_TURN)]
        )
        calls = []
        for tool in picks:
            self.names.add(tool.name)
            calls.append(
                {"name": tool.name, "input": fuzz_input(self.rng, self.project, tool.input_schema)}
            )
        self.calls += len(calls)
        return {"tool_calls": calls}


def make_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "secret").mkdir(parents=True)
    (project / "secret" / "key.txt").write_text(f"TOKEN={SECRET}\n")
    (project / "sub").mkdir()
    (project / "created.txt").write_text("hello\nTOKEN line\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(OUTSIDE_SECRET)
    os.mkfifo(project / "fifo")
    (project / "loop_a").symlink_to("loop_b")
    (project / "loop_b").symlink_to("loop_a")
    (project / "out_link").symlink_to(outside, target_is_directory=True)
    (project / "out_file").symlink_to(outside / "secret.txt")
    (project / "zero_link").symlink_to("/dev/zero")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Bash", "Read(./secret/**)", "Edit(./secret/**)"]}})
    )
    return project


def result_blocks(messages: list[Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in messages
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def text_of(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return json.dumps(content)


@pytest.mark.timeout(900 if SOAK else 120)
@pytest.mark.parametrize("seed", SEEDS)
async def test_hostile_tool_inputs_never_crash_hang_or_escape(tmp_path: Path, seed: int) -> None:
    project = make_project(tmp_path)
    outside_before = sorted(p.name for p in (tmp_path / "outside").iterdir())
    fuzzer = Fuzzer(seed, project)
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_function(fuzzer),
            cwd=project,
            home=tmp_path / "home",
            permission_mode="acceptEdits",
            background_wait_ms=20_000,
            # The checks below read every result in the live history; a compaction (tested on
            # its own) would clear or summarise the large ones away before they are read.
            config=RuntimeConfig(autocompact=False),
        )
    )
    # The denial breaker would end the fuzzing after 20 denials (it has tests of its own).
    session.permissions.denial_limits = None
    result = await asyncio.wait_for(session.run("fuzz"), 100 if not SOAK else 800)
    assert not result.is_error, result.payload
    assert result.result == "survived", result.payload
    main = session.agents[0]
    blocks = result_blocks(main.messages)
    assert len(blocks) == fuzzer.calls  # one result per call, none lost
    problems = []
    for block in blocks:
        text = text_of(block)
        if SECRET in text or OUTSIDE_SECRET in text or "root:x:0:0" in text:
            problems.append(f"leak: {text[:300]!r}")
        if block.get("is_error") and (not text.strip() or INTERNAL_ERRORS.search(text)):
            problems.append(f"unclear error: {text[:300]!r}")
    assert problems == [], "\n".join(problems[:20])
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == outside_before
    assert (tmp_path / "outside" / "secret.txt").read_text() == OUTSIDE_SECRET
    assert (project / "secret" / "key.txt").read_text() == f"TOKEN={SECRET}\n"
    assert {"Read", "Write", "Edit", "Glob", "Grep", "Bash"} <= fuzzer.names
