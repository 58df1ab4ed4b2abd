"""``TeamHost``: the lead's side of its team, in the lead's process.

It watches the lead's mailbox, keeps track of which teammates are busy, and hands what the team
says to the lead's inbox when the team is quiet (docs/teams.md: no teammate busy, or a message
has waited ``team_quiet_ms``). It starts teammates — a ``subagents teammate-worker`` process in
its own process group, or an in-process child — and awaits each one: a teammate that ends
without having approved a shutdown (kill -9, a crash) gets its tasks released, its record
reconciled and one notification to the lead. ``shutdown`` (the lead's run is over) asks every
live teammate process to stop (SIGTERM to its group), waits, then kills the group, so no
teammate outlives its lead's run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from subagents.agents.teams.config import TeamDirectory, member_alive, teammates
from subagents.agents.teams.files import LEAD_NAME, TeamError
from subagents.agents.teams.inbox import MailboxWatcher
from subagents.agents.teams.mailbox import new_message, render
from subagents.agents.teams.membership import TeamMembership
from subagents.agents.teams.permission_relay import REQUEST as PERMISSION_REQUEST
from subagents.agents.teams.permission_relay import LeadRelay
from subagents.agents.teams.spawn import TeammateSpawn, write_spawn_file
from subagents.loop.inbox import Inbox, InboxItem
from subagents.store.process_identity import start_identity

log = logging.getLogger(__name__)

STOP_WAIT_S = 5.0
MEMBER_BUSY = "member_busy"
"""An internal mailbox line: the named member was sent work (never shown to a model)."""


PARENT_ENV = "SUBAGENTS_TEAMMATE_PARENT_PID"
"""The process a teammate worker shares its life with when that is not its lead: the Ray host
that launched it for the lead (Ray ends the host with its lead; the worker then sees its parent
gone and leaves, as when its lead dies)."""


class TeammateProcess(Protocol):
    """A started teammate worker, wherever it runs."""

    @property
    def pid(self) -> int: ...

    @property
    def pid_start(self) -> str | None:
        """Its start identity (``process_identity.start_identity``) where it runs."""
        ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int | None:
        """Its exit code (negative: killed by that signal) once it has ended."""
        ...

    def signal_group(self, sig: signal.Signals) -> None:
        """Signal its process group (gone already: nothing happens)."""
        ...


@runtime_checkable
class TeammateLauncher(Protocol):
    """Starts teammate worker processes: here (``LocalLauncher``) or on a cluster node (the Ray
    executor, ``distributed/ray_executor.py``)."""

    async def launch_teammate(
        self, argv: list[str], *, cwd: str, env: dict[str, str], log_path: str
    ) -> TeammateProcess: ...


@dataclass
class _LocalTeammate:
    process: asyncio.subprocess.Process
    pid_start: str | None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def wait(self) -> int | None:
        return await self.process.wait()

    def signal_group(self, sig: signal.Signals) -> None:
        signal_group(self.process.pid, sig)


class LocalLauncher:
    """A teammate worker as a child process of the lead, in its own process group."""

    async def launch_teammate(
        self, argv: list[str], *, cwd: str, env: dict[str, str], log_path: str
    ) -> TeammateProcess:
        return await launch_process(argv, cwd=cwd, env=env, log_path=log_path)


async def launch_process(
    argv: list[str], *, cwd: str, env: dict[str, str], log_path: str
) -> _LocalTeammate:
    """Start ``argv`` in its own process group, stdout and stderr appended to ``log_path``."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            env=env,
        )
    finally:
        os.close(fd)
    return _LocalTeammate(process=process, pid_start=start_identity(process.pid))


LOCAL_LAUNCHER = LocalLauncher()


@dataclass
class _Teammate:
    name: str
    agent_id: str
    process: TeammateProcess | None = None
    task: asyncio.Task[Any] | None = None
    watcher: asyncio.Task[None] | None = None
    stopping: bool = False


@dataclass(kw_only=True, frozen=True)
class WorkerOptions:
    """What a teammate process needs of its lead's options (None model: in-process only)."""

    model: str | None
    home: str
    agents_json: str | None = None
    settings_file: str | None = None
    permission_mode: str | None = None
    load_settings: bool = True
    trusted: bool = True


