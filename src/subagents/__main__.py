"""``python -m subagents``: the same as the ``subagents`` command."""

from __future__ import annotations

from subagents.cli.entry import run

run()
