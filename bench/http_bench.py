"""The fan-out over HTTP: the Anthropic and OpenAI-compatible providers against a local server
that replays recorded streams (``replay_server.py``, in its own process so its CPU is not ours).

Workload: the bench's fan-out (``bench.py``) — a coordinator delegating N children (default 50)
of K model calls each (default 10), every child call a streamed response with a text block and a
``Note`` tool call, the last a text answer — with both concurrency caps raised to N, as a user
raises them (``SUBAGENTS_MAX_TOOL_CONCURRENCY``, ``SUBAGENTS_MAX_CONCURRENT_SUBAGENTS``). Full
durability, state in ``SUBAGENTS_BENCH_DIR``.

Reported per provider and transport (``lean``, the default, or the official ``sdk``): process
CPU per model call (everything: runtime, provider, HTTP, SSE, transcripts), wall time against the
ideal critical path ``(K + 2) * L``, and beside them the floors —

* ``bare asyncio``: the same awaits with no runtime and no HTTP (``bench.bare_fanout``);
* ``raw httpx``: the ``httpx`` client the SDKs are built on making the same requests (the
  bodies our runtime sends, recorded from one run), same concurrency, each stream read to its end
  and nothing parsed — what the SDKs' own HTTP layer costs before any SDK code;
* ``raw lean HTTP``: our HTTP client (``models/_http.py``) doing the same, each body read as
  ``respond`` reads it (``Response.each``, de-chunked), no SSE decoding;
* ``bare protocol``: the least an ``asyncio.Protocol`` client does for the same exchanges (the
  request written from ready bytes, the reply kept unparsed until its last chunk) — the floor
  under any HTTP client on this event loop.

Run: ``python bench/http_bench.py`` (both providers, both transports, L = 0 and 20 ms) or e.g.
``python bench/http_bench.py --provider anthropic --transport lean --latency 20 --json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import WORKER, NoteTool, bare_fanout, bench_dir
from call_instructions import counted, counted_reduce
from replay_server import process_cpu_ns
from subagents.agents.agent_tool import AgentTool
from subagents.agents.definitions import load_definitions
from subagents.config import RuntimeConfig
from subagents.models._http import HTTPClient, Origin
from subagents.models.anthropic import AnthropicModel
from subagents.models.base import Model
from subagents.models.openai import OpenAIModel
from subagents.session import Session, SessionOptions

HERE = Path(__file__).resolve().parent
PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}


class ReplayProcess:
    """``replay_server.py`` in a child process; ``url`` once it listens."""

    streams = False
    """Serve with the asyncio-streams server (``--streams-server``), to compare floors."""

    def __init__(self, n: int, k: int, latency_ms: int, *, record: Path | None = None) -> None:
        command = [sys.executable, str(HERE / "replay_server.py"), "--n", str(n), "--k", str(k)]
        command += ["--latency-ms", str(latency_ms)]
        if self.streams:
            command.append("--streams")
        if record is not None:
            command += ["--record", str(record)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()

    def cpu_s(self) -> float:
        """CPU the server has used so far."""
        return (process_cpu_ns(self.process.pid) or 0) / 1e9

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def make_model(provider: str, transport: str, url: str) -> AnthropicModel | OpenAIModel:
    if provider == "anthropic":
        return AnthropicModel("claude-bench", api_key="bench", base_url=url, transport=transport)  # type: ignore[arg-type]
    return OpenAIModel("gpt-bench", api_key="bench", base_url=url + "/v1", transport=transport)  # type: ignore[arg-type]


async def run_session(model: Model, workdir: Path, width: int) -> tuple[int, float, float]:
    """(model calls, CPU seconds, wall seconds) of one fan-out session."""
    definitions = load_definitions(
        cwd=workdir, home=workdir, subagents_home=workdir / "home", cli_agents=json.dumps(WORKER)
    )
    config = RuntimeConfig(tool_concurrency=width, max_concurrent_subagents=width)
    session = Session(
        SessionOptions(
            model=model,
            cwd=workdir,
            home=workdir / "home",
            tools=[AgentTool(), NoteTool()],
            definitions=definitions,
            config=config,
        )
    )
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = await session.run("bench")
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if result.is_error:
        raise RuntimeError(f"bench run failed: {result.result}")
    return sum(run.stats.num_turns for run in result.agents), cpu, wall


@dataclass
class Row:
    provider: str
    what: str
    latency_ms: int
    model_calls: int
    cpu_us_per_call: float
    run_us: list[float]
    wall_over_ideal: float | None
    wall_runs: list[float]
    server_us_per_call: float
    """CPU the replay server spent per call (its own process; not in ``cpu_us_per_call``)."""

    def line(self) -> str:
        spread = f"runs {min(self.run_us):.0f}-{max(self.run_us):.0f}"
        ratio = ""
        if self.wall_over_ideal is not None:
            ratio = (
                f"  wall/ideal={self.wall_over_ideal:5.3f} "
                f"(runs {min(self.wall_runs):.3f}-{max(self.wall_runs):.3f})"
            )
        return (
            f"{self.provider:9} {self.what:14} L={self.latency_ms:>2} ms  calls={self.model_calls}"
            f"  cpu/call={self.cpu_us_per_call:7.1f} µs ({spread}){ratio}"
            f"  [server {self.server_us_per_call:.0f} µs/call]"
        )


def measure_runtime(
    provider: str, transport: str, n: int, k: int, latency_ms: int, runs: int
) -> Row:
    server = ReplayProcess(n, k, latency_ms)
    ideal = (k + 2) * latency_ms / 1000
    per_run: list[tuple[int, float, float]] = []
    server_s = 0.0
    try:
        for index in range(runs + 1):
            server0 = server.cpu_s()

            async def one() -> tuple[int, float, float]:
                model = make_model(provider, transport, server.url)
                try:
                    with tempfile.TemporaryDirectory(prefix="http-", dir=bench_dir()) as tmp:
                        return await run_session(model, Path(tmp), n)
                finally:
                    await model.aclose()

            figures = asyncio.run(one())
            if index:
                per_run.append(figures)
                server_s += server.cpu_s() - server0
            else:
                gc.freeze()  # after the warm-up, as the CLI does before its run
    finally:
        server.close()
    calls = per_run[0][0]
    walls = [wall / ideal for _, _, wall in per_run] if ideal else []
    return Row(
        provider=provider,
        what=transport,
        latency_ms=latency_ms,
        model_calls=calls,
        cpu_us_per_call=sum(cpu for _, cpu, _ in per_run) / sum(c for c, _, _ in per_run) * 1e6,
        run_us=[cpu / c * 1e6 for c, cpu, _ in per_run],
        wall_over_ideal=sum(walls) / len(walls) if walls else None,
        wall_runs=walls,
        server_us_per_call=server_s / sum(c for c, _, _ in per_run) * 1e6,
    )


def recorded_bodies(provider: str, n: int, k: int) -> Bodies:
    """The request bodies one lean run sends (``--record`` of the server), split."""
    with tempfile.TemporaryDirectory(prefix="bodies-", dir=bench_dir()) as tmp:
        record = Path(tmp) / "bodies.jsonl"
        server = ReplayProcess(n, k, 0, record=record)
        try:

            async def one() -> None:
                model = make_model(provider, "lean", server.url)
                try:
                    await run_session(model, Path(tmp), n)
                finally:
                    await model.aclose()

            asyncio.run(one())
        finally:
            server.close()
        return split_bodies([line.encode() for line in record.read_text().splitlines()])


Exchange = Callable[[bytes], Awaitable[None]]


Bodies = tuple[list[bytes], list[bytes]]
"""A recorded run's request bodies: the coordinator's, the workers'."""


