"""Recovery across nodes by heartbeat expiry (issue 24 Build 3): two "hosts" on one machine,
told apart by ``SUBAGENTS_HOST_ID``, sharing a PostgreSQL store and the project's folder.

A session on node B owns background children; a session on node A cannot probe B's process.
While B lives (and beats), A leaves B's running child alone — even long past a time-to-live.
Once B is SIGKILLed and its heartbeat has expired, A's next session reconciles B's children as
one machine would: completed kept, the interrupted one failed and resumable (then resumed),
its shell ended, each child notified exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import agent_call, run_cli, run_script, start_script, tool_call, write_script
from subagents.agents.recovery import reconcile_orphans
from subagents.state import ProjectState
from subagents.store import SidecarRecord
from subagents.store.postgres import PostgresStore
from subagents.store.process_identity import ProcessIdentity
from subagents.testing.pg_cluster import PgCluster
from subagents.testing.store_conformance import make_record
from test_crash_harness import notification_counts
from test_ray_executor import _zombie

TTL_S = 3.0


def _records(url: str, project: Path) -> dict[str, SidecarRecord]:
    store = PostgresStore(url)
    try:
        return {r.description: r for r in store.list_agents(str(project))}
    finally:
        store.close()


def _listed(folder: Path, env: dict[str, str]) -> dict[str, str]:
    """``subagents tasks list --json`` on a node: each task's shown status."""
    listed = run_cli("tasks", "list", "--json", cwd=folder, env=env)
    assert listed.code == 0, listed.stderr
    return {row["id"]: row["status"] for row in json.loads(listed.stdout)}


def _node(url: str, name: str) -> dict[str, str]:
    return {
        "SUBAGENTS_STORE": url,
        "SUBAGENTS_HOST_ID": name,
        "SUBAGENTS_LEASE_TTL_S": str(TTL_S),
    }


def _driver_script(folder: Path, marker: Path) -> Path:
    calls = [
        agent_call("quick job", "general-purpose", description="quick", run_in_background=True),
        agent_call("slow job", "general-purpose", description="slow", run_in_background=True),
    ]
    main: dict[str, Any] = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": calls},
            {"text": "launched"},
            *({"text": "heard: {{last_user}}"} for _ in range(2)),
        ],
    }
    quick = {"agent_type": "general-purpose", "match": "quick", "turns": [{"text": "quick done"}]}
    slow = {
        "agent_type": "general-purpose",
        "match": "slow",
        "turns": [
            {"tool_calls": [tool_call("Bash", command=f"echo $$ > {marker}; sleep 60")]},
            {"text": "slow done"},
        ],
    }
    return write_script(folder, [main, quick, slow], name="driver.json")


def _idle_script(folder: Path, name: str) -> Path:
    main = {"agent_type": "main", "turns": [{"text": f"idle {i}"} for i in range(4)]}
    return write_script(folder, [main], name=name)


def test_a_dead_remote_owner_is_recovered_once_its_heartbeat_expires(
    tmp_path: Path, pg_cluster: PgCluster
) -> None:
    url = pg_cluster.fresh_url()
    project = Path(os.path.realpath(tmp_path))
    marker = tmp_path / "slow.pid"
    node_b = start_script(
        _driver_script(tmp_path, marker),
        tmp_path,
        "--permission-mode",
        "bypassPermissions",
        output_format="stream-json",
        env=_node(url, "node-b"),
    )
    assert node_b.stdout is not None
    session_id = json.loads(node_b.stdout.readline())["session_id"]
    deadline = time.monotonic() + 120
    while not (marker.exists() and marker.read_text().strip()):
        assert node_b.poll() is None and time.monotonic() < deadline, node_b.communicate()[1]
        time.sleep(0.1)
    shell = int(marker.read_text())
    while _records(url, project)["quick"].status != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.1)

    # B lives: past a whole time-to-live, A's session still takes B's child for alive.
    time.sleep(TTL_S + 1)
    node_a = _node(url, "node-a")
    first = run_script(_idle_script(tmp_path, "a1.json"), tmp_path, env=node_a, timeout=120)
    assert first.code == 0, first.stderr
    slow = _records(url, project)["slow"]
    assert slow.status == "running" and slow.process is not None, slow
    assert slow.process.hostname == "node-b"
    assert _listed(tmp_path, node_a)[slow.agent_id] == "running"

    node_b.send_signal(signal.SIGKILL)
    node_b.communicate()
    store = PostgresStore(url)
    try:
        while not store.owner_expired(slow.process):  # B beats no more: it expires
            assert time.monotonic() < deadline + TTL_S
            time.sleep(0.2)
    finally:
        store.close()

    assert _listed(tmp_path, node_a)[slow.agent_id] == "interrupted"  # read, not yet settled
    resumed = run_script(
        _idle_script(tmp_path, "a2.json"),
        tmp_path,
        "--resume",
        session_id,
        prompt="continue",
        env=node_a,
        timeout=120,
    )
    assert resumed.code == 0, resumed.stderr
    records = _records(url, project)
    assert records["quick"].status == "completed"
    assert records["quick"].result is not None and records["quick"].result.text == "quick done"
    lost = records["slow"]
    assert lost.status == "failed" and lost.restart_recovery == "interrupted", lost
    assert lost.resumable
    assert not Path(f"/proc/{shell}").exists() or _zombie(shell), "B's shell outlived recovery"
    transcript = ProjectState(home=Path(os.environ["SUBAGENTS_HOME"]), project=project)
    counts = notification_counts(transcript.session_transcript(session_id))
    assert counts == {records["quick"].agent_id: 1, lost.agent_id: 1}, counts

    again = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("go on", description="again", resume_from=lost.agent_id)
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {"match": "go on", "turns": [{"text": "slow done at last"}]},
        ],
        name="a3.json",
    )
    run = run_script(again, tmp_path, "--resume", session_id, env=node_a, timeout=120)
    assert run.code == 0, run.stderr
    assert "slow done at last" in run.json()["result"]


def test_recovery_leaves_a_fresh_remote_owner_and_takes_an_expired_one(
    tmp_path: Path, pg_cluster: PgCluster
) -> None:
    """The same decision at the library level, without waiting on a live process: a remote
    owner whose heartbeat is fresh keeps its child; one that never beat, or whose heartbeat
    expired, loses it to this node's recovery."""
    url = pg_cluster.fresh_url()
    state = ProjectState(home=tmp_path / "home", project=tmp_path)
    fresh = ProcessIdentity(pid=11, start_identity="1@b", hostname="node-b.invalid")
    expired = ProcessIdentity(pid=12, start_identity="2@b", hostname="node-b.invalid")
    silent = ProcessIdentity(pid=13, start_identity="3@b", hostname="node-b.invalid")
    long_lived, short_lived = (
        PostgresStore(url, lease_ttl_s=60),
        PostgresStore(url, lease_ttl_s=0.1),
    )
    long_lived.beat(fresh)
    short_lived.beat(expired)
    for n, owner in enumerate((fresh, expired, silent)):
        long_lived.create(
            make_record(
                f"h0000000{n}",
                project_path=str(tmp_path),
                process=owner,
                transcript_path=str(tmp_path / f"h{n}.jsonl"),
            )
        )
    time.sleep(0.3)
    try:
        found = asyncio.run(reconcile_orphans(long_lived, state))
        assert sorted(r.agent_id for r in found) == ["h00000001", "h00000002"]
        assert long_lived.get("h00000000").status == "running"  # type: ignore[union-attr]
    finally:
        long_lived.close()
        short_lived.close()


@pytest.fixture(autouse=True)
def _no_host_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUBAGENTS_HOST_ID", raising=False)
