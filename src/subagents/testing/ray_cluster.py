"""A local Ray cluster for tests and benchmarks: ``ray start --head --block`` in its own
process group, on free loopback ports, with its own temp folder; ``stop`` ends that group only
(never ``ray stop``, which would end every Ray cluster of the user on the machine)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK_ENV = {
    # Ray replaces 127.0.0.1 by the machine's outward address unless told it is not a
    # cluster across machines; a test cluster stays on loopback.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    # A throwaway loopback cluster: no token shared through ~/.ray with other clusters.
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
}
"""Set for the head, its workers (they inherit it) and every driver joining it."""


class RayClusterError(RuntimeError):
    """The cluster did not come up."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ray_command() -> Path | None:
    """The ``ray`` command of this interpreter's environment, or None without Ray."""
    candidate = Path(sys.executable).with_name("ray")
    if candidate.exists():
        return candidate
    found = shutil.which("ray")
    return Path(found) if found else None


@dataclass
class RayCluster:
    ray: Path
    num_cpus: int = 2
    root: Path = field(init=False)
    address: str = field(init=False, default="")
    _proc: subprocess.Popen[bytes] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        # Ray's socket paths must stay short (AF_UNIX: 107 bytes): a short temp folder.
        self.root = Path(tempfile.mkdtemp(prefix="sa-ray-", dir="/tmp"))

    def env(self) -> dict[str, str]:
        """What a driver needs to join this cluster."""
        return {"RAY_ADDRESS": self.address, **LOOPBACK_ENV}

    def start(self, timeout_s: float = 120) -> RayCluster:
        port = _free_port()
        self.address = f"127.0.0.1:{port}"
        log = (self.root / "head.log").open("wb")
        env = {**os.environ, **LOOPBACK_ENV}
        self._proc = subprocess.Popen(
            [
                str(self.ray),
                "start",
                "--head",
                "--block",
                f"--port={port}",
                f"--num-cpus={self.num_cpus}",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--temp-dir={self.root}",
                "--dashboard-agent-listen-port=0",
                "--metrics-export-port=0",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()  # a cluster that did not come up leaves no process behind
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        probe = [
            sys.executable,
            "-c",
            "import ray,sys; ray.init(address=sys.argv[1], log_to_driver=False); "
            "print(int(ray.cluster_resources().get('CPU', 0)))",
            self.address,
        ]
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise RayClusterError(f"ray start exited: {self.log_tail()}")
            try:
                done = subprocess.run(
                    probe,
                    capture_output=True,
                    text=True,
                    timeout=30,
                    env={**os.environ, **LOOPBACK_ENV},
                )
            except subprocess.TimeoutExpired:
                continue
            if done.returncode == 0 and done.stdout.strip() not in ("", "0"):
                return
            time.sleep(1)
        raise RayClusterError(f"Ray cluster not ready in {timeout_s:.0f} s: {self.log_tail()}")

    def pids(self) -> list[int]:
        """Every process of the cluster (its process group): head daemons and workers."""
        if self._proc is None:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.getpgid(int(entry.name)) == self._proc.pid:
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found

    def log_tail(self) -> str:
        path = self.root / "head.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGTERM)
                self._proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self._proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._proc = None
        shutil.rmtree(self.root, ignore_errors=True)
