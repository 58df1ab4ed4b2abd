"""``TaskRegistry.create`` builds its ``TaskState`` without the dataclass's keyword ``__init__``
(``tasks._new_task``) and checks a given id once: the same tasks, errors and output files as
the dataclass construction and the double check it replaced (kept here as the reference)."""

from __future__ import annotations

import dataclasses
import os
import random
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from subagents import ids
from subagents.agents import tasks
from subagents.agents.tasks import TaskOutputError, TaskRegistry, TaskState, TaskType

TYPES: list[str] = [*sorted(tasks.TASK_TYPES), "bogus"]


class ReferenceRegistry(TaskRegistry):
    """``create`` as it was: the dataclass's ``__init__``, the id checked by ``create`` and
    again by ``create_output_file``."""

    def create(
        self,
        type: TaskType,
        *,
        description: str,
        owner_agent_id: str,
        session_id: str,
        output_dir: Path | None = None,
        task_id: str | None = None,
    ) -> TaskState:
        if type not in tasks.TASK_TYPES:
            raise ValueError(
                f"Unknown task type {type!r}; expected one of {sorted(tasks.TASK_TYPES)}"
            )
        if self._ended:
            self.evict_expired()
        if task_id is not None and (not ids.is_valid_id(task_id) or task_id in self._tasks):
            raise ValueError(f"task id {task_id!r} is malformed or already registered")
        task_id = task_id or self._fresh_id(type)
        output = tasks.create_output_file(output_dir, task_id) if output_dir is not None else None
        task = TaskState(
            id=task_id,
            type=type,
            description=description,
            owner_agent_id=owner_agent_id,
            session_id=session_id,
            output_file=output,
        )
        self._tasks[task_id] = task
        return task


def test_new_task_is_the_dataclass_value_field_by_field() -> None:
    rng = random.Random(7)
    for _ in range(200):
        values = {
            "id": ids.new_id(),
            "type": rng.choice(sorted(tasks.TASK_TYPES)),
            "description": rng.choice(["", "d", "swarm 3", "é" * rng.randrange(5)]),
            "owner_agent_id": rng.choice(["", "main", ids.new_id()]),
            "session_id": rng.choice(["s", "971d13a7"]),
            "output_file": rng.choice([None, "/tmp/x.output", "rel/y.output"]),
        }
        before = time.time()
        made = tasks._new_task(
            values["id"],
            values["type"],
            values["description"],
            values["owner_agent_id"],
            values["session_id"],
            values["output_file"],
        )
        after = time.time()
        reference = TaskState(**values)
        # Every field, in field order, and nothing else: a field added to TaskState later
        # fails here until ``_new_task`` sets it.
        assert list(vars(made)) == [f.name for f in dataclasses.fields(TaskState)]
        assert before <= made.created_at <= after
        assert dataclasses.replace(made, created_at=reference.created_at) == reference
        assert made.extra == {} and made.extra is not reference.extra
        assert type(made) is TaskState


def _outcome(registry: TaskRegistry, root: Path, call: dict[str, Any]) -> Any:
    """What one create did: the error, or the task's fields with its output file as found."""
    try:
        task = registry.create(**call)
    except (ValueError, TaskOutputError) as exc:
        return type(exc).__name__, str(exc).replace(str(root), "<root>")
    fields = dataclasses.asdict(task)
    fields.pop("created_at")
    output = fields.pop("output_file")
    if output is None:
        found = None
    else:
        info = os.lstat(output)
        found = (output.replace(str(root), "<root>"), stat.S_IMODE(info.st_mode), info.st_size)
    if call.get("task_id") is None:
        assert ids.is_valid_id(fields.pop("id"))  # drawn: differs between the two registries
        found = found and (os.path.basename(found[0]) == f"{task.id}.output", *found[1:])
    return fields, found, registry.find(task.id) is task


@pytest.mark.parametrize("seed", range(6))
def test_create_matches_the_reference_on_random_calls(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    roots = [tmp_path / "new", tmp_path / "old"]
    clock = [0.0]
    registries = [
        TaskRegistry(evict_grace_s=rng.choice([0.0, 5.0]), clock=lambda: clock[0]),
        ReferenceRegistry(evict_grace_s=rng.choice([0.0, 5.0]), clock=lambda: clock[0]),
    ]
    registries[1].evict_grace_s = registries[0].evict_grace_s
    known: list[str] = []
    for step in range(120):
        kind = rng.random()
        if kind < 0.15 and known:  # end one, so creates evict
            task_id = rng.choice(known)
            for registry in registries:
                if registry.find(task_id) is not None:
                    registry.finish(task_id, "completed")
            clock[0] += rng.choice([0.0, 3.0, 10.0])
            continue
        choice = rng.random()
        if choice < 0.35:
            task_id: str | None = None
        elif choice < 0.6:
            task_id = ids.new_id(rng.choice(sorted(ids.TYPE_LETTERS)))
        elif choice < 0.8 and known:
            task_id = rng.choice(known)  # registered already (or evicted since)
        else:
            task_id = rng.choice(["", "A12345678", "a1234567", "../escape", "a12345678x", "x" * 9])
        call: dict[str, Any] = {
            "type": rng.choice(TYPES),
            "description": f"task {step}",
            "owner_agent_id": rng.choice(["", "main"]),
            "session_id": "s",
            "task_id": task_id,
        }
        with_output = rng.random() < 0.6
        planted = rng.random() < 0.1 and task_id is not None and ids.is_valid_id(task_id)
        outcomes = []
        for registry, root in zip(registries, roots, strict=True):
            folder = root / "tasks"
            if planted:
                folder.mkdir(parents=True, exist_ok=True)
                target = folder / f"{task_id}.output"
                if not os.path.lexists(target):
                    target.symlink_to(root / "elsewhere")
            outcomes.append(
                _outcome(registry, root, {**call, "output_dir": folder if with_output else None})
            )
        assert outcomes[0] == outcomes[1], (step, call)
        if task_id is not None and not isinstance(outcomes[0][0], str):
            known.append(task_id)
    assert len(registries[0]._tasks) == len(registries[1]._tasks)
