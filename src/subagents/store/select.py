"""Which ``Store`` a session (or ``subagents tasks``) uses: ``SUBAGENTS_STORE`` or the files.

``SUBAGENTS_STORE=postgresql://…`` (or ``postgres://…``) selects the PostgreSQL store
(``store/postgres``, the ``postgresql`` extra), which every node of a cluster reaches; unset,
empty or ``files`` keeps the on-disk ``FileStore`` under ``SUBAGENTS_HOME``. Anything else is
an error naming the variable and the value, rather than a silent fallback to local files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from subagents.state import ProjectState
from subagents.store.errors import StoreUnavailableError
from subagents.store.files import FileStore
from subagents.store.protocol import Store

ENV = "SUBAGENTS_STORE"
_PG_SCHEMES = ("postgresql://", "postgres://")


def open_store(state: ProjectState, env: Mapping[str, str] | None = None) -> Store:
    """The store ``SUBAGENTS_STORE`` names (default: files under ``state.home``)."""
    value = (os.environ if env is None else env).get(ENV, "").strip()
    if value in ("", "files"):
        return FileStore(state)
    if value.startswith(_PG_SCHEMES):
        try:
            from subagents.store.postgres import PostgresStore
        except ImportError as exc:
            raise StoreUnavailableError(
                f"{ENV}={value.split('://')[0]}://…: the PostgreSQL store needs psycopg "
                "(pip install 'subagents[postgresql]')"
            ) from exc
        return PostgresStore(value)
    raise StoreUnavailableError(
        f"{ENV}: unknown store {value!r} (expected 'files' or postgresql://…)"
    )


@runtime_checkable
class Closable(Protocol):
    """A store holding resources (a database's connections) that its opener closes."""

    def close(self) -> None: ...
