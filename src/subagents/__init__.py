"""subagents: a runtime for Claude-Code-style sub-agents.

Importing this package does nothing but define names: no I/O, no directories, no optional imports.
"""

from __future__ import annotations

__version__ = "0.1.0"