@dataclass(kw_only=True)
class TeamHost:
    """One lead's team, seen from the lead's process."""

    directory: TeamDirectory
    root_inbox: Inbox
    quiet_ms: int
    worker: WorkerOptions
    on_crash: Callable[[str, str], Awaitable[None]] | None = None
    """Called (name, agent id) after a teammate ended uncleanly (record reconciliation)."""
    launcher: TeammateLauncher = LOCAL_LAUNCHER
    """Where teammate workers start (the session's executor when it can launch them)."""
    relay: LeadRelay | None = None
    """Asks the lead's user for its process teammates (None: a headless lead; they deny)."""
    membership: TeamMembership | None = None
    busy: set[str] = field(default_factory=set)
    held: list[InboxItem] = field(default_factory=list)
    held_since: float | None = None
    members: dict[str, _Teammate] = field(default_factory=dict)
    _watcher: MailboxWatcher | None = None

    # -- the team ----------------------------------------------------------------------------

    def lead(self, membership: TeamMembership) -> None:
        """This session now leads ``membership``'s team: watch its mailbox."""
        self.membership = membership
        self._watcher = MailboxWatcher(
            membership.mailbox(LEAD_NAME), self._arrived, on_tick=self._release_if_quiet
        )
        self._watcher.start(f"mailbox:{membership.team_name}/{LEAD_NAME}")

    def rejoin(self, session_id: str) -> TeamMembership | None:
        """A resumed lead takes its team back: members whose process is gone (its previous
        run was killed) are marked inactive and their unfinished tasks released."""
        for config in self.directory.all():
            if config.get("leadSessionId") != session_id:
                continue
            membership = TeamMembership(
                team_name=config["name"], name=LEAD_NAME, directory=self.directory
            )
            self.membership = membership
            self._mark_gone()
            for member in teammates(config):
                if not member_alive(member):
                    membership.tasks.release_owned(member["name"])
            self.lead(membership)
            return membership
        return None

    async def left(self) -> None:
        """The team was deleted."""
        if self._watcher is not None:
            await self._watcher.stop()
            self._watcher = None
        self.membership = None
        self.busy.clear()
        self.root_inbox.wake()

    def expecting(self) -> bool:
        """Whether the lead should wait: a teammate is busy, or team messages are held."""
        return bool(self.held) or any(self._live(name) for name in self.busy)

    def _live(self, name: str) -> bool:
        member = self.members.get(name)
        return member is not None and not (member.task is not None and member.task.done())

    # -- messages ----------------------------------------------------------------------------

    def sent_work(self, names: list[str]) -> None:
        """The lead sent these teammates a message: each is busy until its next idle."""
        self.busy.update(n for n in names if n in self.members)

    def _arrived(self, line: int, message: dict[str, Any]) -> None:
        kind, sender = message.get("type"), str(message.get("from", ""))
        if kind == MEMBER_BUSY:
            self.busy.add(sender)
            return
        assert self.membership is not None
        if kind == PERMISSION_REQUEST:  # for the lead's user, not its model
            if self.relay is not None:
                self.relay.arrived(self.membership, message)
            else:
                log.warning("a permission_request from %r, and no one to ask: dropped", sender)
            return
        if kind in ("idle_notification", "plan_approval_request"):
            self.busy.discard(sender)  # idle, or waiting on the lead: tell the lead now
        mailbox = self.membership.mailbox(LEAD_NAME)
        item = InboxItem(
            id=str(message.get("id")),
            text=render(message),
            on_delivered=lambda: mailbox.advance(line),
        )
        self.hold(item)

    def hold(self, item: InboxItem) -> None:
        if not self.held:
            self.held_since = time.monotonic()
        self.held.append(item)
        self._release_if_quiet()

    def _release_if_quiet(self) -> None:
        if not self.held:
            return
        waited_ms = (time.monotonic() - (self.held_since or 0)) * 1000
        if any(self._live(n) for n in self.busy) and waited_ms < self.quiet_ms:
            return
        held, self.held, self.held_since = self.held, [], None
        for item in held:
            self.root_inbox.put(item)
        self.root_inbox.wake()

    # -- teammates ---------------------------------------------------------------------------

    async def start_process(self, spawn: TeammateSpawn) -> int:
        """Start a teammate worker process (through ``launcher``); returns its pid."""
        membership = self._require()
        spawn_file = membership.paths.member_file(spawn.name, ".json")
        write_spawn_file(spawn_file, spawn)
        log_path = membership.paths.member_file(spawn.name, ".log")
        process = await self.launcher.launch_teammate(
            [sys.executable, "-m", "subagents", "teammate-worker", str(spawn_file)],
            cwd=spawn.cwd,
            env={**os.environ, "SUBAGENTS_HOME": spawn.home},
            log_path=str(log_path),
        )
        member = _Teammate(name=spawn.name, agent_id=spawn.agent_id, process=process)
        self._track(member)
        member.watcher = asyncio.get_running_loop().create_task(
            self._await_exit(member), name=f"teammate:{spawn.team_name}/{spawn.name}"
        )
        self.directory.set_member(
            spawn.team_name, spawn.name, pid=process.pid, pidStart=process.pid_start
        )
        return process.pid

    def started_in_process(self, name: str, agent_id: str, task: asyncio.Task[Any]) -> None:
        member = _Teammate(name=name, agent_id=agent_id, task=task)
        self._track(member)
        member.watcher = asyncio.get_running_loop().create_task(
            self._await_exit(member), name=f"teammate-watch:{name}"
        )

    def _track(self, member: _Teammate) -> None:
        self.members[member.name] = member
        self.busy.add(member.name)

    async def _await_exit(self, member: _Teammate) -> None:
        code: int | None = None
        if member.process is not None:
            code = await member.process.wait()
        elif member.task is not None:
            await asyncio.gather(member.task, return_exceptions=True)
            code = 0 if not member.task.cancelled() else -signal.SIGKILL
        await self._ended(member, code)

    async def _ended(self, member: _Teammate, code: int | None) -> None:
        """A teammate is gone: clean (it approved a shutdown, or was stopped) or not."""
        if self._watcher is not None:
            self._watcher.check()  # what it wrote before it ended is read before it counts gone
        self.busy.discard(member.name)
        membership = self.membership
        if membership is None:
            self.root_inbox.wake()
            return
        clean = code == 0 or member.stopping
        released = await asyncio.to_thread(membership.tasks.release_owned, member.name)
        if not clean:
            await asyncio.to_thread(
                self.directory.set_member, membership.team_name, member.name, isActive=False
            )
            if self.on_crash is not None:
                await self.on_crash(member.name, member.agent_id)
            self.hold(self._crash_notice(member, code, released))
        self.root_inbox.wake()

    def _crash_notice(self, member: _Teammate, code: int | None, released: list[str]) -> InboxItem:
        how = (
            f"was killed by signal {-code}" if code is not None and code < 0 else f"exited ({code})"
        )
        freed = ", ".join(f"#{t}" for t in released) or "none"
        text = (
            f"Teammate {member.name} ({member.agent_id}) {how} without shutting down. Tasks it "
            f"had in progress were released for others to claim: {freed}. Spawn a new teammate "
            "if the work still needs doing."
        )
        message = new_message(member.name, LEAD_NAME, text, type="teammate_terminated")
        return InboxItem(id=f"teammate-exit:{member.agent_id}", text=render(message))

    def _config(self) -> dict[str, Any] | None:
        if self.membership is None:
            return None
        try:
            return self.directory.load(self.membership.team_name)
        except TeamError:
            return None

    def _require(self) -> TeamMembership:
        if self.membership is None:
            raise TeamError("This session leads no team: call TeamCreate first")
        return self.membership

    # -- the end -----------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """The lead's run is over: stop every teammate still running, leave none behind."""
        if self.membership is None:
            return
        running = [m for m in self.members.values() if m.watcher and not m.watcher.done()]
        for member in running:
            member.stopping = True
            if member.process is not None and member.process.returncode is None:
                member.process.signal_group(signal.SIGTERM)
            elif member.task is not None:
                member.task.cancel("the lead's run ended")
        watchers = {m.watcher for m in running if m.watcher is not None}
        if watchers:
            _, late = await asyncio.wait(watchers, timeout=STOP_WAIT_S)
            for member in running:
                if member.process is not None and member.watcher in late:
                    member.process.signal_group(signal.SIGKILL)
            if late:
                await asyncio.wait(late, timeout=STOP_WAIT_S)
        for member in running:
            if member.process is not None:
                member.process.signal_group(signal.SIGKILL)  # leftovers of its group
        if self.relay is not None:
            await self.relay.close()
        self._mark_gone()
        await self.left()

    def _mark_gone(self) -> None:
        """Members whose process is gone are inactive (whatever they managed to write)."""
        membership = self.membership
        if membership is None:
            return

        def change(config: dict[str, Any]) -> None:
            for member in teammates(config):
                if member.get("isActive") and not member_alive(member):
                    member["isActive"] = False

        try:
            self.directory.update(membership.team_name, change)
        except TeamError:
            pass


def signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
