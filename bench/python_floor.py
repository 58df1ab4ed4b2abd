"""The Python floor of the fan-out and the swarm: the work SPEC requires of a model call and of
a child, written as directly as Python allows, with none of the runtime's machinery.

``bench.py`` sets each figure beside two floors: *bare asyncio* (the awaits alone) and the
*files floor* (the file system calls alone). Neither does any of the Python work a runtime
cannot skip, so neither says how far under the runtime a runtime written in Python can go.
This one does that work, once, in straight-line code:

* per model call: the model's reply built (the scripted model's blocks and its usage), the
  usage added up, the assistant message kept in the history and encoded as a transcript line,
  each tool call looked up, its input validated by a pydantic model, a deny list checked, the
  tool awaited, its result block built and kept, the turn's lines written by one ``write``;
* per child: the Agent call's input validated, an id made, the transcript created with its
  first line, the running record (the 26 fields of ``SidecarRecord``, ``orjson``) written
  atomically (a spare file or a temp file, renamed) and its marker linked, the loop, the
  terminal record written the same way, the marker kept as a spare, the report returned to
  the parent (checked for tags) — or, for a background child, an immediate launch result and a
  notification queued for the coordinator, whose next turns take them;
* per session: its transcript and lock file; the commit rounds of ``files_floor`` (two
  ``syncfs`` and a directory ``fsync`` per ``width`` children).

What it leaves out is what the runtime adds beyond SPEC's minimum: hooks and their events,
permission modes and rules beyond one set look-up, budgets, telemetry, cancellation scopes,
progress and activity writes, lineage, recovery, compaction, definitions and settings. So a
runtime cannot go under this figure in CPython, and what it spends above it is the price of
what it does beyond the minimum.

Run: ``python bench/python_floor.py`` (fan-out 50 x 10 at L = 0, ext4 ``bench/.work``, and the
swarm 1,000 x 5 at L = 50 ms), ``--workload fanout|swarm``, ``--runs N``; ``SUBAGENTS_BENCH_DIR``
picks the state folder as for every bench.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from bench import (
    _record,
    _retire_marker,
    bench_dir,
    run_folder,
    settle,
    sweep,
)  # this folder is on sys.path
from subagents.store.atomic import syncfs_once


class NoteArgs(BaseModel):
    text: str


class AgentArgs(BaseModel):
    description: str
    prompt: str
    subagent_type: str
    run_in_background: bool = False


ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
DENIED: frozenset[str] = frozenset({"WebFetch"})
SYSTEM_PROMPT = "You work.\n\n" + "x" * 900  # the worker's prompt is ~1 KB, rendered once


def new_id() -> str:
    raw = os.urandom(8)
    return "a" + "".join(ALPHABET[b % 36] for b in raw)


class Files:
    """The state folder's files: records replaced atomically, markers, spares, commit rounds."""

    def __init__(self, folder: str, width: int) -> None:
        self.folder = folder
        os.makedirs(f"{folder}/.running")
        os.makedirs(f"{folder}/.spare")
        self.directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        self.spares: list[str] = []
        self.width = width
        self.ended = 0
        self.temps = 0

    def write(self, agent_id: str, record: dict[str, Any]) -> None:
        """The record replaced atomically, as ``bench.files_floor`` does (``bench._record``)."""
        self.temps += 1
        _record(self.folder, agent_id, self.temps, self.spares, orjson.dumps(record))

    def mark(self, agent_id: str) -> None:
        os.link(f"{self.folder}/r{agent_id}.json", f"{self.folder}/.running/{agent_id}")

    def retire(self, agent_id: str) -> None:
        _retire_marker(self.folder, agent_id, self.spares)
        self.ended += 1
        if self.ended % self.width == 0:
            self.commit_round()

    def commit_round(self) -> None:
        syncfs_once(self.directory) or os.fsync(self.directory)
        syncfs_once(self.directory) or os.fsync(self.directory)
        os.fsync(self.directory)


