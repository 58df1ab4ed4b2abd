"""The team's shared task list: one JSON file per task, every change under one ``flock``.

The rules of docs/teams.md "Atomic claims" are checked *inside* the lock, against what is on disk
at that moment: a task has at most one owner, a blocked task cannot be started, completing a task
unblocks its dependants, deleting one removes every reference to it. So five processes racing for
the same task see exactly one winner, and no update is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from subagents.agents.teams.config import now_ms
from subagents.agents.teams.files import TeamError, locked, read_json, write_json

TaskStatus = Literal["pending", "in_progress", "completed"]
STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed")


@dataclass(kw_only=True)
class TaskChange:
    """What one ``TaskUpdate`` asks for (None: leave as it is)."""

    subject: str | None = None
    description: str | None = None
    active_form: str | None = None
    status: str | None = None
    """``pending|in_progress|completed`` or ``deleted``."""
    owner: str | None = None
    """A member name; "" clears the owner."""
    add_blocks: list[str] = field(default_factory=list)
    add_blocked_by: list[str] = field(default_factory=list)
    metadata: dict[str, Any] | None = None


class TaskList:
    """The task list of one team (``<project state>/task-lists/<team>``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def _lock(self) -> Path:
        return self.folder / ".lock"

    def _path(self, task_id: str) -> Path:
        if not task_id.isdigit():
            raise TeamError(f"taskId {task_id!r} is not a task id (task ids are numbers)")
        return self.folder / f"{int(task_id)}.json"

    def _require_folder(self) -> None:
        if not self.folder.is_dir():
            raise TeamError(f"The task list {self.folder} does not exist (was the team deleted?)")

    # reading

    def get(self, task_id: str) -> dict[str, Any] | None:
        self._require_folder()
        with locked(self._lock, shared=True):
            return read_json(self._path(task_id))

    def all(self) -> list[dict[str, Any]]:
        self._require_folder()
        with locked(self._lock, shared=True):
            return self._all()

    def _all(self) -> list[dict[str, Any]]:
        tasks = []
        for path in self.folder.glob("*.json"):
            task = read_json(path)
            if task is not None:
                tasks.append(task)
        return sorted(tasks, key=lambda t: int(t["id"]))

    # changing

    def create(
        self,
        subject: str,
        description: str,
        *,
        active_form: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        self._require_folder()
        with locked(self._lock):
            mark = self.folder / ".highwatermark"
            raw = mark.read_text().strip() if mark.exists() else "0"
            task_id = str(int(raw or "0") + 1)
            mark.write_text(task_id)
            stamp = now_ms()
            task: dict[str, Any] = {
                "id": task_id,
                "subject": subject,
                "description": description,
                "activeForm": active_form,
                "status": "pending",
                "owner": None,
                "blocks": [],
                "blockedBy": [],
                "metadata": metadata or {},
                "createdAt": stamp,
                "updatedAt": stamp,
            }
            write_json(self._path(task_id), task)
        return task

    def update(self, task_id: str, change: TaskChange, *, by: str, is_lead: bool) -> dict[str, Any]:
        """Apply ``change`` as member ``by``; the rules are checked under the lock."""
        self._require_folder()
        with locked(self._lock):
            task = self._load(task_id)
            if change.status == "deleted":
                self._delete(task)
                return {**task, "status": "deleted"}
            touched = {task_id: task}
            self._link(task, change, touched)
            _apply_fields(task, change)
            if change.owner is not None:
                _set_owner(task, change.owner, by=by, is_lead=is_lead)
            if change.status is not None:
                claimant = task.get("owner") or by if is_lead else by
                self._set_status(task, change.status, by=claimant, touched=touched)
            stamp = now_ms()
            for changed in touched.values():
                changed["updatedAt"] = stamp
                write_json(self._path(changed["id"]), changed)
        return task

    def release_owned(self, owner: str) -> list[str]:
        """Put ``owner``'s unfinished tasks back (a teammate that died or left): ids released."""
        if not self.folder.is_dir():
            return []
        released = []
        with locked(self._lock):
            for task in self._all():
                if task.get("owner") == owner and task.get("status") != "completed":
                    task["owner"] = None
                    task["status"] = "pending"
                    task["updatedAt"] = now_ms()
                    write_json(self._path(task["id"]), task)
                    released.append(task["id"])
        return released

    def delete(self, task_id: str) -> None:
        """Remove a task outright (a TaskCreated hook refused it)."""
        with locked(self._lock):
            self._delete(self._load(task_id))

    # internals (the lock is held)

    def _load(self, task_id: str) -> dict[str, Any]:
        task = read_json(self._path(task_id))
        if task is None:
            raise TeamError(f"Task #{task_id} not found")
        return task

    def _delete(self, task: dict[str, Any]) -> None:
        for other in self._all():
            if other["id"] == task["id"]:
                continue
            if task["id"] in other["blocks"] or task["id"] in other["blockedBy"]:
                other["blocks"] = [i for i in other["blocks"] if i != task["id"]]
                other["blockedBy"] = [i for i in other["blockedBy"] if i != task["id"]]
                write_json(self._path(other["id"]), other)
        self._path(task["id"]).unlink(missing_ok=True)

    def _link(
        self, task: dict[str, Any], change: TaskChange, touched: dict[str, dict[str, Any]]
    ) -> None:
        """``addBlocks`` / ``addBlockedBy``: both sides kept in step, cycles refused."""
        pairs = [(task["id"], other) for other in change.add_blocks]
        pairs += [(other, task["id"]) for other in change.add_blocked_by]
        for blocker_id, blocked_id in pairs:
            blocker = self._touch(blocker_id, touched)
            blocked = self._touch(blocked_id, touched)
            if blocker_id == blocked_id or self._reaches(blocked_id, blocker_id, touched):
                raise TeamError(
                    f"Task #{blocker_id} cannot block #{blocked_id}: that would make a cycle"
                )
            if blocker.get("status") == "completed":
                continue  # a completed task blocks nothing
            _add(blocker["blocks"], blocked_id)
            _add(blocked["blockedBy"], blocker_id)

    def _touch(self, task_id: str, touched: dict[str, dict[str, Any]]) -> dict[str, Any]:
        task_id = str(task_id)
        if task_id not in touched:
            touched[task_id] = self._load(task_id)
        return touched[task_id]

    def _reaches(self, start: str, goal: str, touched: dict[str, dict[str, Any]]) -> bool:
        """Whether ``goal`` is reachable from ``start`` along ``blocks`` edges."""
        stack, seen = [start], set()
        while stack:
            current = stack.pop()
            if current == goal:
                return True
            if current in seen:
                continue
            seen.add(current)
            stack.extend(self._touch(current, touched)["blocks"])
        return False

    def _set_status(
        self, task: dict[str, Any], status: str, *, by: str, touched: dict[str, dict[str, Any]]
    ) -> None:
        if status not in STATUSES:
            raise TeamError(f"status {status!r} is not one of {', '.join(STATUSES)}, deleted")
        if status == "in_progress":
            open_blockers = [
                b for b in task["blockedBy"] if self._touch(b, touched)["status"] != "completed"
            ]
            if open_blockers:
                listed = ", ".join(f"#{b}" for b in open_blockers)
                raise TeamError(f"Task #{task['id']} is blocked by {listed}: finish those first")
            owner = task.get("owner")
            if owner and owner != by:
                raise TeamError(f"Task #{task['id']} is already claimed by {owner}")
            if not owner:
                task["owner"] = by
        if status == "completed":
            for dependant_id in task["blocks"]:
                dependant = self._touch(dependant_id, touched)
                dependant["blockedBy"] = [i for i in dependant["blockedBy"] if i != task["id"]]
            task["blocks"] = []
        task["status"] = status


def _apply_fields(task: dict[str, Any], change: TaskChange) -> None:
    if change.subject is not None:
        task["subject"] = change.subject
    if change.description is not None:
        task["description"] = change.description
    if change.active_form is not None:
        task["activeForm"] = change.active_form
    if change.metadata:
        merged = {**task.get("metadata", {}), **change.metadata}
        task["metadata"] = {k: v for k, v in merged.items() if v is not None}


def _set_owner(task: dict[str, Any], owner: str, *, by: str, is_lead: bool) -> None:
    """At most one owner: only the lead may take a task from someone else."""
    current = task.get("owner")
    if owner and current and current != owner and not is_lead:
        raise TeamError(f"Task #{task['id']} is already claimed by {current}")
    task["owner"] = owner or None


def _add(items: list[str], value: str) -> None:
    if value not in items:
        items.append(value)


def blocked_ids(tasks: list[dict[str, Any]]) -> set[str]:
    """Ids of tasks still waiting on an unfinished blocker."""
    status = {t["id"]: t["status"] for t in tasks}
    return {t["id"] for t in tasks if any(status.get(b) != "completed" for b in t["blockedBy"])}
