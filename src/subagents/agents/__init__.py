"""Agent definitions and what a child agent is built from (SPEC §2, §5).

Importing this package does nothing: definitions are loaded on demand by
``subagents.agents.definitions.load_definitions``.
"""

from __future__ import annotations
