"""The Python floor (``bench/python_floor.py``) writes what the runtime writes.

The floor is the figure beside the library and swarm rows that says how far under the runtime
a runtime written in Python could go while doing SPEC's work. It is only a floor if it does
that work: the same files per child, the same record fields, a transcript line for each
message and turn. These tests run the floor and the runtime on the same small scripts and
compare what each left on disk.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents import RuntimeConfig

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture
def floor_modules(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[object, object]]:
    monkeypatch.syspath_prepend(str(BENCH))
    import bench
    import python_floor

    yield bench, python_floor
    for name in ("bench", "python_floor"):
        sys.modules.pop(name, None)


def runtime_files(bench: object, tmp: Path, script: dict[str, object]) -> Path:
    calls = asyncio.run(bench.run_once(script, tmp, RuntimeConfig()))  # type: ignore[attr-defined]
    assert calls[0] > 0
    (agents,) = tmp.glob("home/projects/*/agents")
    return agents


def shape(agents: Path) -> tuple[list[set[str]], list[list[str]], set[str]]:
    """Per child: its record's keys; its transcript's line kinds; the folder's other names."""
    records = sorted(agents.glob("*.json"))
    keys = [set(json.loads(path.read_bytes())) for path in records]
    kinds = []
    for path in sorted(agents.glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        kinds.append(
            [line["type"] + ":" + line.get("message", {}).get("role", "") for line in lines]
        )
    others = {path.name for path in agents.iterdir() if path.suffix not in (".json", ".jsonl")}
    return keys, kinds, others


@pytest.mark.parametrize(("n", "k"), [(2, 3), (3, 1)])
def test_a_floor_fanout_leaves_the_runtimes_files(
    floor_modules: tuple[object, object], tmp_path: Path, n: int, k: int
) -> None:
    bench, floor = floor_modules
    ours = runtime_files(bench, tmp_path / "runtime", bench.fanout_script(n, k, 0))  # type: ignore[attr-defined]
    (tmp_path / "floor").mkdir()
    script = floor.script_for("fanout", n, k)  # type: ignore[attr-defined]
    calls = asyncio.run(floor.session(str(tmp_path / "floor"), script, 0.0, 10))  # type: ignore[attr-defined]
    assert calls == 2 + n * k  # the same model calls as the runtime's fan-out
    our_keys, our_kinds, our_others = shape(ours)
    floor_keys, floor_kinds, floor_others = shape(tmp_path / "floor" / "agents")
    assert len(floor_keys) == len(our_keys) == n
    assert floor_keys == our_keys  # every field of the runtime's record, no fewer
    assert floor_kinds == our_kinds  # a line per message and per turn, as the runtime's
    assert floor_others == our_others  # the marker and spare folders


def test_a_floor_swarm_notifies_its_coordinator(
    floor_modules: tuple[object, object], tmp_path: Path
) -> None:
    _, floor = floor_modules
    script = floor.script_for("swarm", 4, 2)  # type: ignore[attr-defined]
    calls = asyncio.run(floor.session(str(tmp_path), script, 0.0, 4))  # type: ignore[attr-defined]
    assert calls >= 2 + 4 * 2 + 1  # launches, the children, at least one turn taking notices
    records = [json.loads(p.read_bytes()) for p in (tmp_path / "agents").glob("*.json")]
    assert [r["status"] for r in records] == ["completed"] * 4
    assert all(r["isBackground"] for r in records)
    (session,) = (tmp_path / "sessions").glob("*.jsonl")
    text = session.read_text()
    assert text.count("<task-notification>") == 4  # every child's notice reached a turn
