"""A foreground child: the parent waits, sees progress, and may get it moved to the background.

``run_foreground`` starts the child (``Children.start``) and waits for it, waking for progress
(``emit_progress`` after ``progress_after_ms``, 2,000 ms, then every second: tool count, tokens,
last activities) and for auto-background (``auto_background_ms``, 120,000; 0 = off): a child
still running then is moved to the background (``Children.move_to_background``) and the parent
gets ``async_launched`` and goes on. When the parent itself is cancelled, the child is aborted,
awaited and finalized, and the cancellation re-raised; when only the child's task was cancelled
it counts as killed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from subagents.agents.agent_run import AgentJob
from subagents.agents.child_state import Child
from subagents.agents.children import Children
from subagents.agents.results import completed_output
from subagents.events import ProgressEvent
from subagents.tools.base import CallInfo, ToolOutput


async def run_foreground(
    children: Children, job: AgentJob, info: CallInfo, *, name: str | None = None
) -> ToolOutput:
    """Run a child while the parent waits, with progress; may move it to the background."""
    child = children.start(job, name=name)
    try:
        moved = await _wait(children, child)
    except asyncio.CancelledError:
        if not _being_cancelled():
            # The child's own task was cancelled, not the parent: it counts as killed.
            children.finalize(child)
            return completed_output(child.run)
        job.ctx.abort.abort("parent aborted")
        await asyncio.gather(child.task, return_exceptions=True)
        children.finalize(child)
        raise
    if moved is not None:
        return moved
    children.finalize(child)
    return completed_output(child.run)


async def _wait(children: Children, child: Child) -> ToolOutput | None:
    """Wait for a foreground child; its ``async_launched`` when it was moved to the
    background instead, else None."""
    config = children.runtime.config
    loop = child.task.get_loop()
    started = time.monotonic()
    auto_s = config.auto_background_ms / 1000 if config.auto_background_ms > 0 else None
    next_progress = config.progress_after_ms / 1000
    while True:
        elapsed = time.monotonic() - started
        waits = [next_progress - elapsed]
        if auto_s is not None:
            waits.append(auto_s - elapsed)
        if await _wait_done(loop, child.task, max(0.0, min(waits))):
            child.task.result()
            return None
        elapsed = time.monotonic() - started
        if auto_s is not None and elapsed >= auto_s:
            return children.move_to_background(child)
        if elapsed >= next_progress:
            emit_progress(child.job)
            next_progress = elapsed + 1.0


def emit_progress(job: AgentJob) -> None:
    run = job.run
    stats = run.stats
    job.ctx.emit(
        ProgressEvent(
            agent=run.ref,
            subtype="agent_progress",
            data={
                "description": run.description,
                "tool_use_count": stats.tool_use_count,
                "total_tokens": stats.usage.total,
                "latest_input_tokens": stats.latest_input_tokens,
                "recent_activities": list(stats.activities),
                "elapsed_ms": int((time.monotonic() - run.started) * 1000),
            },
        )
    )


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _wait_done(
    loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], within_s: float
) -> bool:
    """Whether ``task`` finished within ``within_s`` seconds (it is never cancelled here).

    ``asyncio.wait`` for a single task, without its per-call set, and without looking up the
    running loop (on Python 3.11 each lookup is a ``getpid`` system call)."""
    if task.done():
        return True
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object) -> None:
        if not waiter.done():
            waiter.set_result(None)

    task.add_done_callback(wake)
    timer = loop.call_later(within_s, wake, None)
    try:
        await waiter
    finally:
        timer.cancel()
        task.remove_done_callback(wake)
    return task.done()
