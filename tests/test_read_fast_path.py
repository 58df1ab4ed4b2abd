"""The file tools' short way (issue 20 item 3): a plain path opened without resolving it, a small
file on a local file system read (Read), written (Write) or edited (Edit) on the loop; Read's
short file numbered at once. Each test holds the short way to what the long way guarantees: the
same answer, no symlink followed outside, deny rules on the path that is opened, nothing
created where reading is denied, network file systems kept off the loop."""

from __future__ import annotations

import asyncio
import errno
import io
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.tools import beneath, confined
from subagents.tools import read as read_module
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolError, ToolOutput
from subagents.tools.edit import EditTool
from subagents.tools.read import MAX_FILE_BYTES, MAX_LINE_BYTES, ReadTool
from subagents.tools.write import WriteTool

READS = 300


@pytest.fixture(params=["openat2", "proc", "walk"])
def repo(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder; every test runs three times: plain paths opened whole (``openat2``),
    opened whole and checked through ``/proc`` (without ``ctypes`` or ``openat2``), and
    opened one component at a time (where neither can serve)."""
    monkeypatch.setattr(beneath, "_openat2_refused", request.param == "proc")
    monkeypatch.setattr(beneath, "_proc_refused", False)
    if request.param == "walk":
        monkeypatch.setattr(beneath, "_disabled", True)
    else:
        import ctypes  # loaded by something else in a real run (syncfs on a disk)

        assert ctypes
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    return root


def context(repo: Path, **extra: Any) -> ToolContext:
    agent = AgentRef(agent_id="a", agent_type="m")
    return ToolContext(cwd=repo, roots=(repo,), abort=AbortSignal(), agent=agent, **extra)


async def call_tool(tool: Tool[Any], ctx: ToolContext, **raw: Any) -> str:
    """The tool's answer, or ``error: MESSAGE``."""
    args = tool.input_model.model_validate(raw)
    try:
        out = await tool.call(args, ctx, CallInfo(tool_use_id="t", progress=lambda d: None))
    except ToolError as exc:
        return f"error: {exc}"
    assert isinstance(out, ToolOutput)
    return out.content


async def read(ctx: ToolContext, **raw: Any) -> str:
    return await call_tool(ReadTool(), ctx, **raw)


def long_way(data: bytes, offset: int | None, limit: int | None) -> str:
    stat = os.stat_result((0o100644, 0, 0, 1, 0, 0, len(data), 0, 0, 0))
    try:
        return read_module._answer(io.BytesIO(data), stat, "/f", offset, limit)
    except ToolError as exc:
        return f"error: {exc}"


def short_way(data: bytes, offset: int | None, limit: int | None) -> str:
    try:
        return read_module._answer_short(data, "/f", offset, limit)
    except ToolError as exc:
        return f"error: {exc}"


def random_text(rng: random.Random) -> bytes:
    pieces = [
        b"plain line",
        b"",
        b"caf\xc3\xa9 \xe2\x82\xac",
        b"broken \xe2\x82",  # a sequence cut short just before the line end
        b"\xff\xfe lone bytes",
        b"windows\r",
        b"\r",
        b"x" * rng.choice((1999, 2000, 2001, 5000)),
        b"\xc3\xa9" * 1500,  # 3,000 bytes, 1,500 characters
        b"\t tabs \t",
    ]
    lines = [rng.choice(pieces) for _ in range(rng.choice((0, 1, 2, 5, 40, 3000)))]
    data = b"\n".join(lines)
    if rng.random() < 0.5:
        data += b"\n"
    return data[:MAX_LINE_BYTES]


def test_the_short_way_answers_exactly_as_the_long_way() -> None:
    rng = random.Random(20)
    for _ in range(400):
        data = random_text(rng)
        offset = rng.choice((None, 0, 1, 2, 7, 2500, 10**6))
        limit = rng.choice((None, 1, 3, 2000, 2500))
        assert short_way(data, offset, limit) == long_way(data, offset, limit), (offset, limit)
    assert short_way(b"a\x00b", None, None) == long_way(b"a\x00b", None, None)
    assert short_way(b"", None, None) == long_way(b"", None, None)


async def test_a_reread_answers_from_the_bytes_read_now(repo: Path) -> None:
    """Reads of unchanged bytes may reuse an earlier answer (``_answer_again``), but only for
    the same bytes: a file rewritten at the same size with its timestamps put back, another
    range, another path with the same bytes, a file that became binary — each answered
    from what is read now, exactly as a first read."""
    ctx = context(repo)
    path = repo / "f.txt"
    path.write_text("one\ntwo\nsix\n")
    first = await read(ctx, file_path="f.txt")
    assert first == "     1\tone\n     2\ttwo\n     3\tsix"
    assert await read(ctx, file_path="f.txt") == first
    before = os.stat(path)
    path.write_text("uno\ndos\ntre\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert await read(ctx, file_path="f.txt") == "     1\tuno\n     2\tdos\n     3\ttre"
    assert await read(ctx, file_path="f.txt", offset=2, limit=1) == (
        "     2\tdos\n\n(Showing lines 2-2. More lines follow: continue with offset=3.)"
    )
    (repo / "g.txt").write_text("uno\ndos\ntre\n")
    assert await read(ctx, file_path="g.txt") == "     1\tuno\n     2\tdos\n     3\ttre"
    path.write_bytes(b"uno\x00dos\ntre\n")
    assert (await read(ctx, file_path="f.txt")).startswith(f"error: {path} looks like a binary")
    rng = random.Random(3)
    for _ in range(50):
        data = random_text(rng)[:4000]
        path.write_bytes(data)
        offset, limit = rng.choice((None, 2)), rng.choice((None, 3))
        fresh = short_way(data, offset, limit).replace("/f ", f"{path} ")
        assert await read(ctx, file_path="f.txt", offset=offset, limit=limit) == fresh
    for index in range(read_module._ANSWERS_KEPT + 5):  # what is kept stays bounded
        (repo / f"n{index}.txt").write_text(f"file {index}\n")
        assert await read(ctx, file_path=f"n{index}.txt") == f"     1\tfile {index}"
        assert len(read_module._answers) <= read_module._ANSWERS_KEPT


async def test_reads_racing_a_symlink_swap_never_show_outside(repo: Path) -> None:
    """``sub`` is swapped for a link to a folder holding a secret of the same name while Reads
    of ``sub/f.txt`` run: each answer is the file inside or a refusal, never the secret."""
    outside = repo.parent / "outside"
    (outside / "f.txt").write_text("TOP SECRET\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "f.txt").write_text("inside\n")
    stop, swapping = threading.Event(), threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        sub, real = repo / "sub", repo / "sub.real"
        while not stop.is_set():
            os.rename(sub, real)
            os.symlink(outside, sub)
            os.unlink(sub)
            os.rename(real, sub)
            swaps += 1
            swapping.set()
            time.sleep(0)  # a moment with the real folder in place

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    assert swapping.wait(10)  # the race is on before the first Read (a new thread may lag)
    ctx = context(repo)
    try:
        answers = []
        for _ in range(READS):  # one at a time, so the swapper runs between them
            answers.append(await read(ctx, file_path="sub/f.txt"))
            await asyncio.sleep(0)
    finally:
        stop.set()
        thread.join()
    assert swaps > 0
    assert not [a for a in answers if "SECRET" in a]
    # How many saw the folder in place depends on the scheduler; once it stays, Reads see it.
    assert await read(ctx, file_path="sub/f.txt") == "     1\tinside"


async def test_a_link_inside_is_followed_and_one_leading_outside_refused(repo: Path) -> None:
    outside = repo.parent / "outside"
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (repo / "real").mkdir()
    (repo / "real" / "f.txt").write_text("inside\n")
    (repo / "alias").symlink_to(repo / "real")
    (repo / "out").symlink_to(outside)
    (repo / "dangling").symlink_to(repo / "missing.txt")
    ctx = context(repo)
    assert await read(ctx, file_path="alias/f.txt") == "     1\tinside"
    assert str(repo / "real" / "f.txt") in ctx.read_files  # recorded under its real path
    refused = await read(ctx, file_path="out/secret.txt")
    assert "outside the working directory" in refused and "SECRET" not in refused
    assert (
        await read(ctx, file_path="dangling") == f"error: File does not exist: {repo}/missing.txt"
    )


async def test_a_link_swapped_in_for_a_plain_file_is_resolved_before_it_is_read(
    repo: Path,
) -> None:
    """The same path read twice: a file, then a link to outside in its place."""
    outside = repo.parent / "outside"
    (outside / "secret.txt").write_text("TOP SECRET\n")
    target = repo / "f.txt"
    target.write_text("inside\n")
    ctx = context(repo)
    assert await read(ctx, file_path="f.txt") == "     1\tinside"
    target.unlink()
    target.symlink_to(outside / "secret.txt")
    second = await read(ctx, file_path="f.txt")
    assert "outside the working directory" in second and "SECRET" not in second


class DenyEverything:
    def __init__(self) -> None:
        self.asked: list[Path | str] = []

    def read_denial(self, path: Path | str, *, asks: bool) -> str | None:
        self.asked.append(path)
        return f"denied {path}"


async def test_deny_rules_see_the_resolved_path_before_anything_is_read(repo: Path) -> None:
    (repo / "real").mkdir()
    (repo / "real" / "f.txt").write_text("secret inside\n")
    (repo / "alias").symlink_to(repo / "real")
    guard = DenyEverything()
    ctx = context(repo, read_guard=guard)
    assert await read(ctx, file_path="real/f.txt") == f"error: denied {repo}/real/f.txt"
    # Through a link: the resolved path is what the rules are asked about.
    assert await read(ctx, file_path="alias/f.txt") == f"error: denied {repo}/real/f.txt"
    assert ctx.read_files == {}


async def test_a_network_file_system_is_read_in_a_worker_thread(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "f.txt").write_text("over the network\n")
    threads: list[int] = []
    original = read_module._read_path

    def recording(*args: Any) -> Any:
        threads.append(threading.get_ident())
        return original(*args)

    monkeypatch.setattr(confined, "file_system_kind", lambda device: "nfs4")
    monkeypatch.setattr(read_module, "_read_path", recording)
    confined._root_is_local.cache_clear()
    confined._local_devices.clear()  # each device is asked about once per process
    try:
        assert await read(context(repo), file_path="f.txt") == "     1\tover the network"
    finally:
        confined._root_is_local.cache_clear()
        confined._local_devices.clear()
    assert threads and threads[0] != threading.get_ident()


async def test_long_files_and_files_growing_past_the_cap_are_streamed(repo: Path) -> None:
    big = repo / "big.txt"
    big.write_bytes(b"line\n" * (MAX_FILE_BYTES // 5 + 10))
    ctx = context(repo)
    assert "offset and limit" in await read(ctx, file_path="big.txt")
    tail = await read(ctx, file_path="big.txt", offset=52_000, limit=2)
    assert tail.startswith(" 52000\tline\n 52001\tline")
    fd = os.open(big, os.O_RDONLY)
    try:  # the size seen by fstat was small, the file is not (it grew meanwhile)
        assert read_module._whole(fd, 10) is None
    finally:
        os.close(fd)


async def test_write_and_edit_on_the_short_way_keep_the_guarantees(repo: Path) -> None:
    outside = repo.parent / "outside"
    (repo / "real").mkdir()
    (repo / "alias").symlink_to(repo / "real")
    (repo / "out").symlink_to(outside)
    ctx = context(repo)
    made = await call_tool(WriteTool(), ctx, file_path="new/deeper/f.txt", content="a\n")
    assert made.startswith(f"File created successfully at: {repo}/new/deeper/f.txt")
    # Through a link inside: written to where it leads, recorded under the resolved path.
    await call_tool(WriteTool(), ctx, file_path="alias/g.txt", content="b\n")
    assert (repo / "real" / "g.txt").read_text() == "b\n"
    assert str(repo / "real" / "g.txt") in ctx.read_files
    refused = await call_tool(WriteTool(), ctx, file_path="out/h.txt", content="c\n")
    assert "outside the working directory" in refused
    edited = await call_tool(
        EditTool(), ctx, file_path="alias/g.txt", old_string="b", new_string="B"
    )
    assert edited.startswith(f"The file {repo}/real/g.txt has been updated.")
    assert (repo / "real" / "g.txt").read_text() == "B\n"
    assert list(outside.iterdir()) == []


async def test_edit_creates_nothing_where_reading_is_denied(repo: Path) -> None:
    ctx = context(repo, read_guard=DenyEverything())
    answer = await call_tool(
        EditTool(), ctx, file_path="sub/new.txt", old_string="", new_string="x"
    )
    assert answer == f"error: denied {repo}/sub/new.txt"
    assert not (repo / "sub").exists()


async def test_a_context_whose_roots_or_cwd_change_reads_below_the_new_ones(repo: Path) -> None:
    """The resolved roots are kept per (roots, cwd) objects of a context: EnterWorktree
    assigns new ones, and the next Read goes by them, never by what an older call saw."""
    other = repo.parent / "other"
    other.mkdir()
    (repo / "f.txt").write_text("in the repo\n")
    (other / "f.txt").write_text("in the other tree\n")
    ctx = context(repo)
    assert await read(ctx, file_path="f.txt") == "     1\tin the repo"
    ctx.cwd, ctx.roots = other, (other,)
    assert await read(ctx, file_path="f.txt") == "     1\tin the other tree"
    assert "outside" in await read(ctx, file_path=str(repo / "f.txt"))
    ctx.roots = (other, repo)  # the same cwd, a root added: both trees are readable
    assert await read(ctx, file_path=str(repo / "f.txt")) == "     1\tin the repo"
    ctx.cwd = repo  # the same roots, another cwd: relative paths start there
    assert await read(ctx, file_path="f.txt") == "     1\tin the repo"
    assert await read(context(other), file_path="f.txt") == "     1\tin the other tree"


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("a" * 255, None),
        ("a" * 256, "one name in the path is 256 bytes long"),
        ("é" * 127, None),
        ("é" * 128, "one name in the path is 256 bytes long"),
        ("d/" * 300 + "f", None),
        ("d/" * 2047 + "ff", "the path is 4,096 bytes long"),
        ("a" * 200 + "\x00", "NUL byte"),
    ],
)
def test_path_text_is_measured_in_the_bytes_the_file_system_sees(
    path: str, error: str | None
) -> None:
    """A short ASCII path skips the byte count (one byte a character: nothing can be too
    long); every other path is counted in bytes, name by name and whole."""
    if error is None:
        assert ReadTool.input_model.model_validate({"file_path": path}).file_path == path
    else:
        with pytest.raises(ValueError, match=error):
            ReadTool.input_model.model_validate({"file_path": path})


def test_a_link_on_the_way_fails_the_whole_open_and_the_walk_decides(repo: Path) -> None:
    """``lstat`` follows a link before the last name, so it sees a regular file; the open
    itself follows none (``ELOOP``), and the caller resolves the path and confines it."""
    outside = repo.parent / "outside"
    (outside / "f.txt").write_text("TOP SECRET\n")
    (repo / "out").symlink_to(outside)
    path = f"{repo}/out/f.txt"
    opener = beneath.whole_opener(os.O_RDONLY)
    if opener is None:
        assert confined._open_whole(path, os.O_RDONLY) is None
        return
    with pytest.raises(OSError) as caught:
        opener(path, os.O_RDONLY | os.O_NOFOLLOW)
    assert caught.value.errno == errno.ELOOP
    with pytest.raises(confined.SymlinkOnPath):
        confined._open_whole(path, os.O_RDONLY)


def test_a_fifo_swapped_in_after_the_stat_is_closed_unread(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = repo / "pipe"
    os.mkfifo(fifo)
    regular = os.stat(__file__)
    real_stat = os.stat

    def stale(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        return regular if str(path) == str(fifo) else real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stale)  # the stat saw a file; a FIFO is there at the open
    if beneath._disabled:
        assert confined._open_whole(str(fifo), os.O_RDONLY) is None
        return
    with pytest.raises(ToolError, match="named pipe"):
        confined._open_whole(str(fifo), os.O_RDONLY)


TTY_CHILD = """
import asyncio, os, sys
from pathlib import Path
from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.tools import beneath
from subagents.tools.base import CallInfo, ToolContext, ToolError
from subagents.tools.read import ReadTool

way = sys.argv[1]
beneath._openat2_refused, beneath._proc_refused = way == "proc", False
beneath._disabled = way == "walk"
if way == "openat2":
    import ctypes  # loaded by something else in a real run (syncfs on a disk)
master, slave = os.openpty()  # the terminal's own open is O_NOCTTY (openpty)
tty = os.ttyname(slave)
os.close(slave)
regular, real_stat = os.stat(sys.executable), os.stat

def stale(path, *args, **kwargs):  # the lstat saw a file; the terminal is there at the open
    found = real_stat(path, *args, **kwargs)
    return regular if str(path) in (tty, os.path.basename(tty)) else found

os.stat = stale
folder = Path(os.path.dirname(tty))
agent = AgentRef(agent_id="a", agent_type="m")
ctx = ToolContext(cwd=folder, roots=(folder,), abort=AbortSignal(), agent=agent)
args = ReadTool.input_model.model_validate({"file_path": tty})
try:
    asyncio.run(ReadTool().call(args, ctx, CallInfo(tool_use_id="t", progress=lambda d: None)))
except ToolError as exc:
    print("refused:", exc)
try:
    os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
except OSError as exc:
    print("no controlling terminal:", exc.errno == 6)  # ENXIO
else:
    print("the terminal became the controlling terminal")
"""


@pytest.mark.parametrize("way", ["openat2", "proc", "walk"])
def test_a_terminal_swapped_in_does_not_become_the_controlling_terminal(way: str) -> None:
    """Opening a tty without ``O_NOCTTY`` makes it the controlling terminal of a session leader
    that has none (``subagents -p`` under ``setsid``); a Read that meets one swapped in after
    its ``lstat`` refuses it without that, each way it opens a path."""
    done = subprocess.run(
        [sys.executable, "-c", TTY_CHILD, way],
        capture_output=True,
        text=True,
        start_new_session=True,  # a session leader without a controlling terminal
        timeout=60,
        check=True,
    )
    assert "refused:" in done.stdout and "a device" in done.stdout, done.stdout + done.stderr
    assert "no controlling terminal: True" in done.stdout, done.stdout + done.stderr


async def test_a_kernel_without_openat2_is_asked_once_then_another_way_serves(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctypes

    asked: list[bytes] = []

    def refusing(path: bytes, flags: int) -> int:
        asked.append(path)
        ctypes.set_errno(errno.ENOSYS)
        return -1

    walk_only = beneath._disabled or beneath._openat2_refused
    monkeypatch.setattr(beneath, "_make_opener", lambda: refusing)
    monkeypatch.setattr(beneath, "_openat2_refused", beneath._openat2_refused)  # restored after
    (repo / "f.txt").write_text("one\n")
    ctx = context(repo)
    assert await read(ctx, file_path="f.txt") == "     1\tone"
    assert await read(ctx, file_path="f.txt") == "     1\tone"
    assert len(asked) == (0 if walk_only else 1)


def test_ctypes_is_never_loaded_for_openat2_alone(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading ``ctypes`` costs what ~300-400 Reads save: without it in ``sys.modules``, the
    walk serves and nothing imports it."""
    import sys

    monkeypatch.delitem(sys.modules, "ctypes", raising=False)
    (repo / "f.txt").write_text("one\n")
    assert asyncio.run(read(context(repo), file_path="f.txt")) == "     1\tone"
    assert "ctypes" not in sys.modules
    assert beneath.open_no_symlinks(str(repo / "f.txt"), os.O_RDONLY) is None


async def test_without_proc_the_walk_serves_and_proc_is_not_asked_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An open checked through ``/proc`` that ``/proc`` cannot name (not mounted) is closed,
    the walk reads the file, and later opens do not try ``/proc`` again."""
    asked: list[str] = []

    def missing(path: str) -> str:
        asked.append(path)
        raise FileNotFoundError(errno.ENOENT, "no /proc", path)

    monkeypatch.setattr(beneath, "_openat2_refused", True)
    monkeypatch.setattr(os, "readlink", missing)
    (repo / "f.txt").write_text("one\n")
    ctx = context(repo)
    assert await read(ctx, file_path="f.txt") == "     1\tone"
    assert await read(ctx, file_path="f.txt") == "     1\tone"
    assert len(asked) == (0 if beneath._disabled else 1)
    assert beneath.whole_opener(os.O_RDONLY) is None


def test_only_read_only_opens_are_checked_after_the_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """An open through ``/proc``'s check reaches a file before it is known to be the right
    one: only an open that writes nothing (no write access, ``O_TRUNC`` or ``O_CREAT``) may."""
    monkeypatch.setattr(beneath, "_disabled", False)
    monkeypatch.setattr(beneath, "_openat2_refused", True)
    monkeypatch.setattr(beneath, "_proc_refused", False)
    assert beneath.whole_opener(os.O_RDONLY) is beneath.open_then_check
    for flags in (os.O_RDWR, os.O_WRONLY, os.O_RDONLY | os.O_TRUNC, os.O_RDONLY | os.O_CREAT):
        assert beneath.whole_opener(flags) is None
