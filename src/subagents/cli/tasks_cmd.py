"""``subagents tasks list|show|output|stop`` and ``subagents transcript ID``.

Everything here reads the durable store of the current project (its canonical path), so it works
from any process, during a run or after it. ``tasks stop`` from another process sets the durable
stop request; the owning process notices it within a second and kills the task. A record whose
owner is gone is marked killed directly (it stays resumable). ``list``, ``show`` and
``output`` show such a record as ``interrupted`` (``shown_status``) instead of ``running``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from subagents.agents.recovery import OwnerAlive, is_orphan, owner_liveness
from subagents.state import ProjectState
from subagents.store.errors import StoreError
from subagents.store.process_identity import is_alive
from subagents.store.protocol import Store
from subagents.store.records import SidecarRecord, public_view
from subagents.store.select import open_store
from subagents.store.transcript import read_records

STOP_WAIT_S = 3.0
INTERRUPTED = "interrupted"
"""Shown for a ``running`` record whose owner died (SIGKILL, power loss) before it ended."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tasks = subparsers.add_parser("tasks", help="list, inspect and stop child agents")
    actions = tasks.add_subparsers(dest="tasks_action", metavar="ACTION", required=True)
    for name, help_text in (
        ("list", "every task of this project, all sessions"),
        ("show", "one task: its public record and lineage"),
        ("output", "the full result text of a task"),
        ("stop", "stop a running task (from any process)"),
    ):
        action = actions.add_parser(name, help=help_text)
        if name != "list":
            action.add_argument("task_id", metavar="ID")
        _common(action)
        action.set_defaults(handler=run)
    transcript = subparsers.add_parser("transcript", help="print a child agent's transcript")
    transcript.add_argument("task_id", metavar="ID")
    _common(transcript)
    transcript.set_defaults(handler=run_transcript, tasks_action="transcript")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", dest="as_json", help="print JSON")
    parser.add_argument("--cwd", dest="task_cwd", metavar="DIR", help="project directory")


def run(args: argparse.Namespace) -> int:
    try:
        store, project = _store(args)
    except StoreError as exc:
        print(f"subagents: error: {exc}", file=sys.stderr)
        return 1
    action = args.tasks_action
    if action == "list":
        return _list(store, project, args.as_json)
    record = _visible(store, project, args.task_id)
    if record is None:
        return 1
    if action == "show":
        return _show(record, args.as_json, owner_liveness(store))
    if action == "output":
        return _output(record, args.as_json, owner_liveness(store))
    return _stop(store, record, args.as_json)


def run_transcript(args: argparse.Namespace) -> int:
    try:
        store, project = _store(args)
    except StoreError as exc:
        print(f"subagents: error: {exc}", file=sys.stderr)
        return 1
    record = _visible(store, project, args.task_id)
    if record is None:
        return 1
    path = Path(record.transcript_path) if record.transcript_path else None
    if path is None or not path.exists():
        print(f"subagents: error: task {record.agent_id} has no transcript", file=sys.stderr)
        return 1
    try:
        records = list(read_records(path))
    except ValueError as exc:
        print(f"subagents: error: {exc}", file=sys.stderr)
        return 1
    messages = [r["message"] for r in records if r.get("type") == "message"]
    if args.as_json:
        _print_json(messages)
    else:
        for message in messages:
            print(render_message(message))
    return 0


def _store(args: argparse.Namespace) -> tuple[Store, str]:
    cwd = Path(args.task_cwd or args.cwd or ".")
    state = ProjectState.for_cwd(cwd)
    return open_store(state), str(state.project)


def _visible(store: Store, project: str, task_id: str) -> SidecarRecord | None:
    """A record of *this* project; another project's children are invisible here."""
    try:
        record = store.get(task_id)
    except Exception as exc:  # malformed id, unreadable record: say which
        print(f"subagents: error: {exc}", file=sys.stderr)
        return None
    if record is None or record.project_path != project:
        print(f"subagents: error: no task {task_id!r} in project {project}", file=sys.stderr)
        return None
    return record


