"""The import-time heap, kept out of garbage collection once per process.

A full collection scans every tracked object of the process; the modules, classes and schemas
that importing the runtime (and the program around it) created live as long as the process, so
scanning them finds nothing. ``gc.freeze()`` moves them to the permanent generation: later
collections scan only what was made after. The CLI does it before its run (``cli/main.py``);
a library user's program gets it at its first ``Session`` (``RuntimeConfig.freeze_import_heap``,
``SUBAGENTS_GC_FREEZE=0`` to opt out), so no caller has to know about it.

What makes it safe in someone else's process:
- one collection first, so no cyclic garbage made before the first session is frozen with
  the heap (frozen objects are never collected; freed by reference counting they still are);
- once per process: what later sessions create is collected as usual;
- nothing when the program disabled the collector (it manages collection itself).

The collector's thresholds are the runtime's business too (``tune_collector``). With the import
heap frozen, the oldest generation starts nearly empty, so Python's rule that a full collection
waits until the old generation has grown by a quarter no longer holds one back: a program whose
live heap grows — 1,000 background children alive at once, ~80 tracked objects each — paid two
full collections (~65 ms apiece, every live object of every child) per swarm run. And a young
collection every 700 allocations walks whatever young objects are alive at that moment — in a
swarm, the objects of the model calls in flight, which live across a model's wait — so most of
the collector's work was walking live objects again and again. The runtime's thresholds let a
young collection come every 10,000 allocations (one fourteenth as often; each walks more, but
much of what it would have walked has died meanwhile) and a full collection at most a tenth as
often (``RUNTIME_THRESHOLDS``). Only where the program left Python's defaults and the collector
on (a program that chose its own keeps them), once per process; ``RuntimeConfig.gc_thresholds`` /
``SUBAGENTS_GC_THRESHOLDS`` choose others or none. The cost: cyclic garbage waits longer for its
collection (at most 10,000 young objects; in the old generation ten times longer); the runtime
makes none (``tests/test_memory.py``).
"""

from __future__ import annotations

import gc

_frozen = False
_tuned = False

PYTHON_THRESHOLDS = (700, 10, 10)
"""``gc.get_threshold()`` of a program that never set it (CPython 3.11-3.13)."""
RUNTIME_THRESHOLDS = (10_000, 10, 100)
"""What the runtime sets: a young collection after 10,000 allocations instead of 700, a full
one after 100 middle ones instead of 10 (measured: docs/performance.md, the swarm, session 8)."""


def freeze_import_heap(*, collect: bool = True) -> bool:
    """Freeze the heap as it is now, the first time this is called with the collector on;
    True when it froze now. ``collect=False`` where nothing can be garbage yet (the CLI's
    start-up runs with the collector off)."""
    global _frozen
    if _frozen or not gc.isenabled():
        return False
    _frozen = True
    if collect:
        gc.collect()
    gc.freeze()
    return True


def is_frozen() -> bool:
    """Whether this process's import heap was frozen by ``freeze_import_heap``."""
    return _frozen


def tune_collector(thresholds: tuple[int, int, int]) -> bool:
    """Set the collector's thresholds, the first time this is called in a process whose program
    left Python's defaults and the collector on; True when it set them now."""
    global _tuned
    if _tuned or not gc.isenabled() or gc.get_threshold() != PYTHON_THRESHOLDS:
        return False
    _tuned = True
    gc.set_threshold(*thresholds)
    return True