class Model:
    """The scripted model's part: a reply per turn of the script, with its usage."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s

    async def call(
        self, agent_id: str, turn: int, spec: dict[str, Any], history: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], dict[str, int]]:
        await asyncio.sleep(self.latency_s)
        content: list[dict[str, Any]] = [
            {
                "type": "tool_use",
                "id": f"toolu_{agent_id}_{turn}_{i}",
                "name": c["name"],
                "input": c["input"],
            }
            for i, c in enumerate(spec.get("tool_calls", ()))
        ]
        if "text" in spec:
            content.append({"type": "text", "text": spec["text"]})
        usage = {
            "input_tokens": 5,
            "output_tokens": 3 + 2 * len(content),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 40 * len(history),
        }
        return content, usage


Tools = dict[str, tuple[type[BaseModel], Callable[..., Any]]]


async def note(args: NoteArgs) -> str:
    return f"noted: {args.text}"


async def run_tool(block: dict[str, Any], tools: Tools) -> dict[str, Any]:
    name = block["name"]
    entry = tools.get(name)
    if entry is None or name in DENIED:
        return {
            "type": "tool_result",
            "tool_use_id": block["id"],
            "content": "denied",
            "is_error": True,
        }
    model, call = entry
    try:
        args = model.model_validate(block["input"])
    except ValueError as exc:
        return {
            "type": "tool_result",
            "tool_use_id": block["id"],
            "content": str(exc),
            "is_error": True,
        }
    return {"type": "tool_result", "tool_use_id": block["id"], "content": await call(args)}


async def gated(gate: asyncio.Semaphore, block: dict[str, Any], tools: Tools) -> dict[str, Any]:
    async with gate:
        return await run_tool(block, tools)


async def run_loop(
    agent_id: str,
    turns: list[dict[str, Any]],
    history: list[dict[str, Any]],
    fd: int,
    model: Model,
    tools: Tools,
    width: int,
    totals: dict[str, int],
    inbox: asyncio.Queue[str] | None = None,
) -> str:
    """Model calls until one answers without a tool call; the answer's text."""
    turns = list(turns)  # a turn is added when notices come after the script's last answer
    for number, spec in enumerate(turns, 1):
        content, usage = await model.call(agent_id, number, spec, history)
        for key, value in usage.items():
            totals[key] = totals.get(key, 0) + value
        totals["turns"] = totals.get("turns", 0) + 1
        history.append({"role": "assistant", "content": content})
        lines = [orjson.dumps({"type": "message", "message": history[-1]})]
        calls = [block for block in content if block["type"] == "tool_use"]
        if not calls:
            lines.append(orjson.dumps({"type": "turn_completed", "turn": number + 1}))
            os.write(fd, b"\n".join(lines) + b"\n")
            text = "".join(b["text"] for b in content if b["type"] == "text")
            if inbox is None or inbox.empty():
                return text
            notes = [inbox.get_nowait() for _ in range(inbox.qsize())]
            history.append({"role": "user", "content": "\n".join(notes)})
            os.write(fd, orjson.dumps({"type": "message", "message": history[-1]}) + b"\n")
            if number == len(turns):
                turns.append({"text": "ack"})
            continue
        if len(calls) == 1:
            results = [await run_tool(calls[0], tools)]
        else:
            gate = asyncio.Semaphore(width)
            results = list(await asyncio.gather(*(gated(gate, b, tools) for b in calls)))
        totals["tool_uses"] = totals.get("tool_uses", 0) + len(calls)
        history.append({"role": "user", "content": results})
        lines.append(orjson.dumps({"type": "message", "message": history[-1]}))
        lines.append(orjson.dumps({"type": "turn_completed", "turn": number + 1}))
        os.write(fd, b"\n".join(lines) + b"\n")
    return ""


