"""The crash harness on Ray + PostgreSQL (issue 24 "Done when"): children on Ray host actors,
records in PostgreSQL, the driver CLI and the host workers SIGKILLed at random points.

Each run is the file harness's run (``test_crash_harness``: three Explore children and a
sleeper whose ``sleep 30`` shell outlives a kill; resume, a killed resume in every other run,
``resume_from`` of every interrupted child) with ``SUBAGENTS_EXECUTOR=ray`` and
``SUBAGENTS_STORE=postgresql://…``, one or two host actors, and one of four kills:

* ``driver-early`` — the driver, 0-2 s after its init event (while it connects to Ray and
  places the children, or soon after);
* ``driver-mid`` — the driver, 0-0.4 s after the sleeper's shell started on its host (the
  children are mid-turn there); its host actors end with it (Ray fate-shares a non-detached
  actor with its owner) and the next session reconciles the children from their durable
  transcripts;
* ``host`` — the sleeper's host worker process, the driver living on: the driver reconciles
  the children it lost at once (failed, "Ray worker was lost", resumable) and ends normally;
* ``host-then-driver`` — the host, then the driver 0-0.3 s later (in the middle of that
  reconciliation, or before it).

Checked as on one machine: 0 completed results lost, 0 duplicate (or missing) notifications,
every cut-off child resumable and resumed, no recorded shell alive — and here also: each child
ran in a host process (not the driver) and no host outlived its driver.

CI runs 8 runs, 4 at a time (every mode with one host and with two); ``SUBAGENTS_CRASH_RAY=1``
or ``SUBAGENTS_CRASH_SOAK=1`` runs the soak: at least 50 killed runs.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import script_args, wait_until_dead
from subagents.testing.pg_cluster import PgCluster
from subagents.testing.ray_cluster import RayCluster
from test_crash_harness import (
    MAX_RUNS,
    MIN_KILLED,
    RunTally,
    harness,
    read_session_id,
    restart_and_check,
    write_scripts,
)

SEED_RAY = 20_261_201
MODES = ("driver-early", "driver-mid", "host", "host-then-driver")
CI_RUNS = 8
CI_PARALLEL = 4


def crash_once_on_ray(index: int, root: Path, cluster: RayCluster, pg: PgCluster) -> RunTally:
    rng = random.Random(SEED_RAY + index)
    mode = MODES[index % len(MODES)]
    folder = root / f"run{index:03d}"
    project = folder / "project"
    project.mkdir(parents=True)
    marker = folder / "host.pid"
    crash_script, resume_script = write_scripts(
        folder, rng, sleeper_command=f"echo $PPID > {marker}; sleep 30"
    )
    env = {
        **os.environ,
        **cluster.env(),
        "SUBAGENTS_HOME": str(folder / "home"),
        "SUBAGENTS_EXECUTOR": "ray",
        "SUBAGENTS_STORE": pg.fresh_url(),
        "SUBAGENTS_RAY_HOSTS": str(1 + (index // len(MODES)) % 2),
    }
    tally = RunTally()
    session_id, host = kill_on_ray(crash_script, project, folder, env, rng, mode, tally)
    restart_and_check(index, folder, project, env, session_id, resume_script, rng, tally)
    if host is not None and not wait_until_dead(host, timeout_s=15):
        tally.problems.append(f"run {index} ({mode}): host {host} outlived its driver")
    tally.problems[:] = [f"{p} [{mode}]" for p in tally.problems]
    return tally


def kill_on_ray(
    script: Path,
    project: Path,
    folder: Path,
    env: dict[str, str],
    rng: random.Random,
    mode: str,
    tally: RunTally,
) -> tuple[str, int | None]:
    """Start the crash run and kill what ``mode`` says; the session id and the sleeper's host
    worker (None when the run was killed before the sleeper's shell started)."""
    args = script_args(
        script, "--permission-mode", "bypassPermissions", output_format="stream-json", prompt="go"
    )
    stem = folder / "crash"
    with stem.with_suffix(".out").open("wb") as out, stem.with_suffix(".err").open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "subagents", *args], cwd=project, env=env, stdout=out, stderr=err
        )
    host: int | None = None
    try:
        session_id = read_session_id(stem.with_suffix(".out"), proc)
        if mode == "driver-early":
            time.sleep(rng.uniform(0, 2.0))
            host = _read_pid(folder / "host.pid")
        else:
            host = _wait_for_host(folder / "host.pid", proc)
            if host == proc.pid:
                tally.problems.append(f"{folder.name}: the sleeper ran in the driver, not on Ray")
            time.sleep(rng.uniform(0, 0.4))
        if mode.startswith("host") and host is not None:
            tally.killed = _kill(host)
            if mode == "host-then-driver":
                time.sleep(rng.uniform(0, 0.3))
        if mode == "host":
            if proc.wait(timeout=180) != 0:
                tally.problems.append(f"{folder.name}: the driver failed after its host died")
        elif proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            tally.killed = True
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return session_id, host


def _wait_for_host(marker: Path, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> int:
    """The sleeper's host worker (its shell's parent), once that shell has started."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid = _read_pid(marker)
        if pid is not None:
            return pid
        if proc.poll() is not None:
            raise AssertionError(f"{marker.parent.name}: the run ended before the sleeper started")
        time.sleep(0.01)
    raise AssertionError(f"{marker.parent.name}: the sleeper did not start in {timeout_s:.0f} s")


def _read_pid(marker: Path) -> int | None:
    text = marker.read_text().strip() if marker.exists() else ""
    return int(text) if text.isdigit() else None


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.timeout(1800)
def test_sigkill_at_random_points_on_ray_and_postgresql(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    pg_cluster: PgCluster,
    ray_cluster: RayCluster,
) -> None:
    soak = "1" in (os.environ.get("SUBAGENTS_CRASH_RAY"), os.environ.get("SUBAGENTS_CRASH_SOAK"))
    tallies = harness(
        tmp_path,
        capsys,
        MIN_KILLED if soak else CI_RUNS - 2,
        MAX_RUNS if soak else CI_RUNS,
        run_once=lambda i, root: crash_once_on_ray(i, root, ray_cluster, pg_cluster),
        parallel=CI_PARALLEL,
    )
    # Both kinds of loss were exercised: a dead driver's children reconciled by the next
    # session, and a dead host's children reconciled by their living driver.
    assert sum(t.host_lost for t in tallies) > 0
    assert sum(t.leftovers_seen for t in tallies) > 0, "no sleeper shell was ever recorded"
