"""``rg``'s process (``tools.ripgrep.run_rg``, behind Grep and Glob), both ways it is run:
through a pidfd (``processes.start_piped``) and through asyncio's subprocesses — its output,
status and stderr, its stdin on ``/dev/null``, the output cap, and no process or descriptor
left behind by the cap or a cancellation."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from subagents.tools import ripgrep
from subagents.tools.ripgrep import run_rg


@pytest.fixture
def rg() -> str:
    binary = ripgrep.ripgrep_binary()
    if binary is None:
        pytest.skip("no rg here")
    return binary


def our_rg_children() -> list[int]:
    """rg processes whose parent is this process, zombies included (not yet reaped)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        if comm == "rg" and int(rest.split()[1]) == os.getpid():
            found.append(int(name))
    return found


async def test_output_status_and_stderr(way: str, rg: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one needle\nno\n")
    result = await run_rg(rg, ["--no-config", "-n", "needle", str(tmp_path)])
    assert (result.code, result.truncated) == (0, False)
    assert result.stdout == f"{tmp_path / 'a.txt'}:1:one needle\n".encode()
    missing = await run_rg(rg, ["--no-config", "nothing-like-this", str(tmp_path)])
    assert (missing.code, missing.stdout) == (1, b"")
    bad = await run_rg(rg, ["--no-config", "(unclosed", str(tmp_path)])
    assert bad.code == 2 and bad.regex_error and "regex" in bad.stderr


async def test_stdin_is_not_a_pipe(
    way: str, rg: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With no path, rg searches its stdin when that is a pipe or a file, else the folder.
    (tmp_path / "found.txt").write_text("needle\n")
    monkeypatch.chdir(tmp_path)
    result = await run_rg(rg, ["--no-config", "-l", "needle"])
    assert result.stdout == b"found.txt\n"


async def test_past_the_cap_rg_is_stopped_and_reaped(
    way: str, rg: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ripgrep, "MAX_OUTPUT_BYTES", 10_000)
    (tmp_path / "big.txt").write_text("needle line\n" * 200_000)  # 2.4 MB of matches
    before = len(os.listdir("/proc/self/fd"))
    result = await run_rg(rg, ["--no-config", "needle", str(tmp_path / "big.txt")])
    assert result.truncated and len(result.stdout) == 10_000 and result.code == -9
    assert result.stdout.startswith(b"needle line\n")
    assert our_rg_children() == []
    assert len(os.listdir("/proc/self/fd")) <= before


async def test_a_cancelled_search_leaves_no_rg(way: str, rg: str, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # rg blocks opening it: a search that never ends by itself
    before = len(os.listdir("/proc/self/fd"))
    task = asyncio.create_task(run_rg(rg, ["--no-config", "x", str(fifo)]))
    for _ in range(500):
        if our_rg_children():
            break
        await asyncio.sleep(0.01)
    assert our_rg_children()
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert our_rg_children() == []
    assert len(os.listdir("/proc/self/fd")) <= before
