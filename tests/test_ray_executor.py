"""Background children on a local Ray cluster (``SUBAGENTS_EXECUTOR=ray``) with their records
in PostgreSQL: every result delivered once, and a worker killed mid-child reconciled as an
orphan is on one machine (docs/distributed.md)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cli_helpers import agent_call, run_cli, start_script, tool_call, write_script
from subagents.state import ProjectState
from subagents.store import SidecarRecord
from subagents.store.postgres import PostgresStore
from subagents.testing.pg_cluster import PgCluster
from subagents.testing.ray_cluster import RayCluster
from test_crash_harness import notification_counts


def _env(ray_cluster: RayCluster, url: str, **extra: str) -> dict[str, str]:
    return {
        **ray_cluster.env(),
        "SUBAGENTS_EXECUTOR": "ray",
        "SUBAGENTS_STORE": url,
        "SUBAGENTS_MAX_CONCURRENT_SUBAGENTS": "400",
        **extra,
    }


def _main(calls: list[dict[str, Any]], waits: int) -> dict[str, Any]:
    return {
        "agent_type": "main",
        "turns": [
            {"tool_calls": calls},
            {"text": "launched"},
            *({"text": "heard: {{last_user}}"} for _ in range(waits)),
        ],
    }


def _notified(home: Path, project: Path, session_id: str) -> Counter[str]:
    """How often each task id appears in a notification the main agent received."""
    transcript = ProjectState(home=home, project=project).session_transcript(session_id)
    return notification_counts(transcript)


def _records(url: str, project: Path) -> dict[str, SidecarRecord]:
    store = PostgresStore(url)
    try:
        return {r.agent_id: r for r in store.list_agents(str(project))}
    finally:
        store.close()


def test_200_background_children_on_ray_each_result_delivered_once(
    tmp_path: Path, pg_cluster: PgCluster, ray_cluster: RayCluster
) -> None:
    count = 200
    calls = [
        agent_call(f"job {k}", "general-purpose", description=f"job {k}", run_in_background=True)
        for k in range(count)
    ]
    child = {
        "agent_type": "general-purpose",
        "match": r"job (\d+)",
        "turns": [
            {"tool_calls": [tool_call("Bash", command="echo ppid=$PPID")]},
            {"text": "result {{match.1}} {{tool_results}}"},
        ],
    }
    script = write_script(tmp_path, [_main(calls, count), child])
    url = pg_cluster.fresh_url()
    env = _env(ray_cluster, url)
    proc = start_script(script, tmp_path, "--permission-mode", "bypassPermissions", env=env)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    project = Path(os.path.realpath(tmp_path))
    records = _records(url, project)
    assert len(records) == count
    assert all(r.status == "completed" and r.notified for r in records.values()), [
        (r.agent_id, r.status, r.result) for r in records.values() if r.status != "completed"
    ][:5]
    texts = sorted(r.result.text for r in records.values() if r.result is not None)
    assert texts == sorted(
        f"result {k} ppid={p}" for k, p in ((int(t.split()[1]), t.split("ppid=")[1]) for t in texts)
    )
    assert {int(t.split()[1]) for t in texts} == set(range(count))
    hosts = {t.split("ppid=")[1] for t in texts}
    assert str(proc.pid) not in hosts, "a child ran in the driver, not on Ray"
    assert 1 <= len(hosts) <= 2, hosts  # one host actor per CPU of the 2-CPU cluster
    session_id = json.loads(out)["session_id"]
    counts = _notified(
        Path(env.get("SUBAGENTS_HOME", os.environ["SUBAGENTS_HOME"])), project, session_id
    )
    assert set(counts) == set(records), "a child's notification is missing"
    assert max(counts.values()) == 1, [k for k, v in counts.items() if v > 1][:5]


def test_a_ray_worker_killed_mid_child_is_reconciled_and_resumable(
    tmp_path: Path, pg_cluster: PgCluster, ray_cluster: RayCluster
) -> None:
    """One host: the quick child completes, then the host's worker process is SIGKILLed while
    the slow child's shell runs. The quick child stays completed; the slow one ends failed
    (interrupted) and resumable, its shell is gone, and each is notified once."""
    marker = tmp_path / "slow.pid"
    calls = [
        agent_call("quick job", "general-purpose", description="quick", run_in_background=True),
        agent_call("slow job", "general-purpose", description="slow", run_in_background=True),
    ]
    quick = {"agent_type": "general-purpose", "match": "quick", "turns": [{"text": "quick done"}]}
    slow = {
        "agent_type": "general-purpose",
        "match": "slow",
        "turns": [
            {"tool_calls": [tool_call("Bash", command=f"echo $PPID $$ > {marker}; sleep 60")]},
            {"text": "slow done"},
        ],
    }
    script = write_script(tmp_path, [_main(calls, 2), quick, slow])
    url = pg_cluster.fresh_url()
    env = _env(ray_cluster, url, SUBAGENTS_RAY_HOSTS="1")
    proc = start_script(script, tmp_path, "--permission-mode", "bypassPermissions", env=env)
    project = Path(os.path.realpath(tmp_path))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        done = [r for r in _records(url, project).values() if r.status == "completed"]
        if marker.exists() and marker.read_text().strip() and done:
            break
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.2)
    worker, shell = (int(x) for x in marker.read_text().split())
    assert worker != proc.pid, "the slow child ran in the driver, not on Ray"
    os.kill(worker, signal.SIGKILL)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    records = {r.description: r for r in _records(url, project).values()}
    assert records["quick"].status == "completed"
    assert records["quick"].result is not None and records["quick"].result.text == "quick done"
    lost = records["slow"]
    assert lost.status == "failed" and lost.resumable, lost
    assert lost.result is not None and "Ray worker was lost" in (lost.result.error or ""), lost
    assert not Path(f"/proc/{shell}").exists() or _zombie(shell), "the lost child's shell lived on"
    session_id = json.loads(out)["session_id"]
    counts = _notified(Path(os.environ["SUBAGENTS_HOME"]), project, session_id)
    assert counts == Counter({records["quick"].agent_id: 1, lost.agent_id: 1}), counts


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: it exited mid-read
        return True


def test_a_stop_from_another_process_reaches_a_child_on_ray(
    tmp_path: Path, pg_cluster: PgCluster, ray_cluster: RayCluster
) -> None:
    """``subagents tasks stop`` writes the stop to PostgreSQL; the driver's poller sees it and
    the stop is forwarded to the host actor: the child ends killed, its shell with it."""
    marker = tmp_path / "shell.pid"
    calls = [agent_call("long job", "general-purpose", description="long", run_in_background=True)]
    child = {
        "agent_type": "general-purpose",
        "turns": [
            {"tool_calls": [tool_call("Bash", command=f"echo $$ > {marker}; sleep 60")]},
            {"text": "never reached"},
        ],
    }
    script = write_script(tmp_path, [_main(calls, 1), child])
    url = pg_cluster.fresh_url()
    env = _env(ray_cluster, url)
    proc = start_script(script, tmp_path, "--permission-mode", "bypassPermissions", env=env)
    deadline = time.monotonic() + 180
    while not (marker.exists() and marker.read_text().strip()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.2)
    project = Path(os.path.realpath(tmp_path))
    (record,) = _records(url, project).values()
    stopped = run_cli("tasks", "stop", record.agent_id, cwd=tmp_path, env=env)
    assert stopped.code == 0, stopped.stderr
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    final = _records(url, project)[record.agent_id]
    assert final.status == "killed", final
    shell = int(marker.read_text())
    assert _zombie(shell), "the stopped child's shell lived on"


def test_an_unknown_executor_is_a_clear_error(tmp_path: Path) -> None:
    script = write_script(tmp_path, [_main([], 0)])
    proc = start_script(script, tmp_path, env={"SUBAGENTS_EXECUTOR": "dask"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "SUBAGENTS_EXECUTOR: unknown executor 'dask'" in err, err


def test_the_local_executor_is_the_default() -> None:
    from subagents.agents.executor import LOCAL, Executor
    from subagents.distributed.select import executor_from_env

    assert isinstance(LOCAL, Executor)
    assert executor_from_env({}, model_spec="scripted:x") is LOCAL
    assert executor_from_env({"SUBAGENTS_EXECUTOR": "local"}, model_spec="scripted:x") is LOCAL
