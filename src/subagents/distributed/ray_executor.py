"""``RayExecutor``: background children on ``ChildHost`` actors of a Ray cluster.

A ``ChildHost`` is an async actor (``max_concurrency`` high, no CPU reserved) hosting many
children's loops at once — one process per child would cost a Python interpreter (~100 MB) each,
while a child spends its life waiting on its model. The executor starts one host per CPU of the
cluster (``SUBAGENTS_RAY_HOSTS`` overrides) on first use and places children round-robin.

Per child the driver (``_drive``) makes one streaming call: it ships the ``RemoteChild``, applies
each ``Progress`` to its own ``AgentRun`` (so supervision, ``TaskOutput`` and the durable activity
write see the child as if it ran here) and the ``Ended`` as the child's end. A stop is forwarded:
the abort signal's callback calls ``ChildHost.stop``, a cancellation cancels the call (Ray
cancels the coroutine). A foreground child, and a child with its own worktree, run locally
(``LOCAL``): a parent waits on the first here, the second's worktree lives on this machine.

When the host dies under the child (its worker process killed, its node lost) the call fails
with a ``RayActorError``; the child is then reconciled at once the way recovery reconciles an
orphan — its durable transcript decides (``recovery.transcript_verdict``): a completed last turn
is kept as completed, anything else ends ``failed`` (interrupted), resumable — and the host is
replaced for later children. Nothing is lost and nothing is reported twice: the driver still
finalizes the child exactly once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
import ray._private.worker as ray_worker
from ray.exceptions import RayActorError, WorkerCrashedError

from subagents.agents.agent_run import AgentJob
from subagents.agents.executor import LOCAL
from subagents.agents.orphan_processes import kill_leftovers, pids_path
from subagents.agents.recovery import transcript_verdict
from subagents.agents.runtime import AgentRuntime
from subagents.agents.teams.host import PARENT_ENV, TeammateProcess, launch_process, signal_group
from subagents.distributed.host import HostedChildren
from subagents.distributed.remote import (
    Ended,
    Progress,
    RemoteChild,
    apply_end,
    apply_progress,
    remote_child,
)
from subagents.loop.query import LoopOutcome
from subagents.observe import provider_name
from subagents.store.process_identity import pid_exists, start_identity

log = logging.getLogger(__name__)

NAMESPACE = "subagents"
_LOST = (RayActorError, WorkerCrashedError)


class ChildHost:
    """Hosts background children on one worker process (``host.HostedChildren``), and starts
    teammate worker processes on its node for the lead (``TeammateLauncher``)."""

    def __init__(self) -> None:
        self._children = HostedChildren()
        self._teammates: dict[int, TeammateProcess] = {}

    async def run(self, remote: RemoteChild) -> Any:
        async for item in self._children.run(remote):
            yield item

    async def stop(self, agent_id: str, reason: str) -> bool:
        return self._children.stop(agent_id, reason)

    async def pid(self) -> int:
        return os.getpid()

    async def running(self) -> list[str]:
        return self._children.running()

    async def start_teammate(
        self, argv: list[str], cwd: str, env: dict[str, str], log_path: str
    ) -> tuple[int, str | None]:
        # The worker's parent is this host, which Ray ends with the lead: the worker watches
        # its parent (``PARENT_ENV``) and leaves when it is gone, as when its lead dies.
        env = {**env, PARENT_ENV: str(os.getpid())}
        process = await launch_process(argv, cwd=cwd, env=env, log_path=log_path)
        self._teammates[process.pid] = process
        return process.pid, process.pid_start

    async def wait_teammate(self, pid: int) -> int | None:
        try:
            return await self._teammates[pid].wait()
        finally:
            self._teammates.pop(pid, None)

    async def signal_teammate(self, pid: int, signum: int) -> None:
        if pid in self._teammates:
            signal_group(pid, signal.Signals(signum))


_HostActor = ray.remote(ChildHost)
"""No CPU reserved (a host mostly waits on models) and concurrency enough for every child."""
HOST_OPTIONS: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 100_000}


def _new_host() -> Any:
    return _HostActor.options(**HOST_OPTIONS).remote()


@dataclass(kw_only=True)
class RayExecutor:
    """The ``agents.executor.Executor`` that runs background children on Ray."""

    model_spec: str
    """The session's ``provider:name`` spec; a child of another model gets ``provider:model``."""
    address: str | None = None
    """The cluster (``RAY_ADDRESS``; default ``auto``: the one ``ray start --head`` started)."""
    hosts: int | None = None
    name: str = "ray"
    _hosts: list[Any] = field(default_factory=list)
    _next: itertools.count[int] = field(default_factory=itertools.count)
    _tasks: set[asyncio.Task[LoopOutcome]] = field(default_factory=set)

    def start(self, runtime: AgentRuntime, job: AgentJob) -> asyncio.Task[LoopOutcome]:
        if not job.run.is_background or job.worktree is not None:
            # A foreground child's parent waits on it here; a worktree lives on this machine
            # and is settled (kept or removed) where it was made.
            return LOCAL.start(runtime, job)
        loop = asyncio.get_running_loop()
        return loop.create_task(self._drive(runtime, job), name=f"agent:{job.run.agent_id}")

    async def _drive(self, runtime: AgentRuntime, job: AgentJob) -> LoopOutcome:
        run = job.run
        try:  # no cluster (or a refused placement) fails this child, saying why
            slot, host = self._host()
        except Exception as exc:
            log.exception("agent %s could not be placed on Ray", run.agent_id)
            return _failed(job, f"Ray: {exc}")
        remote = remote_child(
            job, model_spec=self._spec_for(job), cwd=runtime.cwd, session_id=runtime.session_id
        )
        call = host.run.options(num_returns="streaming").remote(remote)
        unhook = job.ctx.abort.on_abort(lambda reason: host.stop.remote(run.agent_id, reason))
        try:
            async for ref in call:
                item = await ref
                if isinstance(item, Ended):
                    apply_end(run, item)
                    return _outcome(job, item)
                if isinstance(item, Progress):
                    apply_progress(run, item)
                    if job.on_turn is not None:
                        job.on_turn(run.stats)
            return _failed(job, "its host ended without a result")
        except _LOST as exc:
            self._replace(slot, host)
            return await asyncio.to_thread(_reconcile_lost, job, exc)
        except asyncio.CancelledError:
            ray.cancel(call)
            raise
        except Exception as exc:  # the cluster refused the call: the child fails, saying why
            log.exception("agent %s could not run on Ray", run.agent_id)
            run.status, run.reason, run.error = "failed", "error", f"Ray: {exc}"
            return LoopOutcome(
                reason="model_error",
                messages=job.messages,
                final_text="",
                stats=run.stats,
                error=run.error,
            )
        finally:
            unhook()

    def _spec_for(self, job: AgentJob) -> str:
        model = job.frame.model
        if self.model_spec.endswith(f":{model.name}") or self.model_spec.startswith("scripted:"):
            return self.model_spec
        return f"{provider_name(model)}:{model.name}"

    def _host(self) -> tuple[int, Any]:
        if not self._hosts:
            self._connect()
            self._hosts = [_new_host() for _ in range(self._host_count())]
        slot = next(self._next) % len(self._hosts)
        return slot, self._hosts[slot]

    def _replace(self, slot: int, host: Any) -> None:
        if self._hosts[slot] is host:
            self._hosts[slot] = _new_host()

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        address = self.address or os.environ.get("RAY_ADDRESS") or "auto"
        try:
            ray.init(
                address=address,
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )
        except ConnectionError as exc:
            raise RuntimeError(
                f"SUBAGENTS_EXECUTOR=ray: no Ray cluster at {address!r} "
                "(start one with `ray start --head`, or set RAY_ADDRESS)"
            ) from exc
        # Ray prints cluster errors ("a worker died...") to the driver's *stdout*, which for the
        # CLI is a protocol stream (json, stream-json). We learn of a lost host from the failed
        # call itself (``RayActorError``) and log it; Ray's own printing is switched off with
        # the flag its debugger uses for the same purpose (there is no public option).
        ray_worker._worker_logs_enabled = False

    def _host_count(self) -> int:
        if self.hosts is not None:
            return max(1, self.hosts)
        resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
        return max(1, int(resources.get("CPU", 1)))

    async def launch_teammate(
        self, argv: list[str], *, cwd: str, env: dict[str, str], log_path: str
    ) -> TeammateProcess:
        """``TeammateLauncher``: the worker process starts on a host's node (round-robin)."""
        _, host = self._host()
        pid, pid_start = await host.start_teammate.remote(argv, cwd, env, log_path)
        return RayTeammate(host=host, pid=pid, pid_start=pid_start)

    async def host_pids(self) -> list[int]:
        """The worker processes hosting children (a test kills one)."""
        if not self._hosts:
            self._host()
        return list(await asyncio.gather(*(h.pid.remote() for h in self._hosts)))


