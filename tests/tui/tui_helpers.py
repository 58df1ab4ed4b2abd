"""Driving the interactive app in-process with Textual's pilot and the scripted model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from subagents.cli.interactive import build_app
from subagents.cli.main import build_parser
from subagents.tui.app import SubagentsApp
from subagents.tui.chat import AssistantMessage, Notice, ToolLine, UserMessage

SIZE = (120, 40)


def app_for(folder: Path, agents: list[dict[str, Any]], *flags: str) -> SubagentsApp:
    """The app ``subagents --model scripted:SCRIPT --cwd FOLDER FLAGS…`` would open."""
    script = folder / "script.json"
    script.write_text(json.dumps({"record": "requests.jsonl", "agents": agents}))
    args = build_parser().parse_args(
        ["--model", f"scripted:{script}", "--cwd", str(folder), *flags]
    )
    return build_app(args)


async def until(check: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """Wait (polling the app's loop) until ``check()`` is true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.02)


def answers(app: SubagentsApp) -> list[str]:
    return [w.text for w in app.query(AssistantMessage)]


def notices(app: SubagentsApp) -> str:
    return "\n".join(w.source for w in app.query(Notice))


def users(app: SubagentsApp) -> list[str]:
    return [str(w.render()) for w in app.query(UserMessage)]


def tool_lines(app: SubagentsApp) -> list[str]:
    return [str(w.title) for w in app.query(ToolLine)]


def requests(folder: Path) -> list[dict[str, Any]]:
    path = folder / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def send(app: SubagentsApp, pilot: Any, text: str) -> None:
    """Put ``text`` in the input box and press Enter (typing long lines key by key is slow)."""
    app.prompt_box.load_text(text)
    await pilot.press("enter")