def split_bodies(bodies: list[bytes]) -> Bodies:
    """Once per bench, not inside a measured run (scanning ~500 bodies of ~20 KB for the
    coordinator's tool was ~18 k instructions per call of the floors)."""
    coordinator = [b for b in bodies if b'"Agent"' in b]
    return coordinator, [b for b in bodies if b'"Agent"' not in b]


async def fanout_requests(exchange: Exchange, bodies: Bodies, n: int, k: int) -> None:
    """The fan-out's request pattern: coordinator, N children of K sequential calls, coordinator;
    each child sends the bodies a child sent in the recorded run."""
    coordinator, workers = bodies

    async def child(index: int) -> None:
        for turn in range(k):
            await exchange(workers[(index * k + turn) % len(workers)])

    await exchange(coordinator[0])
    await asyncio.gather(*(child(i) for i in range(n)))
    await exchange(coordinator[-1])


def httpx_exchange(url: str, path: str) -> tuple[Exchange, Callable[[], Awaitable[None]]]:
    import httpx2

    limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
    client = httpx2.AsyncClient(base_url=url, limits=limits, timeout=600)
    headers = {"content-type": "application/json", "authorization": "Bearer bench"}

    async def exchange(body: bytes) -> None:
        async with client.stream("POST", path, content=body, headers=headers) as response:
            async for _piece in response.aiter_raw():
                pass

    return exchange, client.aclose


