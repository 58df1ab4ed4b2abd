"""``--input-format stream-json`` under a flood: memory stays bounded and nothing is lost.

The reader thread parses stdin faster than the session can act on it; without a bound every
line read was parked in memory (parsed, as Python objects: a few hundred bytes each for a
74-byte control request; measured 317 MB resident for 300,000 of them), and every control
request became a task at once. Now the reader stops reading while the lines it handed over
and the session has not taken pass ``max_pending_bytes`` or ``max_pending_lines`` (the pipe
then fills and the writer waits; measured after: 43 MB, the resident size of an idle session), and at most ``MAX_CONTROL_IN_FLIGHT`` control requests are answered at a time.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from subagents.cli.stream_input import MAX_LINE_BYTES, MAX_LINE_VALUES, StreamInput, json_values
from subagents.cli.stream_session import MAX_CONTROL_IN_FLIGHT, StreamSession

LINE = b'{"type":"keep_alive","pad":"' + b"x" * 100 + b'"}\n'


@pytest.mark.parametrize(("budget", "lines"), [(64 * 1024, 1024), (64 << 20, 100)])
async def test_the_reader_stops_reading_while_the_session_is_behind(
    budget: int, lines: int
) -> None:
    """Bounded by bytes (long lines) and by number (short ones, each several times its size
    once parsed)."""
    read_end, write_end = os.pipe()
    flags = fcntl.fcntl(write_end, fcntl.F_GETFL)
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    bad: list[str] = []
    stdin = StreamInput(
        os.fdopen(read_end, "rb"), bad.append, max_pending_bytes=budget, max_pending_lines=lines
    )
    stdin.start()
    written, stalled = 0, 0
    # The session takes nothing: a bounded reader lets the pipe fill (EAGAIN) soon after the
    # budget; an unbounded one takes all 16 MB. One line per write: shorter than PIPE_BUF, so
    # it is written whole or not at all.
    while written < 16 << 20 and stalled < 50:
        try:
            written += os.write(write_end, LINE)
            stalled = 0
        except BlockingIOError:
            stalled += 1
            await asyncio.sleep(0.01)
    assert written < min(budget, lines * len(LINE)) + (1 << 20), written
    # Nothing was lost: every line written arrives, in order, once the session takes them.
    os.close(write_end)
    count = 0
    while (message := await stdin.next()) is not None:
        assert message["type"] == "keep_alive"
        count += 1
    assert count * len(LINE) == written
    assert bad == []


class _SlowHandlers:
    """Control requests whose answers take a while (as ``stop_task`` waits for a kill)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0

    async def handle(self, stream: StreamSession, subtype: str, request: dict[str, Any]) -> Any:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.001)
        self.in_flight -= 1
        return {"n": request["n"]}


async def test_a_control_request_flood_is_answered_a_bounded_number_at_a_time() -> None:
    read_end, write_end = os.pipe()
    count = 2_000
    lines = b"".join(
        json.dumps(
            {"type": "control_request", "request_id": f"r{n}", "request": {"subtype": "x", "n": n}}
        ).encode()
        + b"\n"
        for n in range(count)
    )
    written: list[dict[str, Any]] = []
    handlers = _SlowHandlers()
    stream = StreamSession(
        factory=lambda request: None,  # type: ignore[arg-type,return-value]  # no turn runs
        write=written.append,
        warn=lambda text: None,
        stdio_permissions=False,
        bg_wait_ms=0,
        report_state=False,
        handlers=handlers,
    )

    async def feed() -> None:
        await asyncio.to_thread(os.write, write_end, lines)
        os.close(write_end)

    feeder = asyncio.create_task(feed(), name="feed-stdin")
    code = await stream.run(StreamInput(os.fdopen(read_end, "rb"), lambda text: None))
    await feeder
    assert code == 0
    answers = [line["response"] for line in written if line["type"] == "control_response"]
    assert sorted(a["response"]["n"] for a in answers) == list(range(count))  # none lost
    assert all(a["subtype"] == "success" for a in answers)
    assert handlers.most <= MAX_CONTROL_IN_FLIGHT, handlers.most


def test_one_odd_message_is_one_short_warning(tmp_path: Path) -> None:
    """A user message of 2,000 unsupported blocks warns once (with the count), not 2,000 times;
    a message type, block type or request subtype of 100,000 characters is named in a short
    warning or error, not echoed whole."""
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "record": "requests.jsonl",
                "agents": [{"agent_type": "main", "turns": [{"text": "hi"}]}],
            }
        )
    )
    huge = "t" * 100_000
    blocks: list[Any] = [{"type": "image"}] * 2_000 + [
        {"type": huge},
        [1, 2],
        {"type": "text", "text": "go"},
    ]
    lines = [
        {"type": huge},
        {"type": {"nested": [huge]}},
        {"type": "control_request", "request_id": "r1", "request": {"subtype": huge}},
        {"type": "user", "message": {"role": "user", "content": blocks}},
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "subagents", "--input-format", "stream-json",
         "--output-format", "stream-json", "--model", f"scripted:{script}"],
        input="".join(json.dumps(line) + "\n" for line in lines),
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    warnings = proc.stderr.splitlines()
    assert len(warnings) <= 6, warnings[:8]
    assert all(len(w) < 300 for w in warnings), [w[:300] for w in warnings]
    assert any("2000 'image' content blocks" in w for w in warnings), warnings
    assert sum("unknown message type" in w for w in warnings) == 2
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    error = next(e["response"] for e in events if e["type"] == "control_response")
    assert error["subtype"] == "error" and len(error["error"]) < 300, error["error"][:300]
    assert [e["result"] for e in events if e["type"] == "result"] == ["hi"]
    (request,) = [json.loads(line) for line in (tmp_path / "requests.jsonl").open()]
    prompt = request["messages"][0]["content"]
    prompt = prompt if isinstance(prompt, str) else str(prompt)
    assert prompt.count("[image content omitted]") == 2_000  # each block keeps its note


