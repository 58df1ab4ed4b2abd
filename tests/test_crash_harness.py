"""Crash harness (issue 5 "Done when"): SIGKILL the real CLI at random moments, restart, check.

Each run starts ``python -m subagents -p`` in its own project and ``SUBAGENTS_HOME`` with a
script whose main agent launches three background children (their two turns — a Glob call, then
the report — are delayed by 0-400 ms in all) and waits for their notifications. The session id is
read from the ``init`` event; after a random, seeded delay of 0-600 ms the process gets SIGKILL.
The durable sidecars are read, then the session is resumed with ``--resume`` (in every other
run that resumed session is itself SIGKILLed 0-150 ms after its start — often in the middle of
recovery — and resumed once more) and checked:

* 0 completed results lost: a child ``completed`` before the kill is ``completed`` after the
  restart with the same result;
* 0 duplicate notifications: in the resumed session's transcript every background child's
  ``<task-id>`` appears in exactly one notification (none missing either);
* every child running at the kill is ``failed`` with ``restartRecovery: interrupted`` and
  resumable — or ``completed`` when its durable turn had finished — and a third run of the same
  session resumes each interrupted child with ``Agent(resume_from=…)``: the new run completes and
  its lineage names the source;
* no process group a child recorded (a ``sleep 30`` shell that survives the SIGKILL) is alive.

Runs go 8 at a time; the harness launches runs until at least 50 were killed mid-run and prints
the counts (runs, killed mid-run, completed kept, interrupted, resumed).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import agent_call, run_script, script_args, tool_call
from subagents.agents.orphan_processes import is_our_group, read_groups
from subagents.state import ProjectState
from subagents.store import FileStore, SidecarRecord
from subagents.store.postgres import PostgresStore
from subagents.store.transcript import read_records
from subagents.testing.pg_cluster import PgCluster

SEED = 20_261_130
MIN_KILLED = 50
MIN_KILLED_PG = 8
MAX_RUNS = 120
PARALLEL = 8
CHILDREN = 3
TASK_ID = re.compile(r"<task-id>([A-Za-z0-9_-]+)</task-id>")


@dataclass
class RunTally:
    killed: bool = False
    nothing_durable: bool = False
    resume_killed: bool = False
    completed_kept: int = 0
    interrupted: int = 0
    recovered_completed: int = 0
    host_lost: int = 0
    """Children failed by their driver when their Ray host died (``lost_its_host``)."""
    resumed: int = 0
    notifications: int = 0
    lost: int = 0
    leftovers_seen: int = 0
    duplicates: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def counts_as_killed(self) -> bool:
        """Killed mid-run after the session had written something to recover."""
        return self.killed and not self.nothing_durable


def child_entry(k: int, rng: random.Random) -> dict[str, Any]:
    total = rng.randint(0, 400)
    first = rng.randint(0, total)
    return {
        "agent_type": "Explore",
        "match": f"token (C{k})$",
        "turns": [
            {"tool_calls": [tool_call("Glob", pattern="*")], "delay_ms": first},
            {"text": f"report {{{{match.1}}}} {rng.random():.6f}", "delay_ms": total - first},
        ],
    }


def sleeper(command: str = "sleep 30") -> dict[str, Any]:
    """A child whose shell outlives a SIGKILL of the runtime: recovery must kill it."""
    return {
        "agent_type": "general-purpose",
        "match": "token (SLEEP)$",
        "turns": [
            {"tool_calls": [tool_call("Bash", command=command)], "delay_ms": 50},
            {"text": "slept"},
        ],
    }


def launch(k: int | str, agent_type: str = "Explore") -> dict[str, Any]:
    prompt = f"token {k}" if isinstance(k, str) else f"token C{k}"
    return agent_call(prompt, agent_type, description=f"bg {k}", run_in_background=True)


def write_scripts(
    folder: Path, rng: random.Random, sleeper_command: str = "sleep 30"
) -> tuple[Path, Path]:
    launches = [launch(k) for k in range(CHILDREN)] + [launch("SLEEP", "general-purpose")]
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": launches},
            {"text": "waiting"},
            *({"text": "heard {{last_user}}"} for _ in range(CHILDREN + 2)),
        ],
    }
    children = [child_entry(k, rng) for k in range(CHILDREN)]
    first = folder / "crash.json"
    first.write_text(json.dumps({"agents": [main, *children, sleeper(sleeper_command)]}))
    resume_main = {"agent_type": "main", "turns": [{"text": f"resumed {i}"} for i in range(6)]}
    second = folder / "resume.json"
    second.write_text(json.dumps({"agents": [resume_main]}))
    return first, second


def read_session_id(out: Path, proc: subprocess.Popen[bytes], deadline_s: float = 30) -> str:
    """The session id from the ``init`` event (the first stream-json line)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        text = out.read_text() if out.exists() else ""
        if "\n" in text:
            event = json.loads(text.split("\n", 1)[0])
            assert event["type"] == "system" and event["subtype"] == "init", event
            return str(event["session_id"])
        if proc.poll() is not None and "\n" not in out.read_text():
            raise AssertionError(f"CLI ended without an init event: {proc.returncode}")
        time.sleep(0.005)
    raise AssertionError("no init event within 30 s")