@dataclass
class RayTeammate:
    """A teammate worker process started by a ``ChildHost`` (``TeammateProcess``)."""

    host: Any
    pid: int
    pid_start: str | None
    returncode: int | None = None

    async def wait(self) -> int | None:
        try:
            self.returncode = await self.host.wait_teammate.remote(self.pid)
        except _LOST:
            # Its host died: the worker sees its parent gone and leaves. On this machine it is
            # ended now (so its record is an orphan when the lead reconciles it); on another
            # node its start identity does not match here and nothing is signalled.
            log.warning("teammate process %s lost its Ray host", self.pid)
            if start_identity(self.pid) == self.pid_start:
                signal_group(self.pid, signal.SIGKILL)
                await _gone(self.pid)
            self.returncode = -signal.SIGKILL
        return self.returncode

    def signal_group(self, sig: signal.Signals) -> None:
        if self.returncode is None:
            self.host.signal_teammate.remote(self.pid, int(sig))


async def _gone(pid: int, timeout_s: float = 5.0) -> None:
    """Until ``pid`` is no longer a running process (a zombie counts as gone)."""
    for _ in range(int(timeout_s / 0.02)):  # a process's end has no event to wait on here
        if not pid_exists(pid):
            return
        await asyncio.sleep(0.02)


def _failed(job: AgentJob, error: str) -> LoopOutcome:
    run = job.run
    run.status, run.reason, run.error = "failed", "error", error
    return LoopOutcome(
        reason="model_error", messages=job.messages, final_text="", stats=run.stats, error=error
    )


