"""A child placed nowhere of its own shares one frozen ``Workspace`` (``IN_PARENTS_FOLDER``):
``fresh._workspace`` equals the workspace built from the request's fields for every mix of a
folder, roots (an empty tuple is not None) and a worktree, and is the shared value only when
all three are None; a spec's default is that value too."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from subagents.agents.fresh import ChildRequest, _workspace
from subagents.agents.spec import IN_PARENTS_FOLDER, ChildSpec, Workspace
from subagents.testing import ScriptedModel


def test_a_requests_workspace_is_the_one_its_fields_make(tmp_path: Path) -> None:
    worktree: Any = object()  # (only carried)
    for cwd, roots, tree in itertools.product(
        [None, tmp_path], [None, (), (tmp_path,)], [None, worktree]
    ):
        request = ChildRequest(
            definition=None,  # type: ignore[arg-type]
            prompt="p",
            description="d",
            cwd=cwd,
            roots=roots,
            worktree=tree,
        )
        made = _workspace(request)
        assert made == Workspace(cwd=cwd, roots=roots, worktree=tree)
        assert (made is IN_PARENTS_FOLDER) == (cwd is None and roots is None and tree is None)


def test_a_specs_default_workspace_is_the_shared_empty_one() -> None:
    spec = ChildSpec(
        kind="fork",
        agent_type="fork",
        description="d",
        prompt="p",
        model=ScriptedModel.from_dict({"agents": []}),
        system="s",
        tools=[],
        messages=[],
    )
    assert spec.workspace is IN_PARENTS_FOLDER and spec.workspace == Workspace()
