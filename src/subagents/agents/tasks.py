"""The task framework: one registry and one state machine for every kind of background work.

A task is anything that runs beside the conversation and reports back later: a background shell
(``local_bash``), a background child agent (``local_agent``), a teammate, a workflow. Each kind has
its own entry point (the Bash tool, the Agent tool, ...) and its own rendering, so the only
operation dispatched per type is ``kill`` (registered with ``register_kind``).

State machine: ``pending -> running -> completed | failed | killed``. Terminal is final: nothing
moves a finished task again, so a late "completed" can never overwrite "killed" and a notification
flag, once set, stays set.

Atomicity: the registry lives on one asyncio event loop and its mutating methods are plain
(synchronous) functions. Between the check ("is it still running?", "was it notified?") and the
set there is no ``await``, so no other coroutine can interleave; that is what makes ``finish`` and
``mark_notified`` check-then-set operations that exactly one caller wins. They must not be called
from other threads.

Output files are named after task ids (``<id>.output``), which come from a CSPRNG
(``subagents.ids``) and are created ``O_CREAT|O_EXCL|O_NOFOLLOW``: a symlink planted at the path
makes the open fail instead of writing through it.
"""

from __future__ import annotations

import builtins
import collections
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

from subagents import ids
from subagents.state import ensure_private_dir

__all__ = [
    "DEFAULT_EVICT_GRACE_S",
    "TERMINAL_STATUSES",
    "KillFn",
    "TaskOutputError",
    "TaskRegistry",
    "TaskState",
    "TaskStatus",
    "TaskType",
    "TerminalListener",
    "UnknownTaskError",
    "create_output_fd",
    "create_output_file",
    "is_terminal",
    "open_output_file",
]

log = logging.getLogger(__name__)

TaskType = Literal[
    "local_bash",
    "local_agent",
    "remote_agent",
    "in_process_teammate",
    "local_workflow",
    "monitor",
    "dream",
]
TaskStatus = Literal["pending", "running", "completed", "failed", "killed"]
TERMINAL_STATUSES: Final[frozenset[TaskStatus]] = frozenset({"completed", "failed", "killed"})
TASK_TYPES: Final[frozenset[str]] = frozenset(get_args(TaskType))
DEFAULT_EVICT_GRACE_S = 30.0

_READY_DIRS: set[Path] = set()
"""Output directories made private (0700) by this process. A thousand background children
share one directory: checking it once, not with a ``stat`` per child, and relying on the open's
ENOENT if it was removed since, saves a system call per child."""
_last_ready: list[tuple[Path, str]] = []
"""The directory ``_ready_dir`` made ready last and its text: a thousand children
share one ``Path`` object, so the set look-up (a ``Path`` hash) and ``str`` happen once."""
_OUTPUT_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def is_terminal(status: TaskStatus) -> bool:
    """Completed, failed and killed are final; pending and running are not."""
    return status in TERMINAL_STATUSES


class TaskOutputError(Exception):
    """A task's output file could not be created safely (bad id, existing file, symlink)."""


class UnknownTaskError(KeyError):
    """No task with that id is in memory (never created, or evicted after its grace period)."""

    def __str__(self) -> str:
        return f"No task with id {self.args[0]!r}"


@dataclass(kw_only=True)
class TaskState:
    """The in-memory record of one task. Mutated only through ``TaskRegistry``."""

    id: str
    type: TaskType
    status: TaskStatus = "pending"
    description: str
    owner_agent_id: str
    """The agent that started the task; its inbox gets the task's notification."""
    session_id: str
    created_at: float = field(default_factory=time.time)
    """Wall-clock times (``time.time()``), for display and durable records."""
    started_at: float | None = None
    ended_at: float | None = None
    output_file: str | None = None
    """The output file's path as text (what records, notices and appends use); read it as a
    ``Path`` through ``output_path``."""
    result: str | None = None
    error: str | None = None
    notified: bool = False
    """Set (once, atomically) before the completion notification is sent."""
    evict_after: float | None = None
    """Monotonic time after which a terminal task is dropped from memory."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Type-specific facts (a shell's command and exit code, an agent's stats)."""

    @property
    def terminal(self) -> bool:
        return is_terminal(self.status)

    @property
    def output_path(self) -> Path | None:
        """The output file (None: the task has none), a new ``Path`` at each read. Kept as
        text: a ``pathlib`` join and its ``str`` cost a background child ~15 k instructions
        and two tracked objects, and the hot readers want the text anyway."""
        return None if self.output_file is None else Path(self.output_file)

    @output_path.setter
    def output_path(self, path: Path | None) -> None:
        self.output_file = None if path is None else os.fspath(path)


_new = object.__new__


