"""``DurableRecords.start_shape``: a child's config snapshot and running template, the last
answer again for the very same parts, type, parent and placement — what ``config_from`` and
``running_template`` answer (kept here as the reference), call for call."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from subagents.state import ProjectState
from subagents.store import FileStore
from subagents.store.durable import DurableRecords
from subagents.store.records import ConfigSnapshot
from subagents.store.writer import DurableWriter


def _records(home: Path) -> DurableRecords:
    store = FileStore(ProjectState(home=home, project=Path("/p")))
    return DurableRecords(store=store, writer=DurableWriter(), session_id="s", project_path="/p")


class Part:
    """A part of a snapshot that compares equal to any other Part of its value."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Part) and other.value == self.value

    def __hash__(self) -> int:
        return self.value


@pytest.mark.parametrize("seed", range(6))
def test_start_shape_answers_as_config_from_and_running_template(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    fast, slow = _records(tmp_path / "fast"), _records(tmp_path / "slow")
    objects = [Part(i % 3) for i in range(6)]  # equal in threes, distinct objects
    types = ["worker", "".join(["wor", "ker"]), "Explore"]  # equal, not the same object
    parents: list[str | None] = ["s", None, "a00000007"]
    placements: list[Any] = [True, False, 1, 0]
    builds: list[int] = []
    seen_fast: dict[int, int] = {}
    seen_slow: dict[int, int] = {}

    def shape_of(parts: tuple[object, ...]) -> ConfigSnapshot:
        builds.append(1)
        return ConfigSnapshot(model=f"m{sum(p.value for p in parts if isinstance(p, Part))}")

    kept: list[object] = []  # (alive, so that no id is reused)

    def ident(seen: dict[int, int], value: object) -> int:
        kept.append(value)
        return seen.setdefault(id(value), len(seen))

    last: tuple[Any, ...] = ((objects[0],) * 3, types[0], parents[0], placements[0])
    for step in range(400):
        draw = rng.random()
        parts, agent_type, parent, background = last
        if draw < 0.3:  # a sibling of another kind: one of the four changed
            which = rng.randrange(4)
            if which == 0:
                slot = rng.randrange(3)
                parts = (*parts[:slot], rng.choice(objects), *parts[slot + 1 :])
            elif which == 1:
                agent_type = rng.choice(types)
            elif which == 2:
                parent = rng.choice(parents)
            else:
                background = rng.choice(placements)
        elif draw < 0.45:  # anything
            parts = tuple(rng.choice(objects) for _ in range(3))
            agent_type = rng.choice(types)
            parent = rng.choice(parents)
            background = rng.choice(placements)
        last = (parts, agent_type, parent, background)

        def build(p: tuple[object, ...] = parts) -> ConfigSnapshot:
            return shape_of(p)

        config, template = fast.start_shape(parts, build, agent_type, parent, background)
        reference = slow.config_from(parts, build)
        expected = slow.running_template(agent_type, parent, background, reference)
        assert config == reference and (template is None) is (expected is None), step
        if template is not None and expected is not None:
            assert template.values == expected.values
            assert template.values["config"] is config
        # The same sharing: a result is new exactly where the reference's is.
        assert ident(seen_fast, config) == ident(seen_slow, reference), step
        assert ident(seen_fast, template) == ident(seen_slow, expected), step
    assert len(builds) < 400  # most answers were shared
