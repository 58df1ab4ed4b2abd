"""The real ``subagents`` binary in a real terminal: tmux types, capture-pane reads the screen.

One run: the interactive session opens (no ``-p``, a terminal on both ends), a prompt starts a
background agent that shows in the live panel, the answer completes, two Ctrl+C quit cleanly.
``scripts/setup`` installs Debian's tmux when it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Pane:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False
        )
        return done.stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "ui", *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "ui")

    def wait_for(self, check: Callable[[str], bool], what: str, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if check(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{text}")
            time.sleep(0.1)

    def alive(self) -> bool:
        return "ui" in self.tmux("list-sessions", "-F", "#{session_name}")


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Pane]:
    pane = Pane(f"subagents-test-{os.getpid()}-{tmp_path.name}")
    try:
        yield pane
    finally:
        pane.tmux("kill-server")


def start(pane: Pane, folder: Path, script: Path, home: Path, *, size: str = "120x36") -> None:
    width, height = size.split("x")
    command = " ".join(
        [
            "env -u COLUMNS -u LINES",  # Textual would take them over the terminal's size
            f"SUBAGENTS_HOME={home}",
            "TERM=xterm-256color",
            sys.executable,
            "-m",
            "subagents",
            "--model",
            f"scripted:{script}",
            "--cwd",
            str(folder),
            f"; echo EXITED $? > {folder / 'exit-code'}",
        ]
    )
    pane.tmux(
        "new-session", "-d", "-s", "ui", "-x", width, "-y", height, "bash", "--norc", "-c", command
    )


def demo_script(folder: Path) -> Path:
    script = folder / "script.json"
    agent = {
        "name": "Agent",
        "input": {
            "description": "survey the repo",
            "prompt": "look around",
            "subagent_type": "Explore",
            "run_in_background": True,
        },
    }
    script.write_text(
        json.dumps(
            {
                "agents": [
                    {
                        "agent_type": "main",
                        "turns": [
                            {"tool_calls": [agent]},
                            {"text": "The answer is **42**; a survey runs in the background."},
                            {"text": "The survey came back."},
                        ],
                    },
                    {
                        "agent_type": "Explore",
                        "turns": [
                            {"tool_calls": [{"name": "Glob", "input": {"pattern": "*"}}]},
                            {"text": "two files", "delay_ms": 3000},
                        ],
                    },
                ]
            }
        )
    )
    return script


def test_the_binary_shows_the_panel_and_a_completed_answer(pane: Pane, tmp_path: Path) -> None:
    home = tmp_path / "home"
    start(pane, tmp_path, demo_script(tmp_path), home)
    pane.wait_for(lambda s: "subagents · scripted:script.json" in s, "the session to open")
    pane.keys("what is the answer?")
    pane.keys("Enter")
    screen = pane.wait_for(lambda s: "The answer is 42" in s, "the completed answer")
    screen = pane.wait_for(lambda s: "Explore" in s and "1 agent running" in s, "the panel row")
    row = next(line for line in screen.splitlines() if "Explore" in line)
    assert "survey the repo" in row and " bg " in row, row
    pane.wait_for(lambda s: "The survey came back" in s, "the background completion's turn")
    pane.keys("C-c")
    pane.keys("C-c")
    deadline = time.monotonic() + 20
    while not (tmp_path / "exit-code").exists():
        assert time.monotonic() < deadline, f"the app did not quit:\n{pane.screen()}"
        time.sleep(0.1)
    assert (tmp_path / "exit-code").read_text().split() == ["EXITED", "0"]
    sessions = list((home / "projects").glob("*/sessions/*.jsonl"))
    assert len(sessions) == 1, "the session's transcript is on disk (resumable with -c)"
