"""Running the real ``subagents`` command in a subprocess, and writing scripts for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class CliRun:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def tool_call(name: str, **tool_input: Any) -> dict[str, Any]:
    """One scripted tool call: ``{"name": NAME, "input": {...}}``."""
    return {"name": name, "input": tool_input}


def agent_call(
    prompt: str, subagent_type: str | None = None, *, description: str = "job", **extra: Any
) -> dict[str, Any]:
    """A scripted ``Agent`` call; without ``subagent_type`` the type is left out (fork, resume)."""
    if subagent_type is not None:
        extra = {"subagent_type": subagent_type, **extra}
    return tool_call("Agent", description=description, prompt=prompt, **extra)


def write_script(folder: Path, agents: list[dict[str, Any]], name: str = "script.json") -> Path:
    path = folder / name
    path.write_text(json.dumps({"record": "requests.jsonl", "agents": agents}))
    return path


def run_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    preexec_fn: Callable[[], None] | None = None,
) -> CliRun:
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "subagents", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        preexec_fn=preexec_fn,
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


def recorded(folder: Path) -> list[dict[str, Any]]:
    """The requests recorded so far. A line another process is still appending (large lines
    take more than one page; the reader takes no lock) is not one yet: only whole lines."""
    text = (folder / "requests.jsonl").read_text()
    whole = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in whole.splitlines() if line.strip()]


def pid_alive(pid: int) -> bool:
    """False once ``pid`` is gone or a zombie (dead, waiting to be reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: it exited mid-read
        return False
    return fields[0] not in ("Z", "X")


def wait_until_dead(pid: int, timeout_s: float = 2.5) -> bool:
    """Poll until ``pid`` is dead (reaping may lag a kill); True when it is."""
    import time

    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def script_args(script: Path, *extra: str, output_format: str, prompt: str) -> list[str]:
    """``-p PROMPT --model scripted:SCRIPT --output-format FORMAT [extra…]``."""
    return ["-p", prompt, "--model", f"scripted:{script}", "--output-format", output_format, *extra]


def run_script(
    script: Path,
    cwd: Path,
    *extra: str,
    output_format: str = "json",
    env: dict[str, str] | None = None,
    prompt: str = "go",
    timeout: float = 60,
) -> CliRun:
    """Run ``subagents`` on a scripted model to the end (see ``script_args``)."""
    args = script_args(script, *extra, output_format=output_format, prompt=prompt)
    return run_cli(*args, cwd=cwd, env=env, timeout=timeout)


def start_script(
    script: Path,
    cwd: Path,
    *extra: str,
    output_format: str = "json",
    prompt: str = "go",
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    """Start ``subagents`` on a scripted model without waiting (stdout and stderr piped)."""
    args = script_args(script, *extra, output_format=output_format, prompt=prompt)
    return subprocess.Popen(
        [sys.executable, "-m", "subagents", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
