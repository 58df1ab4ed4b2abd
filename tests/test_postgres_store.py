"""The PostgreSQL store beyond the conformance suite: migrations, two processes, leases across
hosts, odd text, and a real CLI session selecting it with ``SUBAGENTS_STORE``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from cli_helpers import agent_call, run_cli, run_script, tool_call, write_script
from subagents.state import ProjectState
from subagents.store import FileStore, RunResult, SchemaVersionError
from subagents.store.postgres import LATEST, PostgresStore, migrate
from subagents.store.process_identity import ProcessIdentity, current_identity
from subagents.testing.pg_cluster import PgCluster
from subagents.testing.store_conformance import PROJECT_A, make_record


def test_migrations_apply_once_and_a_newer_schema_is_refused(pg_cluster: PgCluster) -> None:
    url = pg_cluster.fresh_url()
    first = PostgresStore(url)  # applies the migrations
    first.close()
    with psycopg.connect(url, autocommit=True) as conn:
        assert migrate(conn) == LATEST  # found up to date: nothing applied twice
        rows = conn.execute("SELECT version FROM subagents_schema ORDER BY version").fetchall()
        assert [r[0] for r in rows] == list(range(1, LATEST + 1))
        conn.execute("INSERT INTO subagents_schema (version) VALUES (%s)", (LATEST + 1,))
    with pytest.raises(SchemaVersionError, match=f"schema version {LATEST + 1} is newer"):
        PostgresStore(url)


def test_two_stores_opening_a_fresh_database_at_once_migrate_it_once(
    pg_cluster: PgCluster,
) -> None:
    url = pg_cluster.fresh_url()
    script = (
        "import sys\nfrom subagents.store.postgres import PostgresStore\nPostgresStore(sys.argv[1])"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, url]) for _ in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    store = PostgresStore(url)
    store.create(make_record("a00000001"))
    assert store.get("a00000001") is not None
    store.close()


_WRITER = """
import sys
from subagents.store import RunResult
from subagents.store.postgres import PostgresStore
store = PostgresStore(sys.argv[1])
for n in range(40):
    if sys.argv[2] == "description":
        store.update("a00000001", description=f"d{n}")
    else:
        store.update("a00000001", result=RunResult(text=f"r{n}"))
"""


def test_two_processes_updating_one_record_lose_no_update(pg_cluster: PgCluster) -> None:
    url = pg_cluster.fresh_url()
    store = PostgresStore(url)
    store.create(make_record("a00000001"))
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, url, field])
        for field in ("description", "result")
    ]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    final = store.get("a00000001")
    assert final is not None and final.result is not None
    assert (final.description, final.result.text) == ("d39", "r39")
    store.close()


def test_a_lease_held_on_another_host_expires_and_is_taken_over(pg_cluster: PgCluster) -> None:
    """A holder on another node cannot be probed (it counts as alive): only its lease's expiry
    on the database's clock frees the child for a recoverer here."""
    store = PostgresStore(pg_cluster.fresh_url(), lease_ttl_s=0.5)
    elsewhere = ProcessIdentity(pid=1, start_identity="42@boot", hostname="node-b.invalid")
    here = current_identity()
    assert store.take_lease("a00000001", elsewhere)
    assert not store.take_lease("a00000001", here), "a fresh lease of a remote holder was taken"
    assert store.take_lease("a00000001", elsewhere)  # renewal by the holder
    time.sleep(0.3)
    assert not store.take_lease("a00000001", here), "a renewed lease expired early"
    time.sleep(0.5)
    assert store.take_lease("a00000001", here), "an expired lease was not taken over"
    assert not store.take_lease("a00000001", elsewhere), "the old holder got it back"
    store.release_lease("a00000001", elsewhere)  # not the holder: nothing happens
    assert not store.take_lease("a00000001", elsewhere)
    store.close()


def test_an_owner_heartbeat_expires_on_the_database_clock_unless_renewed(
    pg_cluster: PgCluster,
) -> None:
    store = PostgresStore(pg_cluster.fresh_url(), lease_ttl_s=2.0)
    assert store.heartbeat_interval_s == pytest.approx(2.0 / 3)
    owner = ProcessIdentity(pid=7, start_identity="42@boot", hostname="node-b.invalid")
    store.beat(owner)
    time.sleep(1.2)
    store.beat(owner)  # renewed: 2 s from now
    time.sleep(1.2)
    assert not store.owner_expired(owner), "a renewed heartbeat expired from its first beat"
    time.sleep(1.0)
    assert store.owner_expired(owner), "a heartbeat outlived its time-to-live"
    store.close()


