"""The process benches' floor (``bench/bare_spawn.py``) runs what it says it runs.

``bash_bench.py`` and ``hook_bench.py`` set the runtime's process calls beside a command run
with no runtime; that floor is only a floor if it starts the command, feeds it, reads all of
its output and sees its exit status, and the rounds only compare kinds fairly if every kind
runs once per round in the same order.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(BENCH))
    import bare_spawn

    yield bare_spawn
    for name in ("bench", "bare_spawn", "bash_bench", "hook_bench"):
        sys.modules.pop(name, None)


def run(bare: ModuleType, command: str, tmp: Path, **kw: object) -> tuple[int, int]:
    return asyncio.run(bare.bare_run("/bin/sh", command, tmp, dict(os.environ), **kw))


def test_merged_output_is_read_to_its_end(bare: ModuleType, tmp_path: Path) -> None:
    assert run(bare, "seq 1 20000", tmp_path, merge=True) == (0, 108_894)
    assert run(bare, "echo out; echo error >&2; exit 3", tmp_path, merge=True) == (3, 10)


def test_both_pipes_and_stdin(bare: ModuleType, tmp_path: Path) -> None:
    data = b"x" * 5000
    assert run(bare, "cat; echo e >&2", tmp_path, data=data) == (0, 5002)
    assert run(bare, "read line; exit 7", tmp_path, data=b"one\n") == (7, 0)
    # stdin is /dev/null without data: cat ends at once.
    assert run(bare, "cat; pwd", tmp_path) == (0, len(str(tmp_path)) + 1)


def test_rounds_interleave_every_kind(bare: ModuleType) -> None:
    order: list[str] = []

    def measure(name: str, value: float) -> bare.Measure:  # type: ignore[name-defined]
        async def go() -> float:
            order.append(name)
            return value + len(order)

        return go

    figures = asyncio.run(bare.interleaved({"a": measure("a", 0), "b": measure("b", 100)}, 2))
    assert order == ["a", "b", "a", "b", "a", "b"]
    assert figures == {"a": [3, 5], "b": [104, 106]}


def test_both_benches_run_their_floor(
    bare: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import bash_bench
    import hook_bench

    assert (
        bash_bench.main(["--n", "2", "--rounds", "1", "--only", "floor", "--dir", str(tmp_path)])
        == 0
    )
    assert (
        hook_bench.main(["--n", "2", "--rounds", "1", "--only", "floor", "--dir", str(tmp_path)])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    for kind in ("floor: true ", "floor: echo hi ", "floor: 100 KB ", "floor "):
        assert any(line.startswith(kind) and " median " in line for line in lines), kind
