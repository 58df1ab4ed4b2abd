"""The EnterWorktree and ExitWorktree tools' inputs, imported at the first call
(``tools.base.LazyInput``); until then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from subagents.tools.base import BuiltinToolInput

_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class EnterWorktreeInput(BuiltinToolInput):
    name: str | None = Field(
        default=None,
        pattern=_NAME_PATTERN,
        description="Worktree name (letters, digits, '.', '_', '-'); a random one if omitted.",
    )


class ExitWorktreeInput(BuiltinToolInput):
    action: Literal["keep", "remove"] = Field(
        description='"keep" leaves the worktree on disk; "remove" deletes it and its branch.'
    )
    discard_changes: bool = Field(
        default=False,
        description="Required true to remove a worktree with uncommitted changes or commits.",
    )
