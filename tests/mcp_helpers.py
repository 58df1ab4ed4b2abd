"""Shared parts of the MCP tests: the demo server (written with the ``mcp`` SDK), published
servers from PyPI, projects that configure them, and reading what a run left behind."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cli_helpers import pid_alive, recorded

DEMO = Path(__file__).parent / "mcp_fixtures" / "demo_server.py"


def demo(pid_file: Path | None = None, **env: str) -> dict[str, Any]:
    """A stdio entry for the demo server; ``pid_file`` collects the pid of each start."""
    if pid_file is not None:
        env["DEMO_PID_FILE"] = str(pid_file)
    return {"command": sys.executable, "args": [str(DEMO)], "env": env}


def published(module: str, *args: str) -> dict[str, Any]:
    """A stdio entry for a server package installed from PyPI (``python -m MODULE``)."""
    return {"command": sys.executable, "args": ["-m", module, *args]}


def project(tmp_path: Path, servers: dict[str, Any], *, allow: list[str] | None = None) -> Path:
    """A project folder with ``.mcp.json`` and settings allowing ``allow`` (default: all)."""
    root = tmp_path / "proj"
    (root / ".claude").mkdir(parents=True, exist_ok=True)
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    permissions = {"allow": allow if allow is not None else [f"mcp__{n}" for n in servers]}
    (root / ".claude" / "settings.json").write_text(json.dumps({"permissions": permissions}))
    return root


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A HOME of its own (no user-level ``~/.claude.json`` of the machine leaks in), and a
    connect timeout for a loaded machine (a server importing the SDK can take 10 s there)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "MCP_TIMEOUT": "120000", **extra}


def requests_of(folder: Path, agent_type: str) -> list[dict[str, Any]]:
    return [r for r in recorded(folder) if r["agent_type"] == agent_type]


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last message."""
    content = request["messages"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def pids(pid_file: Path) -> list[int]:
    if not pid_file.exists():
        return []
    return [int(line) for line in pid_file.read_text().split()]


def wait_for_pids(pid_file: Path, count: int = 1, timeout_s: float = 90) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while len(pids(pid_file)) < count:
        assert time.monotonic() < deadline, f"no server pid in {pid_file}"
        time.sleep(0.05)
    return pids(pid_file)


def all_dead(found: list[int], timeout_s: float = 5) -> bool:
    deadline = time.monotonic() + timeout_s
    while any(pid_alive(p) for p in found):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    for args in (
        ["init", "-q", "-b", "main"],
        ["-c", "user.email=t@example.com", "-c", "user.name=T", "commit", "-q",
         "--allow-empty", "-m", "first commit of the test repo"],
    ):  # fmt: skip
        subprocess.run(["git", *args], cwd=path, check=True)
    return path
