"""The PostgreSQL store (``SUBAGENTS_STORE=postgresql://…``); needs the ``postgresql`` extra.

Importing ``subagents.store`` does not import this package (nor psycopg): ``store.select``
imports it only when a PostgreSQL URL is configured. Design: ``docs/distributed.md``.
"""

from __future__ import annotations

from subagents.store.postgres.schema import LATEST, MIGRATIONS, migrate
from subagents.store.postgres.store import PostgresCommit, PostgresStore

__all__ = ["LATEST", "MIGRATIONS", "PostgresCommit", "PostgresStore", "migrate"]