def lean_exchange(url: str, path: str) -> tuple[Exchange, Callable[[], Awaitable[None]]]:
    client = HTTPClient()
    origin = Origin.parse(url)
    headers = b"content-type: application/json\r\nauthorization: Bearer bench\r\n"

    async def exchange(body: bytes) -> None:
        response = await client.post(origin, path, headers, body)
        try:
            await response.each(len)  # as ``respond`` reads it, the pieces dropped
        finally:
            response.close()

    return exchange, client.aclose


class _BareProtocol(asyncio.Protocol):
    """The least a protocol client does for one exchange: write the request, keep the bytes,
    wake the caller when the chunked body's last chunk has arrived. No parsing at all."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.buffer[-5:] == b"0\r\n\r\n" and self.waiter is not None:
            self.waiter.set_result(None)


def protocol_exchange(url: str, path: str) -> tuple[Exchange, Callable[[], Awaitable[None]]]:
    """``bare protocol``: one ``asyncio.Protocol`` connection per concurrent caller, a request
    written from ready bytes, the reply kept unparsed until its last chunk: the asyncio floor
    under any HTTP client on this loop."""
    origin = Origin.parse(url)
    idle: list[_BareProtocol] = []
    head = f"POST {path} HTTP/1.1\r\nHost: {origin.host_header}\r\n".encode()
    headers = b"content-type: application/json\r\nauthorization: Bearer bench\r\n"

    async def exchange(body: bytes) -> None:
        loop = asyncio.get_running_loop()
        if idle:
            connection = idle.pop()
        else:
            _, connection = await loop.create_connection(_BareProtocol, origin.host, origin.port)
        assert connection.transport is not None
        connection.waiter = loop.create_future()
        length = b"Content-Length: %d\r\n\r\n" % len(body)
        connection.transport.write(head + headers + length + body)
        await connection.waiter
        connection.buffer.clear()
        idle.append(connection)

    async def close() -> None:
        for connection in idle:
            assert connection.transport is not None
            connection.transport.close()

    return exchange, close


EXCHANGES = {
    "raw httpx": httpx_exchange,
    "raw lean HTTP": lean_exchange,
    "bare protocol": protocol_exchange,
}


def measure_floor(
    provider: str, what: str, bodies: Bodies, n: int, k: int, latency_ms: int, runs: int
) -> Row:
    server = ReplayProcess(n, k, latency_ms)
    calls = n * k + 2
    per_run: list[tuple[float, float]] = []
    server_s = 0.0
    try:
        for index in range(runs + 1):
            server0 = server.cpu_s()

            async def one() -> tuple[float, float]:
                if what == "bare asyncio":
                    cpu0, wall0 = time.process_time(), time.perf_counter()
                    await bare_fanout(n, k, n, latency_ms / 1000)
                    return time.process_time() - cpu0, time.perf_counter() - wall0
                exchange, close = EXCHANGES[what](server.url, PATHS[provider])
                try:
                    cpu0, wall0 = time.process_time(), time.perf_counter()
                    await fanout_requests(exchange, bodies, n, k)
                    return time.process_time() - cpu0, time.perf_counter() - wall0
                finally:
                    await close()

            figures = asyncio.run(one())
            if index:
                per_run.append(figures)
                server_s += server.cpu_s() - server0
    finally:
        server.close()
    ideal = (k + 2) * latency_ms / 1000
    walls = [wall / ideal for _, wall in per_run] if ideal else []
    return Row(
        provider=provider,
        what=what,
        latency_ms=latency_ms,
        model_calls=calls,
        cpu_us_per_call=sum(cpu for cpu, _ in per_run) / (calls * runs) * 1e6,
        run_us=[cpu / calls * 1e6 for cpu, _ in per_run],
        wall_over_ideal=sum(walls) / len(walls) if walls else None,
        wall_runs=walls,
        server_us_per_call=server_s / (calls * runs) * 1e6,
    )


def count_calls(provider: str, transport: str, n: int, k: int, latency_ms: int) -> str:
    """Python function calls per model call of one fan-out over HTTP after a warm-up
    (``--count-calls``): a figure load cannot move, for A/B of the per-call path (the server
    is another process; only this client's calls are counted)."""
    import cProfile
    import pstats

    server = ReplayProcess(n, k, latency_ms)
    counts: list[tuple[int, int]] = []
    try:
        for index in range(3):  # a warm-up (imports, connections), then two counted runs
            profile = cProfile.Profile()

            async def one(profile: cProfile.Profile = profile) -> int:
                model = make_model(provider, transport, server.url)
                try:
                    with tempfile.TemporaryDirectory(prefix="http-", dir=bench_dir()) as tmp:
                        profile.enable()
                        try:
                            return (await run_session(model, Path(tmp), n))[0]
                        finally:
                            profile.disable()
                finally:
                    await model.aclose()

            model_calls = asyncio.run(one())
            if index:
                counts.append((pstats.Stats(profile).total_calls, model_calls))
    finally:
        server.close()
    per_call = "  ".join(f"{calls / model_calls:.1f} ({calls})" for calls, model_calls in counts)
    return (
        f"{provider:9} {transport:5} L={latency_ms:>2} ms  model calls={counts[0][1]}  "
        f"Python calls per model call: {per_call}"
    )


def instructions_inside(provider: str, what: str, n: int, k: int, runs: int) -> None:
    """Inside valgrind (``--instructions``): a warm-up fan-out, then ``runs`` counted ones
    (callgrind counts only inside ``functools.reduce``); prints the model calls."""
    server = ReplayProcess(n, k, 0)
    bodies = recorded_bodies(provider, n, k) if what in EXCHANGES else ([], [])
    try:

        def one(calls: int, _: int) -> int:
            async def session() -> int:
                if what in EXCHANGES:
                    exchange, close = EXCHANGES[what](server.url, PATHS[provider])
                    try:
                        await fanout_requests(exchange, bodies, n, k)
                    finally:
                        await close()
                    return n * k + 2
                model = make_model(provider, "lean", server.url)
                try:
                    with tempfile.TemporaryDirectory(prefix="http-", dir=bench_dir()) as tmp:
                        return (await run_session(model, Path(tmp), n))[0]
                finally:
                    await model.aclose()

            return calls + asyncio.run(session())

        one(0, 0)
        gc.freeze()
        print("model calls", counted_reduce(one, range(runs), 0), flush=True)
    finally:
        server.close()


def instructions(provider: str, what: str, n: int, k: int, runs: int) -> str:
    """Instructions per model call (callgrind; load cannot move it) of the lean fan-out or of
    the raw lean HTTP client doing the same requests. The replay server is not counted."""
    script = [__file__, "--inside-instructions", what, f"--provider={provider}"]
    total, model_calls = counted([*script, f"--n={n}", f"--k={k}", f"--runs={runs}"])
    return (
        f"{provider:9} {what:14} L= 0 ms  model calls={model_calls}  "
        f"instructions per model call: {total.all / model_calls:,.0f} all threads, "
        f"{total.main / model_calls:,.0f} main thread"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=("anthropic", "openai", "all"), default="all")
    parser.add_argument("--transport", choices=("lean", "sdk", "all"), default="all")
    parser.add_argument("--latency", type=int, action="append", help="ms; repeatable")
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-floors", action="store_true")
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    parser.add_argument(
        "--count-calls", action="store_true", help="Python calls per model call (load-proof)"
    )
    parser.add_argument(
        "--streams-server",
        action="store_true",
        help="the replay server on asyncio streams (~2x its CPU per call) instead of a protocol",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="callgrind instructions per model call, lean fan-out and raw lean HTTP (load-proof)",
    )
    parser.add_argument("--inside-instructions", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside_instructions:
        instructions_inside(args.provider, args.inside_instructions, args.n, args.k, args.runs)
        return 0
    ReplayProcess.streams = args.streams_server
    providers = ["anthropic", "openai"] if args.provider == "all" else [args.provider]
    transports = ["lean", "sdk"] if args.transport == "all" else [args.transport]
    if args.instructions:
        for provider in providers:
            for what in ("lean", "raw lean HTTP", "bare protocol"):
                print(instructions(provider, what, args.n, args.k, args.runs), flush=True)
        return 0
    if args.count_calls:
        for provider in providers:
            for transport in transports:
                for latency in args.latency or [0, 20]:
                    print(count_calls(provider, transport, args.n, args.k, latency), flush=True)
        return 0
    for provider in providers:
        bodies = ([], []) if args.no_floors else recorded_bodies(provider, args.n, args.k)
        for latency in args.latency or [0, 20]:
            rows = [
                measure_runtime(provider, t, args.n, args.k, latency, args.runs) for t in transports
            ]
            if not args.no_floors:
                for what in ("bare asyncio", "raw httpx", "raw lean HTTP", "bare protocol"):
                    rows.append(
                        measure_floor(provider, what, bodies, args.n, args.k, latency, args.runs)
                    )
            for row in rows:
                print(json.dumps(asdict(row)) if args.json else row.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