def _run_measured(args: list[str], stdin: bytes, cwd: Path) -> tuple[int, str, str, int]:
    """Run the CLI under a fresh Python that reports its child's peak resident size (kB): the
    test process's own children's peak would include every earlier test's."""
    probe = (
        "import resource, subprocess, sys\n"
        "run = subprocess.run(sys.argv[1:], stdin=sys.stdin, capture_output=True)\n"
        "sys.stderr.buffer.write(run.stderr)\n"
        "sys.stdout.buffer.write(run.stdout)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(run.returncode)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, *args],
        input=stdin, cwd=cwd, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    *err, peak = proc.stderr.decode().splitlines()
    return proc.returncode, proc.stdout.decode(), "\n".join(err), int(peak)


def test_a_line_of_millions_of_values_is_refused_unparsed_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    """A 21 MB user message of seven million empty objects parsed into ~600 MB of dicts before
    anything could look at it (a 60 MB one: 1.7 GB resident, measured); now it is refused
    from its bytes, naming the line and the limit, and the next lines are served. A string
    with two million commas is not counted as values; an over-long line is read past, not
    held."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agents": [{"agent_type": "main", "turns": [{"text": "hi"}]}]}))
    blocks = b",".join([b"{}"] * 7_000_000)
    lines = [
        b'{"type":"user","message":{"role":"user","content":[' + blocks + b"]}}",
        b'{"type":"keep_alive","pad":"' + b"a,b:" * 1_000_000 + b'"}',
        b" " * MAX_LINE_BYTES,  # with its newline one byte over
        b'{"type":"user","message":{"role":"user","content":"go"}}',
    ]
    code, out, err, peak_kb = _run_measured(
        [sys.executable, "-m", "subagents", "--input-format", "stream-json",
         "--output-format", "stream-json", "--model", f"scripted:{script}"],
        b"".join(line + b"\n" for line in lines), tmp_path,
    )  # fmt: skip
    assert code == 0, err[-2000:]
    warnings = err.splitlines()
    assert warnings == [
        f"subagents: warning: stdin line 1 holds more than {MAX_LINE_VALUES} JSON values"
        f" (MAX_LINE_VALUES), skipped unparsed: {lines[0][:60]!r}",
        f"subagents: warning: stdin line 3 is longer than {MAX_LINE_BYTES} bytes"
        " (MAX_LINE_BYTES), skipped",
    ], [w[:200] for w in warnings]
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["result"] for e in events if e["type"] == "result"] == ["hi"]
    # The 64 MiB line held once plus an idle session (~45 MB); parsed, line 1 alone was 600 MB.
    assert peak_kb < 250_000, peak_kb


_TEXT = st.text() | st.text(alphabet=',:{}[]"\\ a\u00e9')  # JSON's own bytes, escapes
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(_TEXT, children, max_size=6),
    max_leaves=40,
)


def _values(value: Any) -> tuple[int, int]:
    """The values and keys ``value`` parses into, and how many of its containers are empty."""
    if isinstance(value, list):
        counts = [_values(item) for item in value]
        return 1 + sum(c[0] for c in counts), (not value) + sum(c[1] for c in counts)
    if isinstance(value, dict):
        counts = [_values(item) for item in value.values()]
        return 1 + len(value) + sum(c[0] for c in counts), (not value) + sum(c[1] for c in counts)
    return 1, 0


@settings(max_examples=300, deadline=None)
@given(_JSON, st.booleans(), st.integers(min_value=0, max_value=60))
@example(value=[":" + '"' * 8], ascii_=True, limit=2)  # escaped quotes are not strings
def test_json_values_counts_what_the_parser_makes(value: Any, ascii_: bool, limit: int) -> None:
    """Over a limit exactly when the parser's count is (one more per empty container, which
    opens with a separator and holds nothing), whatever the strings hold: separators inside
    strings never refuse a line; under it, never under that count (the pending budget's)."""
    line = json.dumps(value, ensure_ascii=ascii_).encode()
    values, empty = _values(value)
    counted = json_values(line, limit=limit)
    assert (counted > limit) == (values + empty > limit)
    if counted <= limit:
        assert counted >= values + empty
