"""Render the trace of a real CLI run as a waterfall picture (docs/telemetry-trace.png) and a text
tree — what a collector receives, drawn the way Jaeger or Tempo would show it.

It runs ``subagents -p`` on a scripted model (a coordinator with two sync children, a background
child and a fork; the scripted latencies make the waterfall readable) with
``SUBAGENTS_TELEMETRY=1`` and ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at an OTLP/HTTP receiver on
127.0.0.1 (``subagents.testing.otlp_receiver``), then draws the spans it received. The picture
needs Pillow (``pip install pillow``); without it only the text tree is printed.

    python docs/render_trace.py [--out docs/telemetry-trace.png]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from subagents.testing.otlp_receiver import OTLPReceiver, ReceivedSpan


def _agent(prompt: str, agent_type: str | None = None, **extra: Any) -> dict[str, Any]:
    tool_input: dict[str, Any] = {"description": prompt, "prompt": prompt, **extra}
    if agent_type is not None:
        tool_input["subagent_type"] = agent_type
    return {"name": "Agent", "input": tool_input}


def _read(path: str) -> dict[str, Any]:
    return {"name": "Read", "input": {"file_path": path}}


SCRIPT = {
    "agents": [
        {
            "agent_type": "main",
            "turns": [
                {
                    "tool_calls": [
                        _agent("map the parser", "Explore"),
                        _agent("map the tests", "Explore"),
                    ],
                    "delay_ms": 120,
                },
                {
                    "tool_calls": [
                        _agent("run the slow audit", "general-purpose", run_in_background=True),
                        _agent("draft the fix"),
                    ],
                    "delay_ms": 90,
                },
                {"text": "Plan ready; the audit reports back later.", "delay_ms": 70},
                {"text": "Audit folded in. Done.", "delay_ms": 60},
            ],
        },
        {"agent_type": "fork", "turns": [{"text": "fix drafted", "delay_ms": 160}]},
        {
            "match": "audit",
            "turns": [
                {"tool_calls": [_read("README.md")], "delay_ms": 150},
                {"tool_calls": [_read("notes.txt")], "delay_ms": 140},
                {"text": "audit clean", "delay_ms": 120},
            ],
        },
        {
            "match": "map the",
            "turns": [
                {"tool_calls": [_read("notes.txt")], "delay_ms": 100},
                {"text": "mapped", "delay_ms": 80},
            ],
        },
    ]
}


def collect() -> list[ReceivedSpan]:
    """Run the CLI against a receiver; the spans it exported."""
    with tempfile.TemporaryDirectory() as tmp, OTLPReceiver() as receiver:
        folder = Path(tmp)
        (folder / "notes.txt").write_text("notes\n")
        (folder / "README.md").write_text("readme\n")
        script = folder / "script.json"
        script.write_text(json.dumps(SCRIPT))
        env = {
            **os.environ,
            "SUBAGENTS_TELEMETRY": "1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_SERVICE_NAME": "subagents",
            "SUBAGENTS_HOME": str(folder / "home"),
        }
        command = [sys.executable, "-m", "subagents", "--cwd", str(folder), "-p", "fix it"]
        command += ["--model", f"scripted:{script}", "--output-format", "json"]
        subprocess.run(command, env=env, check=True, capture_output=True, timeout=120)
        return receiver.spans()


def ordered(spans: list[ReceivedSpan]) -> list[tuple[int, ReceivedSpan]]:
    """Depth-first, children by start time: (depth, span) rows."""
    by_parent: dict[str, list[ReceivedSpan]] = {}
    ids = {s.span_id for s in spans}
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids else ""
        by_parent.setdefault(parent, []).append(span)
    rows: list[tuple[int, ReceivedSpan]] = []

    def visit(parent: str, depth: int) -> None:
        for span in sorted(by_parent.get(parent, []), key=lambda s: s.start_ns):
            rows.append((depth, span))
            visit(span.span_id, depth + 1)

    visit("", 0)
    return rows


def label(span: ReceivedSpan) -> str:
    attrs = span.attributes
    parts = [span.name]
    if span.name.startswith("chat "):
        parts = ["chat"]
        parts.append(f"in {attrs.get('gen_ai.usage.input_tokens')} out "
                     f"{attrs.get('gen_ai.usage.output_tokens')}")  # fmt: skip
    if attrs.get("subagents.agent.is_background"):
        parts.append("(background, linked)")
    if attrs.get("subagents.agent.is_fork"):
        parts.append("(fork)")
    return "  ".join(parts)


def text_tree(rows: list[tuple[int, ReceivedSpan]]) -> str:
    start = min(span.start_ns for _, span in rows)
    lines = []
    for depth, span in rows:
        begin = (span.start_ns - start) / 1e6
        took = (span.end_ns - span.start_ns) / 1e6
        lines.append(f"{begin:7.0f} ms {took:6.0f} ms  {'  ' * depth}{label(span)}")
    return "\n".join(lines)


COLOURS = {
    "session": (96, 125, 139),
    "invoke_agent": (63, 81, 181),
    "chat": (0, 150, 136),
    "execute_tool": (255, 152, 0),
}


def draw(rows: list[tuple[int, ReceivedSpan]], out: Path) -> None:
    from PIL import Image, ImageDraw, ImageFont

    font_path = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    font = ImageFont.truetype(font_path, 13) if Path(font_path).exists() else None
    row_h, label_w, bar_w, pad = 22, 430, 640, 12
    width, height = label_w + bar_w + 3 * pad + 70, pad * 3 + row_h * (len(rows) + 1)
    image = Image.new("RGB", (width, height), "white")
    pen = ImageDraw.Draw(image)
    start = min(span.start_ns for _, span in rows)
    total = max(span.end_ns for _, span in rows) - start
    pen.text((pad, pad), f"trace of `subagents -p` (total {total / 1e6:.0f} ms)", "black", font)
    for index, (depth, span) in enumerate(rows, start=1):
        y = pad * 2 + index * row_h
        if index % 2 == 0:
            pen.rectangle((0, y - 3, width, y + row_h - 4), fill=(245, 245, 245))
        pen.text((pad + depth * 14, y), label(span), "black", font)
        x0 = label_w + pad + (span.start_ns - start) / total * bar_w
        x1 = max(x0 + 2, label_w + pad + (span.end_ns - start) / total * bar_w)
        colour = COLOURS.get(span.name.split(" ")[0], (120, 120, 120))
        pen.rectangle((x0, y, x1, y + row_h - 8), fill=colour)
        took = f"{(span.end_ns - span.start_ns) / 1e6:.0f} ms"
        pen.text((x1 + 4, y), took, (90, 90, 90), font)
    image.save(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "telemetry-trace.png")
    args = parser.parse_args()
    rows = ordered(collect())
    print(text_tree(rows))
    try:
        draw(rows, args.out)
    except ImportError:
        print("(Pillow is not installed: no picture drawn)", file=sys.stderr)
        return 0
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
