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
"""

from __future__ import annotations

import gc

_frozen = False


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
