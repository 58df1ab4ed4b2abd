"""Where a swarm child's instructions go, part by part (callgrind, one pinned 1,000 x 5 run).

``scale.py swarm --instructions`` gives the whole; this gives its parts. Each part — a Python
function on a background child's path — is wrapped so it runs inside its own rarely used C
function (``itertools.starmap``'s ``starmap_next``, ``filterfalse_next``, ...): the Python
frames all look alike to callgrind, the C functions do not, so one run gives each part's
inclusive count (``callgrind_annotate --inclusive=yes``). Only the measured run after the
warm-up is collected (``--toggle-collect`` on ``functools.reduce``, as ``scale.py``; the whole
with the threads it starts, the parts from the main thread's profile), and
``PYTHONHASHSEED`` is fixed. A part's count includes any garbage collection that landed in it
(pass ``--gc-off`` to take the collector out of every part and of the whole).

    python bench/swarm_parts.py [--n 1000 --k 5 --latency 50 --gc-off]
    python bench/swarm_parts.py --part subagents.agents.durability:build_record ...

Needs valgrind; a few minutes on a quiet machine.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import itertools
import json
import operator
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

Caller = Callable[[Callable[[], Any]], Any]


def _starmap(thunk: Callable[[], Any]) -> Any:
    return next(itertools.starmap(thunk, ((),)))


def _filterfalse(thunk: Callable[[], Any]) -> Any:
    box: list[Any] = []
    next(itertools.filterfalse(lambda _: box.append(thunk()), (0,)))
    return box[0]


def _takewhile(thunk: Callable[[], Any]) -> Any:
    box: list[Any] = []
    next(itertools.takewhile(lambda _: not box.append(thunk()), (0,)))
    return box[0]


def _dropwhile(thunk: Callable[[], Any]) -> Any:
    box: list[Any] = []
    next(itertools.dropwhile(lambda _: box.append(thunk()), (0,)))
    return box[0]


def _accumulate(thunk: Callable[[], Any]) -> Any:
    box: list[Any] = []
    list(itertools.accumulate((0, 0), lambda _, __: box.append(thunk())))
    return box[0]


def _call_tracing(thunk: Callable[[], Any]) -> Any:
    return sys.call_tracing(thunk, ())


def _operator_call(thunk: Callable[[], Any]) -> Any:
    return operator.call(thunk)


def _calliter(thunk: Callable[[], Any]) -> Any:
    return next(iter(thunk, _NEVER))


_NEVER = object()

WRAPPERS: list[tuple[str, Caller]] = [
    ("starmap_next", _starmap),
    ("filterfalse_next", _filterfalse),
    ("takewhile_next", _takewhile),
    ("dropwhile_next", _dropwhile),
    ("accumulate_next", _accumulate),
    ("sys_call_tracing", _call_tracing),
    ("_operator_call", _operator_call),
    ("calliter_iternext", _calliter),
]


def _parts() -> list[tuple[str, Any, str]]:
    """(label, owner, attribute) of each part wrapped, in the order of ``WRAPPERS``."""
    from subagents.agents import agent_tool, children, durability
    from subagents.store import durable, files

    return [
        (
            "Children.launch (coordinator: start record, task, output file, child task)",
            children.Children,
            "launch",
        ),
        (
            "Children.finalize (settle, output append, terminal write built, notify chain)",
            children.Children,
            "finalize",
        ),
        (
            "DurableRecords._hand_over (staging of both writes)",
            durable.DurableRecords,
            "_hand_over",
        ),
        ("assemble", agent_tool, "assemble"),
        ("Children._notify_parent", children.Children, "_notify_parent"),
        ("definition_spec", agent_tool, "definition_spec"),
        ("durability.started (start record built and encoded)", durability, "started"),
        ("FileCommit.publish (renames, markers, cache)", files.FileCommit, "publish"),
    ]


def _named_parts(names: list[str]) -> list[tuple[str, Any, str]]:
    """``module:attribute`` or ``module:Class.attribute`` as ``_parts`` gives them: the name is
    replaced where it is looked up (a function imported by name is patched in its importer)."""
    import importlib

    parts = []
    for name in names:
        module_name, _, path = name.partition(":")
        owner: Any = importlib.import_module(module_name)
        *classes, attribute = path.split(".")
        for cls in classes:
            owner = getattr(owner, cls)
        parts.append((name, owner, attribute))
    return parts


def wrap_parts(names: list[str]) -> list[tuple[str, str]]:
    """Wrap each part in its C function; returns (label, symbol) pairs."""
    named = []
    parts = _named_parts(names) if names else _parts()
    if len(parts) > len(WRAPPERS):
        raise SystemExit(f"at most {len(WRAPPERS)} parts per run")
    for (label, owner, attribute), (symbol, caller) in zip(parts, WRAPPERS, strict=False):
        original = getattr(owner, attribute)
        if inspect.iscoroutinefunction(original):
            # The wrapper would count the coroutine's creation, not its run.
            raise SystemExit(f"{label}: a coroutine function cannot be counted this way")

        def wrapped(
            *args: Any, __original: Any = original, __caller: Caller = caller, **kwargs: Any
        ) -> Any:
            return __caller(lambda: __original(*args, **kwargs))

        static = isinstance(inspect.getattr_static(owner, attribute), staticmethod)
        setattr(owner, attribute, staticmethod(wrapped) if static else wrapped)
        named.append((label, symbol))
    return named


def inside(n: int, k: int, latency_ms: int, gc_off: bool, names: list[str]) -> None:
    sys.path.insert(0, str(HERE))
    import scale

    named = wrap_parts(names)
    if gc_off:
        gc.disable()  # (the runtime then neither freezes nor tunes: nothing is collected)
    figures = scale.measured_swarm(n, k, latency_ms)
    print(json.dumps({"model_calls": figures["model_calls"], "parts": named}))


def inclusive_counts(profile: str) -> dict[str, int]:
    """Each C function's inclusive instructions in a callgrind profile (the wrappers' symbols
    among them)."""
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", profile],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    inclusive: dict[str, int] = {}
    for line in annotated.splitlines():
        match = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+\S*:(\S+)", line)
        if match:
            name = match.group(2).split("'")[0]
            inclusive.setdefault(name, int(match.group(1).replace(",", "")))
    return inclusive


def measure(n: int, k: int, latency_ms: int, gc_off: bool, names: list[str]) -> dict[str, Any]:
    from call_instructions import under_callgrind

    with tempfile.TemporaryDirectory(prefix="swarm-parts-") as tmp:
        sizes = [f"--n={n}", f"--k={k}", f"--latency={latency_ms}"]
        options = [*(["--gc-off"] if gc_off else []), *(f"--part={name}" for name in names)]
        total, stdout = under_callgrind([__file__, "--inside", *sizes, *options], keep=tmp)
        figures = json.loads(stdout.splitlines()[-1])
        # The parts are main-thread functions: the main thread's profile holds them.
        inclusive = inclusive_counts(f"{tmp}/callgrind.out-01")
    parts = {label: round(inclusive.get(symbol, 0) / n) for label, symbol in figures["parts"]}
    return {
        "children": n,
        "model_calls": figures["model_calls"],
        "instructions_per_child": round(total.all / n),
        "main_thread_instructions_per_child": round(total.main / n),
        "parts_per_child": parts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--latency", type=int, default=50)
    parser.add_argument("--gc-off", action="store_true")
    parser.add_argument(
        "--part",
        action="append",
        default=[],
        help="module:function or module:Class.method to count instead of the default parts",
    )
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        inside(args.n, args.k, args.latency, args.gc_off, args.part)
        return
    figures = measure(args.n, args.k, args.latency, args.gc_off, args.part)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
