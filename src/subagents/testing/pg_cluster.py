"""A throwaway PostgreSQL cluster for tests and benchmarks: ``initdb`` + ``pg_ctl``.

The server listens only on a Unix socket in its own temporary folder (no TCP port, nothing on
the network), trusts local connections, and is removed by ``stop``. As root (CI) it runs as the
``postgres`` user through ``runuser`` — PostgreSQL refuses to run as root. ``fsync`` is off by
default: the cluster lives for one test run, and the tests kill clients, not the server.

``find_bindir`` looks for the server binaries: ``$SUBAGENTS_PG_BINDIR``, ``pg_config --bindir``,
then Debian's ``/usr/lib/postgresql/<version>/bin``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

SERVER_USER = "postgres"


class ClusterError(RuntimeError):
    """The cluster could not be set up (binaries missing, initdb or start failed)."""


def find_bindir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    candidates: list[Path] = []
    if os.environ.get("SUBAGENTS_PG_BINDIR"):
        candidates.append(Path(os.environ["SUBAGENTS_PG_BINDIR"]))
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if found.returncode == 0:
            candidates.append(Path(found.stdout.strip()))
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        candidates += sorted((p / "bin" for p in debian.iterdir()), reverse=True)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


@dataclass
class PgCluster:
    """One cluster in a temporary folder; ``url()`` gives a libpq URL for a fresh schema."""

    bindir: Path
    fsync: bool = False
    root: Path = field(init=False)
    _as_user: list[str] = field(init=False, default_factory=list)
    _running: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="subagents-pg-"))
        if os.geteuid() == 0:
            try:
                server = pwd.getpwnam(SERVER_USER)
            except KeyError as exc:
                raise ClusterError(f"running as root needs a {SERVER_USER!r} user") from exc
            os.chown(self.root, server.pw_uid, server.pw_gid)
            self._as_user = ["runuser", "-u", SERVER_USER, "--"]

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root

    def start(self) -> PgCluster:
        try:
            return self._start()
        except BaseException:
            self._running = True  # stop whatever pg_ctl may have started, then the folder
            self.stop()
            raise

    def _start(self) -> PgCluster:
        self._run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-instructions",
            ],
            "initdb",
        )
        options = f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}'"
        options += f" -c fsync={'on' if self.fsync else 'off'} -c max_connections=400"
        self._run(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.root / "log"),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ],
            "pg_ctl start",
        )
        self._running = True
        return self

    def url(self, *, schema: str | None = None) -> str:
        """A URL for the ``postgres`` database; with ``schema``, one created for the caller
        (its tables then live there: one empty store per schema)."""
        base = f"postgresql://postgres@/postgres?host={self.socket_dir}"
        if schema is None:
            return base
        self.psql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        return f"{base}&options=-csearch_path%3D{schema}"

    def fresh_url(self) -> str:
        """A URL for a new, empty schema."""
        return self.url(schema=f"t_{uuid.uuid4().hex[:12]}")

    def psql(self, sql: str) -> str:
        done = subprocess.run(
            [
                str(self.bindir / "psql"),
                "-h",
                str(self.socket_dir),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise ClusterError(f"psql {sql!r}: {done.stderr.strip()}")
        return done.stdout

    def server_pids(self) -> list[int]:
        """The postmaster and its children (backends, writer, WAL...): what a benchmark counts."""
        try:
            postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        pids = [postmaster]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == postmaster:
                pids.append(int(entry.name))
        return pids

    def stop(self) -> None:
        if self._running:
            subprocess.run(
                [
                    *self._as_user,
                    str(self.bindir / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
                capture_output=True,
                check=False,
            )
            self._running = False
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, argv: list[str], what: str) -> None:
        done = subprocess.run([*self._as_user, *argv], capture_output=True, text=True)
        if done.returncode != 0:
            log = self.root / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise ClusterError(f"{what} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")
