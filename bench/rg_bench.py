"""What one ``rg`` run behind Grep or Glob costs this process (``tools.ripgrep.run_rg``).

Every Grep and every Glob call starts ``rg`` once. Measured: N ``run_rg`` calls in a row,
``rg --files`` (Glob's) and ``rg -l PATTERN`` (Grep's default mode) over a small tree of 30
files, against the floor of the same command started N times with no runtime
(``posix_spawn``, stdout and stderr on pipes read by the loop, waited for through a pidfd).
CPU is ``time.process_time()``: this process, every thread; ``rg``'s own is not in it.

Run: ``python bench/rg_bench.py`` (5 interleaved rounds of N = 200); compare trees with
``PYTHONPATH=/other/tree/src``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from subagents.tools.ripgrep import common_args, ripgrep_binary, run_rg


def tree(base: Path) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="rg-", dir=base))
    for i in range(30):
        sub = folder / f"d{i % 5}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i}.py").write_text(f"def f{i}():\n    return {i}  # needle {i % 3}\n")
    return folder


async def calls(binary: str, args: list[str], n: int) -> float:
    cpu0 = time.process_time()
    for _ in range(n):
        result = await run_rg(binary, args)
        if result.code not in (0, 1):
            raise RuntimeError(f"rg failed: {result}")
    return time.process_time() - cpu0


async def floor(binary: str, args: list[str], n: int) -> float:
    loop = asyncio.get_running_loop()
    cpu0 = time.process_time()
    for _ in range(n):
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        pid = os.posix_spawn(
            binary,
            [binary, *args],
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, null, 0),
                (os.POSIX_SPAWN_DUP2, out_w, 1),
                (os.POSIX_SPAWN_DUP2, err_w, 2),
            ],
            setsid=True,
        )
        for fd in (null, out_w, err_w):
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        done = {fd: loop.create_future() for fd in (out_r, err_r, pidfd)}

        def readable(
            fd: int, done: dict[int, asyncio.Future[None]] = done, pidfd: int = pidfd
        ) -> None:
            if fd == pidfd or not os.read(fd, 65536):
                loop.remove_reader(fd)
                done[fd].set_result(None)

        for fd in done:
            os.set_blocking(fd, False)
            loop.add_reader(fd, readable, fd)
        await asyncio.gather(*done.values())
        os.waitid(os.P_PIDFD, pidfd, os.WEXITED)
        for fd in done:
            os.close(fd)
    return time.process_time() - cpu0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default="/dev/shm")
    args = parser.parse_args(argv)
    binary = ripgrep_binary()
    if binary is None:
        print("no rg here", file=sys.stderr)
        return 1
    folder = tree(Path(args.dir))
    walk = common_args(hidden=False)
    kinds = {
        "Glob (rg --files)": ["--files", *walk, "--", str(folder)],
        "Grep (rg -l)": ["-l", *walk, "--", "needle 1", str(folder)],
    }
    figures: dict[str, list[float]] = {}

    async def run() -> None:
        for argv_ in kinds.values():  # warm-up
            await calls(binary, argv_, 5)
            await floor(binary, argv_, 5)
        for _ in range(args.rounds):
            for name, argv_ in kinds.items():
                figures.setdefault(name, []).append(await calls(binary, argv_, args.n))
                figures.setdefault(f"{name} floor", []).append(await floor(binary, argv_, args.n))

    try:
        asyncio.run(run())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"# N = {args.n}, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
    for name, cpus in figures.items():
        per = [cpu / args.n * 1e3 for cpu in cpus]
        shown = " ".join(f"{v:.3f}" for v in per)
        print(f"{name:26} median {median(per):.3f} ms of CPU per run   ({shown})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
