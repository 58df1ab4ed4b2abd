"""Instructions to read one model reply of the HTTP bench, offline (callgrind; load-proof).

The client-side work of a lean call apart from the network: the worker's reply as the replay
server sends it (``replay_server.py``: a text block and a ``Note`` call, one HTTP chunk per SSE
record, all of it in one read, as on the bench), read as ``LeanCall.respond`` reads it: de-chunked
(``_http._dechunk_pieces``: the chunks' data, not joined) and assembled (``feed_pieces``, which
reads records straight from chunks that end them, the decoder's flush, and ``done``; a tree
from before session 12 has no ``feed_pieces``: there the chunks are joined, split into records,
``SSEDecoder.records``, and fed by ``feed_records``), ``--replies`` times inside
``functools.reduce``, which callgrind alone counts. ``--part`` counts one part: ``dechunk``,
``decode`` (de-chunk, join and split into records: the general path's decoding) or ``all``
(the default: through ``done``). ``--body`` counts
the request body instead: ``build_params`` of a worker's growing history and ``orjson.dumps``
of it, one call per turn of K turns (OpenAI's includes the history conversion's check).

    python bench/http_decode_instructions.py --provider anthropic
    PYTHONPATH=/other/tree/src python bench/http_decode_instructions.py --provider openai
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

from subagents.models import _http
from subagents.models._sse import SSEDecoder
from subagents.models.anthropic import StreamAssembler
from subagents.models.openai import ChunkAssembler

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def worker_reply(provider: str, turn: int, k: int) -> bytes:
    """The chunked body the replay server sends a worker on ``turn`` (no head)."""
    from replay_server import AnthropicReplay, FanoutScenario, OpenAIReplay, encode

    calls = FanoutScenario(n=50, k=k).calls(["Note"], turn)
    replay = OpenAIReplay() if provider == "openai" else AnthropicReplay()
    return b"".join(encode(replay.reply(calls, None))) + b"0\r\n\r\n"


def read_reply(provider: str, body: bytes, part: str) -> object:
    dechunk = getattr(_http, "_dechunk_pieces", None)
    pieces = dechunk(bytearray(body))[0] if dechunk else [_http._dechunk(bytearray(body))[0]]
    if part == "dechunk":
        return pieces
    decoder = SSEDecoder()
    if part == "decode":
        return decoder.records(b"".join(pieces)) + decoder.flush_records()
    assembler = ChunkAssembler() if provider == "openai" else StreamAssembler()
    if hasattr(assembler, "feed_pieces"):
        assembler.feed_pieces(pieces, decoder)
    else:
        assembler.feed_records(decoder.records(b"".join(pieces)))
    assembler.feed_records(decoder.flush_records())
    return assembler.done("m", "label")


def histories(provider: str, k: int) -> list[Any]:
    """A worker's K requests (growing histories), as the runtime builds them."""
    from subagents.models.base import ModelRequest, RequestMetadata, ToolSchema

    tool = ToolSchema(name="Note", description="Take a note.", input_schema={"type": "object"})
    messages: list[Any] = [{"role": "user", "content": "job 1"}]
    metadata = RequestMetadata(agent_id=f"worker-{provider}", agent_type="worker", prompt="job")
    requests = []
    for turn in range(k):
        # The loop sends its live history (one list, growing): each request a copy here, so
        # the K requests can be replayed; the conversion cache sees the same message objects.
        requests.append(
            ModelRequest(
                model="m",
                system="You are a worker.",
                messages=list(messages),
                tools=[tool],
                max_tokens=1024,
                metadata=metadata,
            )
        )
        call_id = f"toolu_bench_note_{turn:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "I'll record a note for this step."},
                    {"type": "tool_use", "id": call_id, "name": "Note", "input": {"text": "s"}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "noted"}],
            }
        )
    return requests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=("anthropic", "openai"), default="anthropic")
    parser.add_argument("--part", choices=("dechunk", "decode", "all"), default="all")
    parser.add_argument("--body", action="store_true", help="count the request bodies instead")
    parser.add_argument("--replies", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside:
        return inside(args)
    from call_instructions import counted

    script = [__file__, "--inside", f"--provider={args.provider}", f"--part={args.part}"]
    script += [f"--replies={args.replies}", f"--k={args.k}"] + (["--body"] if args.body else [])
    total, units = counted(script)
    what = "request body" if args.body else f"reply ({args.part})"
    # No thread runs here: all threads' count is the main thread's.
    print(f"{args.provider:9} {what:16} instructions each: {total.all / units:,.0f}  ({units})")
    return 0


def inside(args: argparse.Namespace) -> int:
    import orjson

    if args.body:
        from subagents.models.anthropic import AnthropicModel
        from subagents.models.openai import OpenAIModel

        def one_history(count: int, _: int) -> int:
            model: Any
            if args.provider == "openai":
                model = OpenAIModel("m", _endpoint=endpoint)
            else:
                model = AnthropicModel("m", _endpoint=endpoint)
            for request in requests:
                call = model._lean_call(request)
                assert call is not None
                orjson.dumps(call.body)
            return count + len(requests)

        from subagents.models._http import Origin
        from subagents.models._lean import LeanEndpoint

        endpoint = LeanEndpoint(origin=Origin.parse("http://127.0.0.1:9"), path="/", headers=b"")
        requests = histories(args.provider, args.k)
        rounds = max(1, args.replies // args.k)
        one_history(0, 0)
        print("model calls", functools.reduce(one_history, range(rounds), 0), flush=True)
        return 0
    bodies = [worker_reply(args.provider, turn, args.k) for turn in range(args.k)]
    worker = bodies[0]  # a Note turn: k - 1 of a worker's k replies

    def one(count: int, _: int) -> int:
        read_reply(args.provider, worker, args.part)
        return count + 1

    for body in bodies:
        read_reply(args.provider, body, args.part)
    print("model calls", functools.reduce(one, range(args.replies), 0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