def _new_task(
    task_id: str,
    task_type: TaskType,
    description: str,
    owner_agent_id: str,
    session_id: str,
    output_file: str | None,
) -> TaskState:
    """``TaskState(id=..., type=..., description=..., owner_agent_id=..., session_id=...,
    output_file=...)`` with every other field at its default: the instance made by
    ``object.__new__`` and its fields stored one by one, in field order (the dataclass's own
    ``__init__`` does the same stores, behind six keywords and two ``default_factory`` calls:
    8.4 k instructions against 2.9 k, callgrind of 2,000). ``tests/test_task_create.py``
    checks every field against the dataclass's, so a field added later cannot be missed."""
    task: TaskState = _new(TaskState)
    task.id = task_id
    task.type = task_type
    task.status = "pending"
    task.description = description
    task.owner_agent_id = owner_agent_id
    task.session_id = session_id
    task.created_at = time.time()
    task.started_at = None
    task.ended_at = None
    task.output_file = output_file
    task.result = None
    task.error = None
    task.notified = False
    task.evict_after = None
    task.extra = {}
    return task


KillFn = Callable[[TaskState], Awaitable[None]]
TerminalListener = Callable[[TaskState], None]


class TaskRegistry:
    """Every task of a session, shared by all agents (children reach the root's registry)."""

    def __init__(
        self,
        *,
        evict_grace_s: float = DEFAULT_EVICT_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if evict_grace_s < 0:
            raise ValueError(f"evict_grace_s must be >= 0, got {evict_grace_s}")
        self.evict_grace_s = evict_grace_s
        self._clock = clock
        self._tasks: dict[str, TaskState] = {}
        self._kinds: dict[str, KillFn] = {}
        self._listeners: list[TerminalListener] = []
        self._ended: collections.deque[tuple[float, str]] = collections.deque()

    # -- creation and lookup ---------------------------------------------------------------

    def create(
        self,
        type: TaskType,
        *,
        description: str,
        owner_agent_id: str,
        session_id: str,
        output_dir: Path | None = None,
        task_id: str | None = None,
    ) -> TaskState:
        """Register a new ``pending`` task; with ``output_dir``, create its output file too.

        ``task_id`` lets a child agent's task carry the agent's own (already drawn) id."""
        if type not in TASK_TYPES:
            raise ValueError(f"Unknown task type {type!r}; expected one of {sorted(TASK_TYPES)}")
        if self._ended:  # (nothing has ended: no call, no clock read — a swarm's launches)
            self.evict_expired()
        if task_id is None:
            task_id = self._fresh_id(type)
        elif not ids.is_valid_id(task_id) or task_id in self._tasks:
            raise ValueError(f"task id {task_id!r} is malformed or already registered")
        output = None
        if output_dir is not None:  # (the id is valid: checked or drawn just above)
            path, fd = _open_output(output_dir, task_id, append=False)
            os.close(fd)
            output = path
        task = _new_task(task_id, type, description, owner_agent_id, session_id, output)
        self._tasks[task_id] = task
        return task

    def _fresh_id(self, task_type: TaskType) -> str:
        """A new CSPRNG id; a collision with a live task (odds ~1 in 2.8e12) just draws again."""
        while (task_id := ids.new_id(task_type)) in self._tasks:
            pass
        return task_id

    def get(self, task_id: str) -> TaskState:
        """The task with exactly this id; ``UnknownTaskError`` when there is none."""
        task = self._tasks.get(task_id)
        if task is None:
            raise UnknownTaskError(task_id)
        return task

    def find(self, task_id: str) -> TaskState | None:
        """The task with exactly this id, or None. No prefix matching: ids are not guessable."""
        return self._tasks.get(task_id)

    def list(self) -> builtins.list[TaskState]:
        return list(self._tasks.values())

    def running(self) -> builtins.list[TaskState]:
        return [task for task in self._tasks.values() if task.status == "running"]

    # -- state transitions (synchronous: no await between check and set) -------------------

    def start(self, task_id: str) -> bool:
        """pending -> running; False (and no change) from any other status."""
        task = self.get(task_id)
        if task.status != "pending":
            return False
        task.status = "running"
        task.started_at = time.time()
        return True

    def finish(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> bool:
        """Move a live task to a terminal status; True only for the call that made the move."""
        if not is_terminal(status):
            raise ValueError(f"finish() needs a terminal status, got {status!r}")
        task = self.get(task_id)
        if task.terminal:
            return False
        task.status = status
        task.result = result
        task.error = error
        task.ended_at = time.time()
        task.evict_after = self._clock() + self.evict_grace_s
        self._ended.append((task.evict_after, task.id))
        self._announce(task)
        return True

    def mark_notified(self, task_id: str) -> bool:
        """Claim the right to send the task's notification; True for the first caller only."""
        task = self.get(task_id)
        if task.notified:
            return False
        task.notified = True
        return True

    def release(self) -> None:
        """Forget every listener and kill operation (the session is over): they are bound
        methods of the managers that hold this registry, a reference cycle otherwise left
        to a full garbage collection. The tasks themselves stay readable."""
        self._listeners.clear()
        self._kinds.clear()

    def on_terminal(self, callback: TerminalListener) -> None:
        """Call ``callback(task)`` right after any task reaches a terminal status."""
        self._listeners.append(callback)

    def _announce(self, task: TaskState) -> None:
        """Listeners are told in order; one failing listener neither stops the others nor
        undoes the transition (it has happened)."""
        for listener in list(self._listeners):
            try:
                listener(task)
            except Exception:
                log.exception("terminal listener %r failed for task %s", listener, task.id)

    # -- kill: the one per-type operation ---------------------------------------------------

    def register_kind(self, type: TaskType, kill: KillFn) -> None:
        """Install the kill operation of one task type (one per type; the last one wins)."""
        if type not in TASK_TYPES:
            raise ValueError(f"Unknown task type {type!r}; expected one of {sorted(TASK_TYPES)}")
        self._kinds[type] = kill

    async def kill(self, task_id: str) -> bool:
        """Stop a task with its type's kill operation; it ends ``killed``.

        Returns False when the task was already terminal (nothing is done then). A type without a
        registered kill operation is only marked killed. The task is marked killed even when the
        kill operation raises (the error propagates): a half-stopped task must not look alive.
        A task that finished by itself while it was being killed keeps its own status.
        """
        task = self.get(task_id)
        if task.terminal:
            return False
        kill_fn = self._kinds.get(task.type)
        try:
            if kill_fn is not None:
                await kill_fn(task)
        finally:
            self.finish(task_id, "killed", error=task.error or "killed")
        return task.status == "killed"

    # -- eviction --------------------------------------------------------------------------

    def evict_expired(self, now: float | None = None) -> builtins.list[str]:
        """Drop terminal tasks whose grace period is over; returns their ids.

        Only the in-memory entry goes: a durable record, where a task type keeps one, stays.
        """
        moment = self._clock() if now is None else now
        expired: builtins.list[str] = []
        # Terminal tasks queue up in the order they ended, with the same grace each, so the
        # expired ones are at the front: no scan of every task on each create.
        while self._ended and self._ended[0][0] <= moment:
            _, task_id = self._ended.popleft()
            task = self._tasks.get(task_id)
            if task is not None and task.terminal:
                del self._tasks[task_id]
                expired.append(task_id)
        return expired


def create_output_fd(directory: Path, task_id: str, *, append: bool = False) -> tuple[Path, int]:
    """Create ``<directory>/<task_id>.output`` (0600) and return it with an open write fd.

    ``O_EXCL`` refuses any existing file and ``O_NOFOLLOW`` any symlink, dangling or not, so a
    link planted at a predicted path is never written through. The directory is made 0700.
    """
    path, fd = _create_output(directory, task_id, append=append)
    return Path(path), fd


def _create_output(directory: Path, task_id: str, *, append: bool) -> tuple[str, int]:
    """``create_output_fd`` with the path as text."""
    if not ids.is_valid_id(task_id):
        raise TaskOutputError(f"Invalid task id for an output file: {task_id!r}")
    return _open_output(directory, task_id, append=append)


def _open_output(directory: Path, task_id: str, *, append: bool) -> tuple[str, int]:
    """``_create_output`` for an id known to be valid."""
    path = f"{_ready_dir(directory)}{task_id}.output"
    flags = _OUTPUT_FLAGS | (os.O_APPEND if append else 0)
    try:
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            # The directory went away since it was made: make it again (0700), once more.
            ensure_private_dir(directory)
            fd = os.open(path, flags, 0o600)
    except FileExistsError as exc:
        kind = "a symlink" if os.path.islink(path) else "an existing file"
        raise TaskOutputError(
            f"Refusing to create task output file {path}: {kind} is already there"
        ) from exc
    except OSError as exc:
        raise TaskOutputError(f"Cannot create task output file {path}: {exc.strerror}") from exc
    return path, fd


def _ready_dir(directory: Path) -> str:
    """``directory`` made private (0700) once per process (``_READY_DIRS``), as text ending
    in ``/``."""
    if _last_ready and _last_ready[0][0] is directory:
        return _last_ready[0][1]
    if directory not in _READY_DIRS:
        ensure_private_dir(directory)
        _READY_DIRS.add(directory)
    text = os.fspath(directory)
    text = text if text.endswith("/") else f"{text}/"
    _last_ready[:] = [(directory, text)]
    return text


def create_output_file(directory: Path, task_id: str) -> str:
    """Create a task's empty output file safely (see ``create_output_fd``); returns its path
    as text (``TaskState.output_file``)."""
    path, fd = _create_output(directory, task_id, append=False)
    os.close(fd)
    return path


def open_output_file(directory: Path, task_id: str) -> Path:
    """``create_output_file``, its path as a ``Path``."""
    return Path(create_output_file(directory, task_id))
