"""Test helpers for users of subagents: a scripted model that needs no network and no key.

``ScriptedModel`` replays turns from a script (SPEC §19) or asks a Python function for each
turn, and records every request it received so a test can assert on prompts, tool arrays and
message prefixes.
"""

from __future__ import annotations

from subagents.models.scripted import (
    ScriptedModel,
    ScriptError,
    ScriptTurn,
    TurnFunction,
    TurnResult,
)

__all__ = ["ScriptError", "ScriptTurn", "ScriptedModel", "TurnFunction", "TurnResult"]