def records(home: Path, project: Path, env: dict[str, str]) -> dict[str, SidecarRecord]:
    """The durable records of the run: in its files, or in the database ``SUBAGENTS_STORE``
    names (the PostgreSQL variant)."""
    url = env.get("SUBAGENTS_STORE")
    if not url:
        store = FileStore(ProjectState(home=home, project=project))
        return {r.agent_id: r for r in store.list_agents(project)}
    database = PostgresStore(url)
    try:
        return {r.agent_id: r for r in database.list_agents(project)}
    finally:
        database.close()


def notification_counts(transcript: Path) -> Counter[str]:
    """How often each task id appears in a notification the main agent received (user messages,
    every line of the file — committed or not)."""
    counts: Counter[str] = Counter()
    for record in read_records(transcript):
        message = record.get("message")
        if record.get("type") != "message" or message["role"] != "user":
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            if block.get("type") == "text" and "<task-notification>" in block["text"]:
                counts.update(TASK_ID.findall(block["text"]))
    return counts


def crash_once(index: int, root: Path, store_url: Callable[[], str] | None = None) -> RunTally:
    rng = random.Random(SEED + index)
    folder = root / f"run{index:03d}"
    project = folder / "project"
    home = folder / "home"
    project.mkdir(parents=True)
    crash_script, resume_script = write_scripts(folder, rng)
    env = {**os.environ, "SUBAGENTS_HOME": str(home)}
    if store_url is not None:
        env["SUBAGENTS_STORE"] = store_url()
    tally = RunTally()
    session_id = kill_at_random(crash_script, project, folder, env, rng, tally)
    restart_and_check(index, folder, project, env, session_id, resume_script, rng, tally)
    return tally


def restart_and_check(
    index: int,
    folder: Path,
    project: Path,
    env: dict[str, str],
    session_id: str,
    resume_script: Path,
    rng: random.Random,
    tally: RunTally,
) -> None:
    """After the kill: read the durable records, resume the session (in every other run that
    resumed session is killed too and resumed once more), check, resume interrupted children."""
    home = Path(env["SUBAGENTS_HOME"])
    canonical = Path(os.path.realpath(project))
    before = records(home, canonical, env)
    transcript = ProjectState(home=home, project=canonical).session_transcript(session_id)
    if not transcript.exists():
        # Killed before the session wrote anything: there is nothing to resume (and --resume
        # rightly refuses an unknown session); no child can have started either.
        if before:
            tally.problems.append(f"run {index}: children {list(before)} but no transcript")
        tally.nothing_durable = True
        return
    if index % 2:  # the resumed session is itself killed, then resumed again
        args = script_args(
            resume_script, "--resume", session_id, output_format="stream-json", prompt="continue"
        )
        _, tally.resume_killed = start_and_kill(
            args, project, folder / "resume-crash", env, rng.uniform(0, 0.15)
        )
    resumed = run_script(
        resume_script, project, "--resume", session_id, prompt="continue", env=env, timeout=120
    )
    if resumed.code != 0:
        tally.problems.append(f"run {index}: resume failed: {resumed.stderr[-500:]}")
        return
    after = records(home, canonical, env)
    check_after_restart(index, before, after, tally)
    check_no_leftovers(index, home, tally)
    check_notifications(index, after, notification_counts(transcript), tally)
    resume_interrupted(index, folder, project, env, session_id, home, canonical, tally)


def kill_at_random(
    script: Path,
    project: Path,
    folder: Path,
    env: dict[str, str],
    rng: random.Random,
    tally: RunTally,
) -> str:
    """Start the crash run, read its session id, SIGKILL it 0-600 ms later."""
    command = script_args(script, output_format="stream-json", prompt="go")
    session_id, killed = start_and_kill(
        command, project, folder / "crash", env, rng.uniform(0, 0.6)
    )
    tally.killed = killed
    return session_id


