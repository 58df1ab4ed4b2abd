"""The PostgreSQL store's schema, as ordered migrations applied once per database.

Each step is SQL applied in one transaction with the version it brings; ``migrate`` takes a
transaction-scoped advisory lock first, so two processes opening the store at once apply a step
once. A database whose version is newer than the newest step here is refused (an older
subagents must not write records a newer one may not read back), naming both versions.

Tables carry a ``subagents_`` prefix so the store can share a database with anything else.
The record is kept whole in a ``json`` column (stored verbatim: the bytes ``encode_record``
made, read back by ``records``/``migrations`` as for a file); ``jsonb`` would re-parse every
write and refuses the ``\\u0000`` escape a model's text may hold. The columns beside it are the
ones queries filter on.
"""

from __future__ import annotations

import psycopg

from subagents.store.errors import SchemaVersionError

ADVISORY_KEY = 0x5B_A6_E7_75  # "subagents" schema migrations: any fixed 64-bit key

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
        CREATE TABLE subagents_agents (
            agent_id       text PRIMARY KEY,
            project_path   text NOT NULL,
            session_id     text NOT NULL,
            created_at     double precision NOT NULL,
            status         text NOT NULL,
            stop_requested boolean NOT NULL DEFAULT false,
            record         json NOT NULL
        );
        CREATE INDEX subagents_agents_by_project ON subagents_agents (project_path, created_at);
        CREATE INDEX subagents_agents_running ON subagents_agents (project_path)
            WHERE status = 'running';
        CREATE INDEX subagents_agents_stopped ON subagents_agents (project_path)
            WHERE stop_requested AND status = 'running';
        CREATE TABLE subagents_leases (
            agent_id   text PRIMARY KEY,
            owner      json NOT NULL,
            expires_at double precision NOT NULL
        );
        """,
    ),
    (
        2,
        # A live owner's heartbeat (``OwnerHeartbeats``): a recovery on another host reads the
        # expiry instead of probing a process it cannot see.
        """
        CREATE TABLE subagents_owners (
            owner_key  text PRIMARY KEY,
            owner      json NOT NULL,
            expires_at double precision NOT NULL
        );
        """,
    ),
)

LATEST = MIGRATIONS[-1][0]


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """Bring the database to ``LATEST``; returns the version found before. Idempotent."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_KEY,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS subagents_schema ("
            " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT coalesce(max(version), 0) FROM subagents_schema").fetchone()
        found = int(str(row[0])) if row is not None else 0
        if found > LATEST:
            raise SchemaVersionError(
                f"PostgreSQL store: schema version {found} is newer than this subagents knows "
                f"({LATEST}); upgrade subagents"
            )
        for version, sql in MIGRATIONS:
            if version > found:
                conn.execute(sql.encode())
                conn.execute("INSERT INTO subagents_schema (version) VALUES (%s)", (version,))
    return found
