"""Running ``rg``, the search engine Claude Code uses, for Grep and Glob when it is installed.

Where it comes from: the ``ripgrep`` wheel (the ``search`` extra) puts an ``rg`` binary next to
the interpreter; otherwise ``rg`` on ``PATH``. ``SUBAGENTS_RIPGREP`` overrides: ``0``/``off``
uses the pure-Python search (``walk.py``), a path names the binary. Without ``rg`` everything
still works, only slower.

How it is run: arguments as a list (no shell), ``--no-config`` (a user's ``RIPGREP_CONFIG_PATH``
cannot change what the model sees), ``--null`` separators (any file name parses), stdin on
``/dev/null``, in its own process group, killed with the group on cancellation; at most
``MAX_OUTPUT_BYTES`` of its output is kept, then it is killed and the answer says it was cut.
Started by ``processes.start_piped`` and waited for through a pidfd — not asyncio's
subprocess machinery, half of a Grep's or Glob's CPU in this process (docs/performance.md,
session 13); asyncio's way where there are no pidfds. Ignore rules as the Python
walk applies them: ``.gitignore`` (nested, with or without a git repository:
``--no-require-git``), ``.ignore``, ``.git/info/exclude``; no global gitignore
(``--no-ignore-global``), so both engines see the same files; version-control folders never.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from subagents.descriptors import process_slot, retry_on_emfile
from subagents.processes import (
    CappedOutput,
    Piped,
    PipeReader,
    have_pidfds,
    kill_group,
    reap,
    reap_later,
    start_piped,
    wait_exited,
)

VCS_DIRS = (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")
"""Version-control folders: never walked by Grep or Glob, hidden or not."""
MAX_OUTPUT_BYTES = 32 * 1024 * 1024
_REAP_TIMEOUT_S = 5.0
_STDERR_KEPT = 1 << 16
_OFF = frozenset({"0", "off", "false", "no"})


@dataclass(frozen=True, slots=True)
class RgResult:
    """What one ``rg`` run printed. ``truncated``: it was stopped at ``MAX_OUTPUT_BYTES``."""

    stdout: bytes
    stderr: str
    code: int | None
    truncated: bool = False

    @property
    def regex_error(self) -> bool:
        """``rg`` refused the pattern (its syntax is Rust's, not Python's)."""
        return self.code == 2 and "regex parse error" in self.stderr


def ripgrep_binary() -> str | None:
    """The ``rg`` to run, or None for the Python search (see the module docstring)."""
    return _find(os.environ.get("SUBAGENTS_RIPGREP", ""))


@functools.lru_cache(maxsize=8)
def _find(setting: str) -> str | None:
    if setting.strip().lower() in _OFF:
        return None
    if setting.strip():
        return setting if os.access(setting, os.X_OK) else None
    beside = Path(sys.executable).parent / "rg"
    if os.access(beside, os.X_OK):
        return str(beside)
    import shutil  # here: a -p run that never greps does not load it (nor bz2, lzma)

    return shutil.which("rg")


def common_args(*, hidden: bool) -> list[str]:
    """The walk options every Grep and Glob run of ``rg`` shares."""
    args = ["--no-config", "--no-messages", "--no-require-git", "--no-ignore-global", "--null"]
    if hidden:
        args.append("--hidden")
    for name in VCS_DIRS:
        args += ["--glob", f"!{name}"]
    return args


async def run_rg(binary: str, args: Sequence[str]) -> RgResult:
    """Run ``rg`` to its end (or to the output cap); cancellation kills its process group. It
    holds a process slot while it runs (``descriptors``)."""
    async with process_slot():
        return await _run(binary, args)


async def _run(binary: str, args: Sequence[str]) -> RgResult:
    """``rg`` waited for through a pidfd (``processes.start_piped``: no child-watcher thread,
    no transports); where there are no pidfds, through asyncio's subprocesses."""
    if not have_pidfds():
        return await _run_asyncio(binary, args)
    argv = (binary, *args)

    async def start() -> Piped:
        return start_piped(argv, cwd=None, env=None, with_input=False)

    proc = await retry_on_emfile(start)

    def stop() -> None:
        # Past the cap rg is stopped (its group killed while it is unreaped); what it wrote
        # up to the cap is kept, the rest read and dropped.
        proc.kill_group()

    out = CappedOutput(MAX_OUTPUT_BYTES, on_full=stop)
    err = CappedOutput(_STDERR_KEPT)  # read to the end (a full pipe would stall rg)
    readers = PipeReader(out.feed), PipeReader(err.feed)
    code: int | None = None
    try:
        await asyncio.gather(readers[0].read_from(proc.stdout), readers[1].read_from(proc.stderr))
        await wait_exited(proc.pidfd)
        with contextlib.suppress(ChildProcessError):  # reaped by code that waits for any child
            code = reap(proc.pidfd)
    except BaseException:
        proc.kill_group()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):  # bounded, and immune
            await asyncio.wait_for(asyncio.shield(_reaped(proc)), _REAP_TIMEOUT_S)  # to a 2nd
        raise
    finally:
        for reader in readers:
            reader.stop()
        proc.close()  # reaped by now, or its pidfd handed to a thread that reaps it
    return RgResult(
        stdout=bytes(out.kept),
        stderr=err.kept.decode(errors="replace"),
        code=code,
        truncated=len(out.kept) >= MAX_OUTPUT_BYTES,
    )


async def _reaped(proc: Piped) -> None:
    """Reap a killed ``rg`` (immediate after its SIGKILL, unless it is stuck in the kernel:
    then a daemon thread reaps it whenever it ends)."""
    try:
        await asyncio.wait_for(wait_exited(proc.pidfd), _REAP_TIMEOUT_S / 2)
    except TimeoutError:
        reap_later(proc)
        return
    with contextlib.suppress(ChildProcessError):
        reap(proc.pidfd)


async def _run_asyncio(binary: str, args: Sequence[str]) -> RgResult:
    proc = await retry_on_emfile(
        lambda: asyncio.create_subprocess_exec(
            binary,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    )
    try:
        (out, truncated), err = await asyncio.gather(_read_capped(proc), _read_stderr(proc))
        code = await proc.wait()
    except BaseException:
        kill_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):  # bounded, and immune
            await asyncio.wait_for(asyncio.shield(proc.wait()), _REAP_TIMEOUT_S)  # to a 2nd one
        raise
    return RgResult(stdout=out, stderr=err.decode(errors="replace"), code=code, truncated=truncated)


async def _read_capped(proc: asyncio.subprocess.Process) -> tuple[bytes, bool]:
    assert proc.stdout is not None
    chunks: list[bytes] = []
    size = 0
    while chunk := await proc.stdout.read(1 << 20):
        chunks.append(chunk)
        size += len(chunk)
        if size >= MAX_OUTPUT_BYTES:
            kill_group(proc.pid, signal.SIGKILL)
            return b"".join(chunks)[:MAX_OUTPUT_BYTES], True
    return b"".join(chunks), False


async def _read_stderr(proc: asyncio.subprocess.Process) -> bytes:
    # Read to the end (a full pipe would stall rg), keep the head: errors are short.
    assert proc.stderr is not None
    head = b""
    while chunk := await proc.stderr.read(1 << 16):
        head = (head + chunk)[: 1 << 16]
    return head


def split_null(data: bytes) -> list[str]:
    """``--null`` separated paths (``--files``, ``-l``) as text."""
    return [os.fsdecode(part) for part in data.split(b"\0") if part]