def start_and_kill(
    args: list[str], project: Path, stem: Path, env: dict[str, str], delay_s: float
) -> tuple[str, bool]:
    """Run the CLI with ``args`` (stream-json output); SIGKILL it ``delay_s`` after its init
    event. Returns the session id and whether the kill landed before the run ended."""
    command = [sys.executable, "-m", "subagents", *args]
    out = stem.with_suffix(".out")
    with out.open("wb") as stdout, stem.with_suffix(".err").open("wb") as stderr:
        proc = subprocess.Popen(command, cwd=project, env=env, stdout=stdout, stderr=stderr)
    killed = False
    try:
        session_id = read_session_id(out, proc)
        time.sleep(delay_s)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed = True
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return session_id, killed


def check_after_restart(
    index: int, before: dict[str, SidecarRecord], after: dict[str, SidecarRecord], tally: RunTally
) -> None:
    for agent_id, old in before.items():
        new = after.get(agent_id)
        where = f"run {index}, agent {agent_id}"
        if new is None:
            tally.problems.append(f"{where}: record lost")
        elif old.status == "completed":
            if new.status != "completed" or new.result.text != old.result.text:
                tally.lost += 1
                tally.problems.append(f"{where}: completed result lost: {new.status}")
            else:
                tally.completed_kept += 1
        elif lost_its_host(old):
            if lost_its_host(new) and new.resumable:
                tally.host_lost += 1
            else:
                tally.problems.append(f"{where}: lost on Ray, after restart {new.status}")
        elif old.status == "running":
            if new.status == "completed" and new.restart_recovery == "completed":
                tally.recovered_completed += 1
            elif new.status == "failed" and new.restart_recovery == "interrupted" and new.resumable:
                tally.interrupted += 1
            else:
                tally.problems.append(f"{where}: after restart {new.status}/{new.restart_recovery}")
    still_running = [r.agent_id for r in after.values() if r.status == "running"]
    if still_running:
        tally.problems.append(f"run {index}: still running after restart: {still_running}")


def check_no_leftovers(index: int, home: Path, tally: RunTally) -> None:
    """Every process group a child recorded is gone (or its PID now belongs to a stranger)."""
    alive = []
    for pids in home.glob("projects/*/agents/*.pids"):
        for pgid, identity in read_groups(pids):
            tally.leftovers_seen += 1
            if is_our_group(pgid, identity):
                alive.append((pgid, identity))
    # A SIGKILL is delivered at once but a loaded machine may take a moment to end the process;
    # a survivor (a ``sleep 30`` nobody killed) is still there after the grace period.
    deadline = time.monotonic() + 10
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [(pgid, identity) for pgid, identity in alive if is_our_group(pgid, identity)]
    for pgid, _identity in alive:
        tally.problems.append(f"run {index}: process group {pgid} survived recovery")


def check_notifications(
    index: int, after: dict[str, SidecarRecord], counts: Counter[str], tally: RunTally
) -> None:
    for agent_id, record in after.items():
        if record.is_background and counts[agent_id] != 1:
            tally.duplicates += max(0, counts[agent_id] - 1)
            tally.lost += counts[agent_id] == 0
            tally.problems.append(
                f"run {index}: notification of {agent_id} appears {counts[agent_id]} times"
            )
    tally.notifications += sum(counts.values())
    foreign = set(counts) - set(after)
    if foreign:
        tally.problems.append(f"run {index}: notifications of unknown tasks {foreign}")


LOST_HOST = "Ray worker was lost"
"""The error of a child whose Ray host died under it while its driver lived on (the driver
reconciled it at once: ``distributed/ray_executor.py``)."""


def lost_its_host(record: SidecarRecord) -> bool:
    error = record.result.error if record.result is not None else None
    return record.status == "failed" and LOST_HOST in (error or "")


def was_interrupted(record: SidecarRecord) -> bool:
    """Cut off mid-run, by a restart's recovery or by its driver when its host died."""
    return record.restart_recovery == "interrupted" or lost_its_host(record)


