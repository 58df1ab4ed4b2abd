"""Binding an agent to its script entry (SPEC §19: the first entry in file order whose type fits
and whose ``match`` regex searches the prompt) is the same with the literal index
(``models/script_binding.py``) as a plain scan of every entry."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from subagents.messages import user_message
from subagents.models.base import ModelError, ModelRequest, RequestMetadata, complete
from subagents.testing import ScriptedModel

PATTERNS = [
    "^job 1$",
    "^job 2$",
    "^job 1$",  # a literal twice: the first one wins
    "^job 1\n$",
    "^$",
    "job [12]$",
    "^job 1",
    "(?i)^JOB 2$",
    r"^job 2\.$",
    "^job 3.$",
    "^(job) (3)$",
    None,
]
PROMPTS = ["job 1", "job 1\n", "job 1\n\n", "job 2", "JOB 2", "job 2.", "job 3", "job 3x", "", "\n"]
TYPES = ["main", "general-purpose", None]


def plain_scan(entries: list[dict[str, Any]], agent_type: str, prompt: str) -> str | None:
    """What binding means, written out: the first fitting entry's text, rendered."""
    for index, entry in enumerate(entries):
        if entry.get("agent_type") not in (None, agent_type):
            continue
        if "match" not in entry:
            return f"entry {index}"
        found = re.search(entry["match"], prompt)
        if found is not None:
            return f"entry {index} [{found.group(0)}] {list(found.groups())}"
    return None


def entry(index: int, pattern: str | None, agent_type: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"turns": [{"text": f"entry {index}"}]}
    if pattern is not None:
        groups = re.compile(pattern).groups
        shown = " ".join(f"'{{{{match.{n}}}}}'" for n in range(1, groups + 1))
        spec = {"match": pattern, "turns": [{"text": f"entry {index} [{{{{match.0}}}}] [{shown}]"}]}
    if agent_type is not None:
        spec["agent_type"] = agent_type
    return spec


def rendered(text: str) -> str:
    """The script's text for the groups, in ``plain_scan``'s spelling."""
    head, _, groups = text.partition("] [")
    if not groups:
        return text
    values = re.findall(r"'([^']*)'", groups)
    return f"{head}] {values}"


async def bound_text(model: ScriptedModel, agent_id: str, agent_type: str, prompt: str) -> str:
    meta = RequestMetadata(agent_id=agent_id, agent_type=agent_type, prompt=prompt)
    request = ModelRequest(
        model="scripted", system="", messages=[user_message(prompt or ".")], tools=[], metadata=meta
    )
    done = await complete(model, request)
    content = done.message["content"]
    assert isinstance(content, list)
    return rendered("".join(b["text"] for b in content if b["type"] == "text"))


@pytest.mark.parametrize("seed", range(40))
async def test_binding_with_the_index_is_the_first_match_in_file_order(seed: int) -> None:
    rng = random.Random(seed)
    entries = [entry(i, rng.choice(PATTERNS), rng.choice(TYPES)) for i in range(rng.randint(1, 12))]
    model = ScriptedModel.from_dict({"agents": entries}, keep_requests=False)
    for n, prompt in enumerate(PROMPTS):
        agent_type = rng.choice(["main", "general-purpose", "Explore"])
        expected = plain_scan(entries, agent_type, prompt)
        if expected is None:
            with pytest.raises(ModelError, match="no script entry matches"):
                await bound_text(model, f"agent{n}", agent_type, prompt)
        else:
            assert await bound_text(model, f"agent{n}", agent_type, prompt) == expected


async def test_a_fan_out_script_binds_each_child_to_its_own_literal_entry() -> None:
    children = [
        {"agent_type": "general-purpose", "match": f"^job {i}$", "turns": [{"text": f"c{i}"}]}
        for i in range(300)
    ]
    model = ScriptedModel.from_dict({"agents": children[::-1]}, keep_requests=False)
    for i in range(300):
        assert await bound_text(model, f"a{i}", "general-purpose", f"job {i}") == f"c{i}"
    with pytest.raises(ModelError, match="no script entry matches"):
        await bound_text(model, "other", "general-purpose", "job 300")
