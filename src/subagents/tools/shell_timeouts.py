"""Bash's timeouts, shared by the tool (``tools/bash.py``) and its input model
(``tools/inputs/bash.py``, which must not import the tool: it is imported at the tool's first
call, and the tool module imports it only for type checking)."""

from __future__ import annotations

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