def resume_interrupted(
    index: int,
    folder: Path,
    project: Path,
    env: dict[str, str],
    session_id: str,
    home: Path,
    canonical: Path,
    tally: RunTally,
) -> None:
    """Resume every interrupted child with ``resume_from`` in a third run of the session."""
    current = records(home, canonical, env)
    sources = [r.agent_id for r in current.values() if was_interrupted(r)]
    if not sources:
        return
    calls = [
        agent_call(f"continue R{n}", description=f"resume {n}", resume_from=s)
        for n, s in enumerate(sources)
    ]
    script = folder / "resume_from.json"
    main = {"agent_type": "main", "turns": [{"tool_calls": calls}, {"text": "{{tool_results}}"}]}
    child = {"match": "continue (R\\d+)", "turns": [{"text": "again"}]}  # any type
    script.write_text(json.dumps({"agents": [main, child]}))
    run = run_script(
        script, project, "--resume", session_id, prompt="resume them", env=env, timeout=120
    )
    if run.code != 0:
        tally.problems.append(f"run {index}: resume_from run failed: {run.stderr[-500:]}")
        return
    by_source = {
        r.lineage.resumed_from: r
        for r in records(home, canonical, env).values()
        if r.lineage.resumed_from
    }
    for source in sources:
        new = by_source.get(source)
        if new is None or new.status != "completed" or new.result.text != "again":
            tally.problems.append(f"run {index}: resume_from {source} did not complete: {new}")
        else:
            tally.resumed += 1


@pytest.mark.timeout(900)  # ~60 kill/restart cycles of real CLI processes: minutes under load
def test_sigkill_at_random_points_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    harness(tmp_path, capsys, MIN_KILLED, MAX_RUNS)


def test_sigkill_at_random_points_on_the_postgresql_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_cluster: PgCluster
) -> None:
    """The same harness with every run's records in PostgreSQL (``SUBAGENTS_STORE``): owner
    commits in transactions, recovery's claims as lease rows. A soak mode: it adds 40-150 s
    and shares the file variant's load flake (a killed shell's group seen alive at the check),
    so it runs with ``SUBAGENTS_CRASH_PG=1`` (8 kills) or ``SUBAGENTS_CRASH_SOAK=1`` (50)."""
    soak = os.environ.get("SUBAGENTS_CRASH_SOAK") == "1"
    if not soak and os.environ.get("SUBAGENTS_CRASH_PG") != "1":
        pytest.skip("soak mode: SUBAGENTS_CRASH_PG=1 or SUBAGENTS_CRASH_SOAK=1 runs it")
    minimum = MIN_KILLED if soak else MIN_KILLED_PG
    harness(tmp_path, capsys, minimum, MAX_RUNS, store_url=pg_cluster.fresh_url)


def harness(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    min_killed: int,
    max_runs: int,
    *,
    store_url: Callable[[], str] | None = None,
    run_once: Callable[[int, Path], RunTally] | None = None,
    parallel: int = PARALLEL,
) -> list[RunTally]:
    """Launch runs ``parallel`` at a time until ``min_killed`` were killed mid-run; check."""
    once = run_once or (lambda i, root: crash_once(i, root, store_url))
    tallies: list[RunTally] = []
    started = time.monotonic()
    index = 0
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        while sum(t.counts_as_killed for t in tallies) < min_killed and index < max_runs:
            batch = range(index, index + parallel)
            tallies += list(pool.map(lambda i: once(i, tmp_path), batch))
            index += parallel
    problems = [p for t in tallies for p in t.problems]
    summary = (
        f"crash harness: runs={len(tallies)} killed_mid_run={sum(t.counts_as_killed for t in tallies)} "
        f"killed_before_first_write={sum(t.nothing_durable for t in tallies)} "
        f"resume_also_killed={sum(t.resume_killed for t in tallies)} "
        f"completed_kept={sum(t.completed_kept for t in tallies)} "
        f"interrupted={sum(t.interrupted for t in tallies)} "
        f"recovered_completed={sum(t.recovered_completed for t in tallies)} "
        f"host_lost={sum(t.host_lost for t in tallies)} "
        f"resumed_from={sum(t.resumed for t in tallies)} "
        f"notifications={sum(t.notifications for t in tallies)} "
        f"leftover_groups_checked={sum(t.leftovers_seen for t in tallies)} "
        f"duplicates={sum(t.duplicates for t in tallies)} lost={sum(t.lost for t in tallies)} "
        f"problems={len(problems)} seconds={time.monotonic() - started:.0f}"
    )
    with capsys.disabled():
        print(f"\n{summary}")
    assert not problems, "\n".join(problems[:20])
    assert sum(t.counts_as_killed for t in tallies) >= min_killed, summary
    # The random kills must have hit both sides, or the run proves nothing.
    assert sum(t.completed_kept for t in tallies) > 0, summary
    assert sum(t.interrupted for t in tallies) > 0, summary
    cut_off = sum(t.interrupted + t.host_lost for t in tallies)
    assert sum(t.resumed for t in tallies) == cut_off, summary
    return tallies