def _outcome(job: AgentJob, ended: Ended) -> LoopOutcome:
    return LoopOutcome(
        reason=ended.reason,
        messages=job.messages,
        final_text=ended.final_text,
        stats=job.run.stats,
        error=ended.error,
        duration_ms=ended.duration_ms,
    )


def _reconcile_lost(job: AgentJob, exc: BaseException) -> LoopOutcome:
    """The host died under the child: its durable transcript says how it ended."""
    run = job.run
    transcript = Path(job.transcript) if job.transcript is not None else None
    killed = kill_leftovers(pids_path(transcript)) if transcript is not None else []
    verdict = transcript_verdict(transcript, run.prompt)
    log.warning(
        "agent %s lost its Ray host (%s): %s; ended process groups %s",
        run.agent_id,
        type(exc).__name__,
        verdict,
        killed,
    )
    if verdict.outcome == "completed":
        run.status, run.reason, run.result_text = "completed", "completed", verdict.result_text
        return LoopOutcome(
            reason="completed",
            messages=job.messages,
            final_text=verdict.result_text,
            stats=run.stats,
        )
    detail = verdict.detail or verdict.outcome
    run.status, run.reason = "failed", "interrupted"
    run.result_text = verdict.result_text
    run.error = f"interrupted: its Ray worker was lost mid-run ({detail}); resume it to go on"
    return LoopOutcome(
        reason="aborted",
        messages=job.messages,
        final_text=verdict.result_text,
        stats=run.stats,
        error=run.error,
    )


def executor_from(env: Mapping[str, str], *, model_spec: str) -> RayExecutor:
    hosts = env.get("SUBAGENTS_RAY_HOSTS")
    return RayExecutor(
        model_spec=model_spec,
        address=env.get("RAY_ADDRESS") or None,
        hosts=int(hosts) if hosts and hosts.isdigit() else None,
    )
