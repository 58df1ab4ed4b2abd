"""Writes, edits and reads cannot be raced outside the root, and special files never hang a tool
(issue 13 items 4 and 7).

The race test swaps a directory of the project for a symlink to a folder outside, in a loop on
a thread, while Writes into that directory run; every write either lands inside or is refused.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolError, ToolOutput
from subagents.tools.confined import open_confined
from subagents.tools.edit import EditTool
from subagents.tools.notebook_edit import NotebookEditTool
from subagents.tools.read import ReadTool
from subagents.tools.write import WriteTool

WRITES = 300


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    return root


def context(repo: Path) -> ToolContext:
    return ToolContext(
        cwd=repo, roots=(repo,), abort=AbortSignal(), agent=AgentRef(agent_id="a", agent_type="m")
    )


async def call(tool: Tool[Any], ctx: ToolContext, **raw: Any) -> ToolOutput | str:
    args = tool.input_model.model_validate(raw)
    try:
        return await tool.call(args, ctx, CallInfo(tool_use_id="t", progress=lambda d: None))
    except ToolError as exc:
        return str(exc)
    except OSError as exc:  # before the fix a raced write could fail this way
        return f"unexpected {exc!r}"


class Swapper(threading.Thread):
    """Swaps ``repo/sub`` between a real directory and a symlink to ``outside``, endlessly."""

    def __init__(self, repo: Path, outside: Path) -> None:
        super().__init__(daemon=True)
        self.repo, self.outside = repo, outside
        self.stop = threading.Event()
        self.swapping = threading.Event()
        """Set after the first swap: the race is on before the writes start (under load a
        new thread may not run at all while 300 quick writes do)."""
        self.swaps = 0

    def run(self) -> None:
        sub, real = self.repo / "sub", self.repo / "sub.real"
        while not self.stop.is_set():
            try:
                os.rename(sub, real)
                os.symlink(self.outside, sub)
                os.unlink(sub)
                os.rename(real, sub)
                self.swaps += 1
                self.swapping.set()
            except OSError:
                # A write made "sub" anew in a gap: put the real one back and go on.
                if sub.is_dir() and not sub.is_symlink() and real.exists():
                    for child in real.iterdir():
                        child.unlink()
                    real.rmdir()


async def test_writes_racing_a_symlink_swap_never_land_outside(repo: Path) -> None:
    outside = repo.parent / "outside"
    (repo / "sub").mkdir()
    ctx = context(repo)
    swapper = Swapper(repo, outside)
    swapper.start()
    assert swapper.swapping.wait(10)
    try:
        results = await asyncio.gather(
            *(call(WriteTool(), ctx, file_path=f"sub/f{i}.txt", content="x") for i in range(WRITES))
        )
    finally:
        swapper.stop.set()
        swapper.join()
    assert swapper.swaps > 0
    assert list(outside.iterdir()) == []
    refused = [r for r in results if isinstance(r, str)]
    assert not [r for r in refused if r.startswith("unexpected")]
    assert len(refused) < WRITES  # the swap did not simply stop every write


def test_a_symlink_on_the_way_is_refused_not_followed(repo: Path) -> None:
    outside = repo.parent / "outside"
    (outside / "secret.txt").write_text("TOP SECRET")
    (repo / "link").symlink_to(outside)
    # The path as resolve_path would have passed it before the swap: "link" a plain folder.
    with pytest.raises(ToolError, match="symbolic link"):
        open_confined(repo / "link" / "secret.txt", (repo,), os.O_RDONLY)
    (repo / "file.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(ToolError, match="symbolic link"):
        open_confined(repo / "file.txt", (repo,), os.O_WRONLY | os.O_TRUNC)
    assert (outside / "secret.txt").read_text() == "TOP SECRET"


async def test_notebook_edit_swapped_to_a_link_after_its_check_changes_nothing_outside(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NotebookEdit checks the path on the loop and edits in a worker thread: a folder swapped
    for a link to a folder outside in between must not lead the edit there."""
    notebook = '{"cells": [{"cell_type": "code", "source": ["1"], "metadata": {}}], "nbformat": 4}'
    (repo / "sub").mkdir()
    (repo / "sub" / "nb.ipynb").write_text(notebook)
    outside = repo.parent / "outside"
    (outside / "nb.ipynb").write_text(notebook)
    to_thread = asyncio.to_thread

    async def swapped_first(function: Any, *args: Any) -> Any:
        (repo / "sub").rename(repo / "sub-before")
        (repo / "sub").symlink_to(outside)
        return await to_thread(function, *args)

    monkeypatch.setattr(asyncio, "to_thread", swapped_first)
    out = await call(
        NotebookEditTool(), context(repo), notebook_path="sub/nb.ipynb", cell_id="0", new_source="2"
    )
    assert isinstance(out, str) and "outside" in out, out
    assert (outside / "nb.ipynb").read_text() == notebook
    assert (repo / "sub-before" / "nb.ipynb").read_text() == notebook


# --- special files (item 7, the tools' part) -------------------------------------------------


@pytest.fixture
def fifo(repo: Path) -> Path:
    path = repo / "pipe"
    os.mkfifo(path)
    return path


@pytest.mark.timeout(20)
async def test_no_file_tool_blocks_on_a_fifo(repo: Path, fifo: Path) -> None:
    ctx = context(repo)
    for tool, raw in [
        (ReadTool(), {"file_path": "pipe"}),
        (WriteTool(), {"file_path": "pipe", "content": "x"}),
        (EditTool(), {"file_path": "pipe", "old_string": "a", "new_string": "b"}),
        (EditTool(), {"file_path": "pipe", "old_string": "", "new_string": "b"}),
    ]:
        result = await asyncio.wait_for(call(tool, ctx, **raw), 5)
        assert isinstance(result, str) and "pipe" in result, (tool.name, result)


@pytest.mark.timeout(20)
async def test_read_and_edit_refuse_devices_named_through_a_link(repo: Path) -> None:
    (repo / "zero").symlink_to("/dev/zero")
    ctx = context(repo)
    # /dev/zero is outside the root: refused by confinement before any read.
    read = await call(ReadTool(), ctx, file_path="zero", offset=1, limit=1)
    assert isinstance(read, str) and "outside" in read


async def test_read_holds_one_endless_line_in_bounded_memory(repo: Path) -> None:
    path = repo / "long.txt"
    path.write_bytes(b"y" * (3 * 1024 * 1024) + b"\nend\n")
    out = await call(ReadTool(), context(repo), file_path="long.txt", offset=1, limit=2)
    assert isinstance(out, ToolOutput)
    first, second = out.content.split("\n")[:2]
    assert f"{3 * 1024 * 1024 - 2000} more characters" in first
    assert second == "     2\tend"


async def test_edit_keeps_the_file_it_read(repo: Path) -> None:
    (repo / "f.txt").write_text("alpha beta\n")
    out = await call(
        EditTool(), context(repo), file_path="f.txt", old_string="beta", new_string="b"
    )
    assert isinstance(out, ToolOutput)
    assert (repo / "f.txt").read_text() == "alpha b\n"
    big = await call(WriteTool(), context(repo), file_path="s.txt", content="a\ud800")
    assert isinstance(big, str) and "surrogate" in big and "content" in big