def test_text_no_database_column_could_hold_round_trips(pg_cluster: PgCluster) -> None:
    """A NUL and a lone surrogate from a model reach the record as JSON escapes (the ``json``
    column keeps them; ``jsonb`` would refuse the NUL)."""
    store = PostgresStore(pg_cluster.fresh_url())
    odd = 'nul\x00 surrogate \ud800 quote\' "q" emoji \U0001f600'
    store.create(replace(make_record("a00000001"), description=odd))
    store.update("a00000001", result=RunResult(text=odd))
    got = store.get("a00000001")
    assert got is not None and got.result is not None
    assert got.description == odd and got.result.text == odd
    store.close()


def test_a_stop_from_another_store_reaches_the_owner_listing(pg_cluster: PgCluster) -> None:
    url = pg_cluster.fresh_url()
    owner, other = PostgresStore(url), PostgresStore(url)
    owner.create(make_record("a00000001"))
    assert other.request_stop("a00000001").stop_requested
    assert owner.stop_requested_ids(PROJECT_A) == {"a00000001"}
    done = owner.update("a00000001", status="killed")
    assert owner.stop_requested_ids(PROJECT_A) == set()  # a terminal record is not listed
    assert other.request_stop("a00000001") == done
    owner.close()
    other.close()


def _background_script(tmp_path: Path) -> Path:
    return write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call(
                                f"job {k}",
                                "Explore",
                                description=f"job {k}",
                                run_in_background=True,
                            )
                            for k in range(3)
                        ]
                    },
                    {"text": "launched"},
                    {"text": "heard: {{last_user}}"},
                    {"text": "heard: {{last_user}}"},
                    {"text": "heard: {{last_user}}"},
                ],
            },
            {
                "agent_type": "Explore",
                "match": r"job (\d)",
                "turns": [
                    {"tool_calls": [tool_call("Glob", pattern="*")]},
                    {"text": "result {{match.1}}"},
                ],
            },
        ],
    )


def test_a_cli_session_keeps_its_children_in_postgres(
    tmp_path: Path, pg_cluster: PgCluster
) -> None:
    """``SUBAGENTS_STORE=postgresql://…``: the children's records go to the database (none to
    files), ``subagents tasks list`` and ``show`` read them back from there."""
    url = pg_cluster.fresh_url()
    env = {"SUBAGENTS_STORE": url}
    run = run_script(_background_script(tmp_path), tmp_path, env=env)
    assert run.code == 0, run.stderr
    project = str(Path(os.path.realpath(tmp_path)))
    store = PostgresStore(url)
    records = store.list_agents(project)
    assert sorted(r.result.text for r in records if r.result) == [
        "result 0",
        "result 1",
        "result 2",
    ]
    assert all(r.status == "completed" and r.notified for r in records)
    files = FileStore(ProjectState(home=Path(os.environ["SUBAGENTS_HOME"]), project=Path(project)))
    assert files.list_agents(project) == []

    listed = run_cli("tasks", "list", "--json", cwd=tmp_path, env=env)
    assert listed.code == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert sorted(row["id"] for row in rows) == sorted(r.agent_id for r in records)
    shown = run_cli("tasks", "show", records[0].agent_id, "--json", cwd=tmp_path, env=env)
    assert shown.code == 0 and json.loads(shown.stdout)["status"] == "completed", shown.stderr
    store.close()


def test_an_unknown_or_unreachable_store_is_a_clear_error(tmp_path: Path) -> None:
    script = _background_script(tmp_path)
    bogus = run_script(script, tmp_path, env={"SUBAGENTS_STORE": "mysql://x"})
    assert bogus.code != 0 and "SUBAGENTS_STORE: unknown store 'mysql://x'" in bogus.stderr
    gone = "postgresql://someone:secret-pw@/nodb?host=/nonexistent-socket-dir"
    unreachable = run_cli("tasks", "list", cwd=tmp_path, env={"SUBAGENTS_STORE": gone})
    assert unreachable.code == 1 and "PostgreSQL store" in unreachable.stderr
    assert "secret-pw" not in unreachable.stderr  # the password is never printed
    ttl = run_cli(
        "tasks", "list", cwd=tmp_path, env={"SUBAGENTS_STORE": gone, "SUBAGENTS_LEASE_TTL_S": "x"}
    )
    assert ttl.code == 1 and "SUBAGENTS_LEASE_TTL_S: expected seconds" in ttl.stderr
