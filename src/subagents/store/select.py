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
TTL_ENV = "SUBAGENTS_LEASE_TTL_S"
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
        return PostgresStore(value, lease_ttl_s=_ttl(env))
    raise StoreUnavailableError(
        f"{ENV}: unknown store {value!r} (expected 'files' or postgresql://…)"
    )


def _ttl(env: Mapping[str, str] | None) -> float:
    """``SUBAGENTS_LEASE_TTL_S``: how long a lease or an owner's heartbeat outlives its last
    renewal in a store every node reaches (default 30 s): after a node dies, another takes over
    its children that much later."""
    from subagents.store.postgres.store import DEFAULT_LEASE_TTL_S

    raw = (os.environ if env is None else env).get(TTL_ENV, "").strip()
    if not raw:
        return DEFAULT_LEASE_TTL_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0.1 <= value <= 86_400:
        raise StoreUnavailableError(
            f"{TTL_ENV}: expected seconds between 0.1 and 86400, got {raw!r}"
        )
    return value


@runtime_checkable
class Closable(Protocol):
    """A store holding resources (a database's connections) that its opener closes."""

    def close(self) -> None: ...
