"""Bash grammars compared: tree-sitter-bash (what we use) and bashlex, on our corpus and on size.

For each parser:

* ``corpus``: of every command in ``tests/bash_corpus.py`` (bypass spellings, plan-mode writes,
  must-allow commands), how many it parses without an error (tree-sitter: no ERROR/MISSING
  node; bashlex: no exception);
* ``1KB`` .. ``1MB``: CPU seconds to parse ``echo a && echo a && ...`` of that size (a parser
  that fails or needs more than 60 s is reported as such).

``ours`` is the whole analysis (``bash_commands.analyze``, tree-sitter plus the walk and the
semantic layer) with the 256 KiB cap lifted. bashlex is not a dependency: ``pip install
bashlex`` to include it. The old hand-written scanner's figures are in ``bench/bash_check.py``
runs of the commit before this one (see docs/bash-permissions.md).

Run: ``python bench/bash_parsers.py``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bash_corpus import MUST_ALLOW, PLAN_MODE_WRITES, RM_BYPASSES
from subagents.tools import bash_parse
from subagents.tools.bash_commands import analyze

SIZES = (1_000, 100_000, 1_000_000)


def tree_sitter_parse(command: str) -> bool:
    tree = bash_parse._parser().parse(command.encode())
    return not tree.root_node.has_error


def ours(command: str) -> bool:
    return not any("parse" in reason for reason in analyze(command).opaque)


def parsers() -> dict[str, Callable[[str], bool]]:
    found: dict[str, Callable[[str], bool]] = {"tree-sitter": tree_sitter_parse, "ours": ours}
    try:
        import bashlex
    except ImportError:
        return found

    def bashlex_parse(command: str) -> bool:
        try:
            bashlex.parse(command)
        except Exception:  # bashlex raises on what it does not support
            return False
        return True

    found["bashlex"] = bashlex_parse
    return found


def cpu(parse: Callable[[str], bool], command: str) -> str:
    start = time.process_time()
    try:
        parse(command)
    except RecursionError:
        return "RecursionError"
    return f"{time.process_time() - start:.3f}"


def main() -> None:
    bash_parse.MAX_SCRIPT_CHARS = 1 << 30  # measure the analysis itself, past the cap
    corpus = [*RM_BYPASSES, *PLAN_MODE_WRITES, *(command for command, _ in MUST_ALLOW)]
    for name, parse in parsers().items():
        row: dict[str, str] = {"parser": name}
        row["corpus"] = f"{sum(parse(c) for c in corpus)}/{len(corpus)}"
        for size in SIZES:
            command = "echo a && " * (size // 10) + "true"
            row[f"{size // 1000}KB"] = cpu(parse, command)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
