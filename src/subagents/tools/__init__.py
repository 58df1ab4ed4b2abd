"""Built-in tools, one module each."""

from __future__ import annotations

from typing import Any

from subagents.tools.base import Tool


def core_tools() -> list[Tool[Any]]:
    """The tools every agent may be given (before definitions and permissions filter them)."""
    from subagents.tools.bash import BashTool
    from subagents.tools.edit import EditTool
    from subagents.tools.glob import GlobTool
    from subagents.tools.grep import GrepTool
    from subagents.tools.notebook_edit import NotebookEditTool
    from subagents.tools.read import ReadTool
    from subagents.tools.web_fetch import WebFetchTool
    from subagents.tools.write import WriteTool

    return [
        BashTool(),
        GlobTool(),
        GrepTool(),
        ReadTool(),
        EditTool(),
        WriteTool(),
        NotebookEditTool(),
        WebFetchTool(),
    ]
