"""``Executor``: where a child's loop runs — this process's event loop, or a cluster.

``Children.start`` registers a child (task registry, run, inbox, name, durable ``running``
record) and then hands its job to the session's executor, which returns the child's asyncio
task. Everything around that task stays in the session: supervision (progress lines, stalls),
``finalize``, the terminal write and the one notification. The seam is three duties:

* **start a child** — ``start(runtime, job)``: begin running ``job`` and return its task;
* **observe its end** — the task ends when the child ends, with its ``LoopOutcome``; by then
  ``job.run`` holds the terminal fields (status, reason, result, stats) ``Child.settle`` reads;
* **stop it** — a stop is ``job.ctx.abort.abort(reason)`` (TaskStop, ``tasks stop``, a stall,
  shutdown) and, if the child has not ended within ``KILL_WAIT_S``, ``task.cancel()``. An
  executor that runs the child elsewhere forwards both to where it runs.

``LocalExecutor`` (the default) runs the child here: the same ``create_task`` the manager made
before the seam existed, so the fan-out figure does not move. ``subagents.distributed`` holds
the Ray executor (docs/distributed.md).
"""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable

from subagents.agents.agent_run import AgentJob
from subagents.agents.child_run import run_child
from subagents.agents.runtime import AgentRuntime
from subagents.loop.query import LoopOutcome


@runtime_checkable
class Executor(Protocol):
    """Runs children's loops; see the module docstring for the three duties."""

    @property
    def name(self) -> str:
        """``local``, ``ray``: what ``SUBAGENTS_EXECUTOR`` calls it."""
        ...

    def start(self, runtime: AgentRuntime, job: AgentJob) -> asyncio.Task[LoopOutcome]:
        """Start ``job`` (a registered child) and return the task that ends with it."""
        ...


class LocalExecutor:
    """Every child on this process's event loop."""

    name = "local"

    def start(self, runtime: AgentRuntime, job: AgentJob) -> asyncio.Task[LoopOutcome]:
        loop = asyncio.get_running_loop()
        return loop.create_task(run_child(runtime, job), name=f"agent:{job.run.agent_id}")


LOCAL = LocalExecutor()
