"""Claude model names (``claude-sonnet-4-5``, ``sonnet``, ``opus[1m]``) on any provider.

Programs written for Claude Code pass bare Claude names to ``--model`` and ``set_model``. A name
with a colon (``openai:gpt``, ``scripted:FILE``) or ``local`` is a ``subagents`` model spec and
used as is. Any other name is a Claude name: with the Anthropic provider configured it runs
as that model; with another provider its family maps through the alias table for that provider
(``SUBAGENTS_MODEL_ALIASES``), and without an entry the configured model itself runs — so with
``SUBAGENTS_MODEL=openai:…`` every Claude name runs there. ``ModelChoice.note`` says which.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from subagents.models.resolve import PROVIDERS, configured_aliases

FAMILIES = ("opus", "sonnet", "haiku")
_CONTEXT_SUFFIX = re.compile(r"\[[^\]]*\]$")  # "opus[1m]": a context-window variant


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelChoice:
    """The model spec to run, the name that was asked for, and how one became the other."""

    spec: str
    requested: str | None = None
    note: str = ""


def is_provider_spec(name: str) -> bool:
    """``PROVIDER:NAME`` (a colon: no Claude name has one) or the embedded ``local``; an
    unknown provider then fails with resolve's error naming the providers there are."""
    return ":" in name or name.strip() in PROVIDERS


def claude_family(name: str) -> str | None:
    """``sonnet`` for ``claude-sonnet-4-5``, ``claude-3-5-sonnet-…``, ``Sonnet``, ``sonnet[1m]``."""
    bare = _CONTEXT_SUFFIX.sub("", name.strip().lower())
    if bare in FAMILIES:
        return bare
    if bare.startswith("claude"):
        for family in FAMILIES:
            if family in bare.split("-"):
                return family
    return None


def choose(requested: str | None, configured: str) -> ModelChoice:
    """What ``--model REQUESTED`` runs, given the run's configured model spec."""
    if not requested:
        return ModelChoice(spec=configured)
    if is_provider_spec(requested):
        return ModelChoice(spec=requested, requested=requested)
    bare = _CONTEXT_SUFFIX.sub("", requested.strip())
    provider = configured.partition(":")[0]
    if provider == "anthropic":
        spec = f"anthropic:{bare}"
        return ModelChoice(spec=spec, requested=requested, note=f"{requested} runs as {spec}")
    family = claude_family(bare) or bare.lower()
    mapped = _mapped(family, provider, configured_aliases())
    spec = f"{provider}:{mapped}" if mapped else configured
    how = (
        f"mapped through the alias table for provider {provider!r}"
        if mapped
        else "the configured model (no alias entry for this provider)"
    )
    return ModelChoice(spec=spec, requested=requested, note=f"{requested} runs as {spec}: {how}")


def _mapped(family: str, provider: str, table: Mapping[str, Mapping[str, str]]) -> str | None:
    if provider == "scripted":
        return None  # a script answers every alias itself
    return table.get(family, {}).get(provider)
