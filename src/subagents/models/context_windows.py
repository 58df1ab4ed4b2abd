"""How many tokens a model's context window holds: the table behind automatic compaction.

Looked up like the price table (``models.pricing``): the first key the lower-cased model name
contains wins, so ``claude-sonnet-4-5-20250929`` and ``anthropic:claude-opus-4-1`` both find
``claude``. ``SUBAGENTS_CONTEXT_WINDOWS`` (JSON ``{"name part": tokens}``) is consulted first,
which is how a local server's model (Ollama, vLLM: their windows vary with how they were
started) gets its real size. The embedded ``local`` model's window is the context it is loaded
with (``SUBAGENTS_LOCAL_CONTEXT``, default 16,384). Anything unknown gets ``DEFAULT_WINDOW``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

DEFAULT_WINDOW = 128_000
"""Tokens assumed for a model the table does not know."""

LOCAL_DEFAULT_WINDOW = 16_384
"""The embedded model's default context (``models.local.DEFAULT_CONTEXT``)."""

WINDOWS: tuple[tuple[str, int], ...] = (
    ("claude", 200_000),
    ("gpt-4.1", 1_000_000),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("scripted", 200_000),
)
"""(substring of a model name, window in tokens), first match wins."""


def window_for(model_name: str, env: Mapping[str, str] | None = None) -> int:
    """The context window of ``model_name`` in tokens (see the module docstring)."""
    env = os.environ if env is None else env
    name = model_name.lower()
    for key, tokens in _env_windows(env):
        if key in name:
            return tokens
    if name == "local" or name.startswith("local:"):
        return _local_window(env)
    for key, tokens in WINDOWS:
        if key in name:
            return tokens
    return DEFAULT_WINDOW


def _local_window(env: Mapping[str, str]) -> int:
    raw = env.get("SUBAGENTS_LOCAL_CONTEXT", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else LOCAL_DEFAULT_WINDOW


def _env_windows(env: Mapping[str, str]) -> list[tuple[str, int]]:
    raw = env.get("SUBAGENTS_CONTEXT_WINDOWS")
    if not raw:
        return []
    problem = (
        "SUBAGENTS_CONTEXT_WINDOWS must map a model name part to a positive number of tokens, "
        'e.g. {"llama3": 8192}'
    )
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{problem}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(problem)  # noqa: TRY004 (a bad setting, reported like the others)
    windows: list[tuple[str, int]] = []
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{problem}: {key!r} has {value!r}")
        windows.append((str(key).lower(), value))
    return windows