class Runtime:
    """One session: the coordinator's Agent tool over ``Files``."""

    def __init__(
        self, root: str, workdir: str, model: Model, child_turns: list[dict[str, Any]], width: int
    ) -> None:
        self.files = Files(f"{root}/agents", width)
        self.session_id = new_id()
        self.workdir = workdir
        self.model = model
        self.child_turns = child_turns
        self.width = width
        self.inbox: asyncio.Queue[str] = asyncio.Queue()
        self.children: set[asyncio.Task[None]] = set()
        self.tools: Tools = {"Agent": (AgentArgs, self.agent), "Note": (NoteArgs, note)}
        self.child_tools: Tools = {"Note": (NoteArgs, note)}
        self.running = asyncio.Semaphore(width)

    def record(self, agent_id: str, args: AgentArgs, now: float) -> dict[str, Any]:
        return {
            "schemaVersion": 2,
            "agentId": agent_id,
            "agentType": args.subagent_type,
            "description": args.description,
            "prompt": args.prompt,
            "status": "running",
            "sessionId": self.session_id,
            "projectPath": self.workdir,
            "parentAgentId": self.session_id,
            "isBackground": args.run_in_background,
            "toolUseId": f"toolu_{agent_id}",
            "lineage": {"rootAgentId": agent_id, "resumedFrom": None, "resumeDepth": 0},
            "config": {
                "model": "scripted",
                "permissionMode": "default",
                "tools": ["Note"],
                "systemPrompt": SYSTEM_PROMPT,
                "maxTurns": None,
                "isolation": None,
                "definitionSource": "cli",
                "definitionPath": None,
                "thinking": None,
            },
            "createdAt": now,
            "lastActiveAt": now,
            "endedAt": None,
            "process": {"pid": os.getpid(), "startIdentity": "1@boot", "hostname": "vm"},
            "result": None,
            "stats": None,
            "worktree": None,
            "outputPath": None,
            "transcriptPath": f"{self.files.folder}/{agent_id}.jsonl",
            "notified": False,
            "stopRequested": False,
            "restartRecovery": None,
            "resumable": True,
        }

    async def agent(self, args: AgentArgs) -> str:
        agent_id = new_id()
        record = self.record(agent_id, args, time.time())
        fd = os.open(
            record["transcriptPath"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600
        )
        history: list[dict[str, Any]] = [{"role": "user", "content": args.prompt}]
        # The prompt is the transcript's first turn, as the runtime writes it.
        prompt = orjson.dumps({"type": "message", "message": history[0]})
        os.write(fd, prompt + b'\n{"type":"turn_completed","turn":1}\n')
        self.files.write(agent_id, record)
        self.files.mark(agent_id)
        if args.run_in_background:
            task = asyncio.create_task(self.child(agent_id, record, history, fd), name=agent_id)
            self.children.add(task)
            task.add_done_callback(self.children.discard)
            return f"Async agent launched: {agent_id}. You will be notified when it completes."
        async with self.running:
            return await self.child(agent_id, record, history, fd)

    async def child(
        self, agent_id: str, record: dict[str, Any], history: list[dict[str, Any]], fd: int
    ) -> str:
        totals: dict[str, int] = {}
        started = time.monotonic()
        text = await run_loop(
            agent_id,
            self.child_turns,
            history,
            fd,
            self.model,
            self.child_tools,
            self.width,
            totals,
        )
        now = time.time()
        record = {
            **record,
            "status": "completed",
            "endedAt": now,
            "lastActiveAt": now,
            "result": {"text": text, "reason": "completed", "error": None},
            "stats": {
                "numTurns": totals["turns"],
                "totalToolUseCount": totals.get("tool_uses", 0),
                "totalTokens": totals["input_tokens"]
                + totals["output_tokens"]
                + totals["cache_read_input_tokens"],
                "usage": {
                    k: totals[k]
                    for k in (
                        "input_tokens",
                        "output_tokens",
                        "cache_creation_input_tokens",
                        "cache_read_input_tokens",
                    )
                },
                "totalDurationMs": int((time.monotonic() - started) * 1000),
            },
        }
        self.files.write(agent_id, record)
        self.files.retire(agent_id)
        os.close(fd)
        report = text if "<" not in text else text.replace("<", "&lt;")
        if record["isBackground"]:
            self.inbox.put_nowait(
                f"<task-notification><task-id>{agent_id}</task-id><status>completed</status>"
                f"<result>{report}</result></task-notification>"
            )
            return report
        return f"{report}\n\nagentId: {agent_id}\n<usage>total_tokens: {totals['turns']}</usage>"


async def session(root: str, script: dict[str, Any], latency_s: float, width: int) -> int:
    """One session of ``script``; the model calls it made."""
    model = Model(latency_s)
    runtime = Runtime(root, os.getcwd(), model, script["child"], width)
    os.makedirs(f"{root}/sessions")
    lock = os.open(f"{root}/sessions/{runtime.session_id}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    fd = os.open(
        f"{root}/sessions/{runtime.session_id}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
    )
    totals: dict[str, int] = {}
    history: list[dict[str, Any]] = [{"role": "user", "content": "bench"}]
    coordinator = script["coordinator"]
    while True:
        await run_loop(
            runtime.session_id,
            coordinator,
            history,
            fd,
            model,
            runtime.tools,
            width,
            totals,
            runtime.inbox,
        )
        if not runtime.children and runtime.inbox.empty():
            break
        while runtime.inbox.empty() and runtime.children:
            await asyncio.wait(runtime.children, return_when=asyncio.FIRST_COMPLETED)
        if runtime.inbox.empty():
            break
        coordinator = [{"text": "ack"}]
    runtime.files.commit_round()
    os.close(fd)
    os.close(lock)
    os.close(runtime.files.directory)
    child_turns = len(script["child"])
    return totals["turns"] + child_turns * script["children"]


def script_for(workload: str, n: int, k: int) -> dict[str, Any]:
    background = workload == "swarm"
    calls = [
        {
            "name": "Agent",
            "input": {
                "description": f"job {i}",
                "prompt": f"job {i}",
                "subagent_type": "worker",
                "run_in_background": background,
            },
        }
        for i in range(n)
    ]
    child = [
        {"tool_calls": [{"name": "Note", "input": {"text": f"step {j}"}}]} for j in range(k - 1)
    ]
    child.append({"text": "worker done"})
    return {
        "coordinator": [{"tool_calls": calls}, {"text": "all done"}],
        "child": child,
        "children": n,
    }


def floor_once(
    workload: str, n: int, k: int, latency_ms: int, width: int, base: Path | None = None
) -> float:
    """CPU µs per model call of one floor session in a fresh folder of ``base`` (default
    ``bench_dir()``), after ``settle``, as every measured run and ``files_floor`` start."""
    script = script_for(workload, n, k)
    with run_folder("pyfloor-", base) as tmp:
        settle()
        start = time.process_time()
        calls = asyncio.run(session(str(tmp), script, latency_ms / 1000, width))
        return (time.process_time() - start) / calls * 1e6


def measure(workload: str, n: int, k: int, latency_ms: int, runs: int) -> list[float]:
    """CPU µs per model call of ``runs`` floor sessions after a warm-up."""
    width = 10 if workload == "fanout" else n
    floor_once(workload, n, k, latency_ms, width)
    gc.freeze()  # as the runtime does at its first session (gc_heap)
    return [floor_once(workload, n, k, latency_ms, width) for _ in range(runs)]


def inside(workload: str, n: int, k: int, latency_ms: int, runs: int) -> None:
    """Inside valgrind (``--instructions``): a warm-up session, then ``runs`` counted ones."""
    from call_instructions import counted_reduce

    width = 10 if workload == "fanout" else n
    script = script_for(workload, n, k)
    base = bench_dir()
    floor_once(workload, n, k, latency_ms, width, base)
    gc.freeze()

    def one(calls: int, _: int) -> int:
        with run_folder("pyfloor-", base) as tmp:
            return calls + asyncio.run(session(str(tmp), script, latency_ms / 1000, width))

    print("model calls", counted_reduce(one, range(runs), 0), flush=True)


def instructions(workload: str, n: int, k: int, latency_ms: int, runs: int) -> str:
    """Instructions per model call (all threads), as ``call_instructions.py`` counts the
    runtime's: the average, and for the fan-out the marginal call (N x 2K against N x K)."""
    from call_instructions import counted

    def per_call(k: int) -> tuple[int, int]:
        sizes = [f"--n={n}", f"--k={k}", f"--latency={latency_ms}", f"--runs={runs}"]
        counts, calls = counted([__file__, f"--workload={workload}", "--inside", *sizes])
        return counts.all, calls

    total, calls = per_call(k)
    line = f"python floor, {workload} {n} x {k}: {total / calls:,.0f} instructions / model call"
    if workload == "fanout":
        total2, calls2 = per_call(2 * k)
        line += f", marginal {(total2 - total) / (calls2 - calls):,.0f}"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=["fanout", "swarm", "both"], default="both")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="callgrind counts instead")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int)
    parser.add_argument("--k", type=int)
    parser.add_argument("--latency", type=int)
    options = parser.parse_args(argv)
    shapes = {"fanout": (50, 10, 0), "swarm": (1000, 5, 50)}
    workloads = ["fanout", "swarm"] if options.workload == "both" else [options.workload]
    for workload in workloads:
        n, k, latency = shapes[workload]
        n, k = options.n or n, options.k or k
        latency = latency if options.latency is None else options.latency
        if options.inside:
            inside(workload, n, k, latency, options.runs)
            return 0
        if options.instructions:
            print(instructions(workload, n, k, latency, min(options.runs, 2)), flush=True)
            continue
        us = measure(workload, n, k, latency, options.runs)
        mean = sum(us) / len(us)
        print(
            f"python floor, {workload} {n} x {k}, L = {latency} ms, {bench_dir()}: "
            f"{mean:.1f} µs / model call (runs {min(us):.1f}-{max(us):.1f}); "
            f"{1e6 / mean:,.0f} calls / CPU-s"
        )
    sweep()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
