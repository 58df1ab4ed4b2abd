"""Bash rule escapes: how many corpus spellings the permission checker lets through.

Counts, over the corpus of ``tests/bash_corpus.py``:

* ``rm``: spellings of ``rm tgt`` allowed in ``bypassPermissions`` with the deny rule
  ``Bash(rm:*)`` (an escape = the call would run);
* ``git push``: the same for ``Bash(git push:*)``;
* ``plan``: commands that change files yet are allowed in plan mode (and so by Explore/Plan);
* ``must-allow``: ordinary commands wrongly *not* allowed by the rules that cover them.

It uses only ``decide`` and ``PermissionContext``, so it runs against an older checkout too:
``PYTHONPATH=/path/to/old/src python bench/bash_escapes.py`` gives the "before" figures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bash_corpus import GIT_PUSH_BYPASSES, MUST_ALLOW, PLAN_MODE_WRITES, RM_BYPASSES
from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.permissions import PermissionContext, decide, parse_rule
from subagents.tools.base import ToolContext
from subagents.tools.bash import BashTool
from subagents.tools.inputs.bash import BashInput


def verdict(mode: Any, command: str, deny: tuple[str, ...], allow: tuple[str, ...] = ()) -> str:
    root = Path.cwd().resolve()
    context = PermissionContext(
        mode=mode,
        project_root=root,
        deny=tuple(parse_rule(r) for r in deny),
        allow=tuple(parse_rule(r) for r in allow),
    )
    ctx = ToolContext(
        cwd=root, roots=(root,), abort=AbortSignal(), agent=AgentRef(agent_id="b", agent_type="x")
    )
    try:
        return decide(context, BashTool(), BashInput(command=command), ctx).behavior
    except Exception as exc:  # a crash of the checker is reported, not an escape
        return f"crash: {type(exc).__name__}"


def main() -> None:
    rm = [c for c in RM_BYPASSES if verdict("bypassPermissions", c, ("Bash(rm:*)",)) == "allow"]
    push = [
        c
        for c in GIT_PUSH_BYPASSES
        if verdict("bypassPermissions", c, ("Bash(git push:*)",)) == "allow"
    ]
    plan = [c for c in PLAN_MODE_WRITES if verdict("plan", c, ()) == "allow"]
    refused = [
        c for c, allow in MUST_ALLOW if verdict("default", c, ("Bash(rm:*)",), allow) != "allow"
    ]
    print(
        json.dumps(
            {
                "rm": f"{len(rm)}/{len(RM_BYPASSES)}",
                "git push": f"{len(push)}/{len(GIT_PUSH_BYPASSES)}",
                "plan": f"{len(plan)}/{len(PLAN_MODE_WRITES)}",
                "must-allow refused": f"{len(refused)}/{len(MUST_ALLOW)}",
            }
        )
    )
    for name, escapes in (("rm", rm), ("git push", push), ("plan", plan), ("refused", refused)):
        for command in escapes:
            print(f"  {name}: {command!r}")


if __name__ == "__main__":
    main()