def _list(store: Store, project: str, as_json: bool) -> int:
    alive = owner_liveness(store)
    rows = [summary(record, alive) for record in store.list_agents(project)]
    if as_json:
        _print_json(rows)
        return 0
    if not rows:
        print(f"No tasks in {project}")
        return 0
    print(f"{'ID':10} {'STATUS':10} {'TYPE':18} {'SESSION':10} DESCRIPTION")
    for row in rows:
        print(
            f"{row['id']:10} {row['status']:10} {row['agentType'][:18]:18} "
            f"{row['sessionId'][:8]:10} {row['description']}"
        )
    return 0


def shown_status(record: SidecarRecord, alive: OwnerAlive | None = None) -> str:
    """The status to show: a ``running`` record whose owner process is gone reads
    ``interrupted`` (reconciled on read, nothing written). The owner is checked by its process
    identity (PID *and* start time), so a stranger that got the PID is not taken for it. The
    record itself is settled (``failed``, resumable) by the next session's crash recovery.
    ``alive``: ``recovery.owner_liveness`` of the store (an owner on another host is judged by
    its heartbeat where the store keeps them)."""
    if is_orphan(record, alive) if alive is not None else is_orphan(record):
        return INTERRUPTED
    return record.status


def summary(record: SidecarRecord, alive: OwnerAlive | None = None) -> dict[str, Any]:
    return {
        "id": record.agent_id,
        "type": "local_agent",
        "status": shown_status(record, alive),
        "description": record.description,
        "agentType": record.agent_type,
        "sessionId": record.session_id,
        "createdAt": record.created_at,
        "endedAt": record.ended_at,
    }


def _show(record: SidecarRecord, as_json: bool, alive: OwnerAlive) -> int:
    view = public_view(record)
    if "status" in view:
        view["status"] = shown_status(record, alive)
    view["lineage"] = record.lineage.to_dict()
    if as_json:
        _print_json(view)
        return 0
    for key, value in view.items():
        print(f"{key}: {json.dumps(value) if isinstance(value, dict | list) else value}")
    return 0


def _output(record: SidecarRecord, as_json: bool, alive: OwnerAlive) -> int:
    text = record.result.text
    if not text and record.output_path and Path(record.output_path).exists():
        text = Path(record.output_path).read_text(encoding="utf-8", errors="replace")
    if as_json:
        _print_json({"id": record.agent_id, "status": shown_status(record, alive), "result": text})
    else:
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    return 0


def _stop(store: Store, record: SidecarRecord, as_json: bool) -> int:
    if record.is_terminal:
        return _report_stop(record, as_json, already=True)
    store.request_stop(record.agent_id)
    if record.process is None or not is_alive(record.process):
        # Nobody is running it any more: end it here (it stays resumable).
        record = store.update(record.agent_id, status="killed", resumable=True)
        return _report_stop(record, as_json, already=False)
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        time.sleep(0.1)
        current = store.get(record.agent_id)
        if current is not None and current.is_terminal:
            return _report_stop(current, as_json, already=False)
    print(
        f"subagents: stop requested for {record.agent_id}; its owner has not confirmed yet",
        file=sys.stderr,
    )
    return 1


def _report_stop(record: SidecarRecord, as_json: bool, *, already: bool) -> int:
    if as_json:
        _print_json({"id": record.agent_id, "status": record.status, "alreadyEnded": already})
    elif already:
        print(f"Task {record.agent_id} had already ended ({record.status})")
    else:
        print(f"Task {record.agent_id} stopped ({record.status})")
    return 0


def render_message(message: dict[str, Any]) -> str:
    role = message.get("role", "?")
    content = message.get("content")
    if isinstance(content, str):
        return f"[{role}] {content}"
    parts: list[str] = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(f"[{role}] {block.get('text', '')}")
        elif kind == "tool_use":
            parts.append(f"[{role} → {block.get('name')}] {json.dumps(block.get('input'))}")
        elif kind == "tool_result":
            body = block.get("content")
            text = body if isinstance(body, str) else json.dumps(body)
            flag = " (error)" if block.get("is_error") else ""
            parts.append(f"[tool result{flag}] {text}")
    return "\n".join(parts)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
