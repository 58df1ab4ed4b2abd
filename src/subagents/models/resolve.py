"""From ``--model PROVIDER:NAME`` to a ``Model``, and from an agent's model alias to a model.

Providers are a small table of factories so a new one is one function and one line
(``register_provider``). Optional SDKs are imported inside their factory, never here: importing
this module must not fail on a machine without them.

Aliases (``sonnet|opus|haiku``, as agent definitions written for Claude Code use them) map to a
full model id per provider through ``MODEL_ALIASES``. A provider without an entry for an alias
keeps its own model (an OpenAI-compatible local server usually serves one model), and with the
scripted provider every alias is the same script, so the same instance.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from subagents.models.base import Model

ProviderFactory = Callable[[str, bool], Model]
"""``factory(rest_of_spec, keep_requests)``: ``rest_of_spec`` is what follows ``PROVIDER:``."""

MODEL_ALIASES: dict[str, dict[str, str]] = {
    "sonnet": {"anthropic": "claude-sonnet-5-5"},
    "opus": {"anthropic": "claude-opus-5-5"},
    "haiku": {"anthropic": "claude-haiku-5-5"},
}
"""alias -> provider -> full model id. Edit (or pass ``aliases=``) to configure.

The Anthropic ids are the newest of each family the ``anthropic`` SDK lists (none deprecated
there); ``anthropic:sonnet`` as a model spec maps through this table too."""

INHERIT = frozenset({"", "inherit"})


@runtime_checkable
class ModelFamily(Protocol):
    """A model that can make a sibling for another model id of the same provider."""

    provider: str

    def with_model_id(self, model_id: str) -> Model: ...


def _scripted(rest: str, keep_requests: bool) -> Model:
    from subagents.models.scripted import ScriptedModel

    if not rest:
        raise ValueError("model spec 'scripted:' needs a script path, as in 'scripted:script.json'")
    return ScriptedModel.from_file(Path(rest), keep_requests=keep_requests, name=f"scripted:{rest}")


def _anthropic(rest: str, keep_requests: bool) -> Model:
    """``anthropic:<model id or alias>``; key ``ANTHROPIC_API_KEY``, URL ``ANTHROPIC_BASE_URL``."""
    from subagents.models.anthropic import AnthropicModel

    model_id = _sdk_model_id("anthropic", rest)
    api_key = os.environ.get("ANTHROPIC_API_KEY") or None
    return AnthropicModel(model_id, api_key=api_key, base_url=os.environ.get("ANTHROPIC_BASE_URL"))


def _openai(rest: str, keep_requests: bool) -> Model:
    """``openai:<model>``; key ``OPENAI_API_KEY`` (optional), URL ``OPENAI_BASE_URL``."""
    from subagents.models.openai import OpenAIModel

    return OpenAIModel(_sdk_model_id("openai", rest))


def _local(rest: str, keep_requests: bool) -> Model:
    """``local`` (the embedded default), ``local:smollm2`` or ``local:/path/model.gguf``."""
    from subagents.models.local import local_model_for

    return local_model_for(rest)


def _sdk_model_id(provider: str, rest: str) -> str:
    """The model id of a ``provider:REST`` spec; an alias maps through ``MODEL_ALIASES``."""
    name = rest.strip()
    if not name:
        raise ValueError(f"model spec '{provider}:' needs a model id, as in '{provider}:MODEL'")
    return MODEL_ALIASES.get(name.lower(), {}).get(provider, name)


PROVIDERS: dict[str, ProviderFactory] = {
    "scripted": _scripted,
    "anthropic": _anthropic,
    "openai": _openai,
    "local": _local,
}
"""provider name -> factory; ``register_provider`` adds more."""


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Add (or replace) a provider; ``name`` is the part before the colon of a model spec."""
    PROVIDERS[name] = factory


def resolve_model(spec: str, *, keep_requests: bool = False) -> Model:
    """Build the model a ``--model`` / ``SUBAGENTS_MODEL`` spec names.

    ``keep_requests`` is for the scripted provider: the CLI leaves it off so long runs and the
    benchmark do not keep every request in memory (a script's ``record`` file still works).
    """
    provider, _, rest = spec.strip().partition(":")
    factory = PROVIDERS.get(provider)
    if factory is None:
        available = ", ".join(sorted(PROVIDERS))
        raise ValueError(
            f"model spec {spec!r}: unknown or unavailable provider {provider!r}; "
            f"available providers: {available} (as in 'scripted:PATH')"
        )
    return factory(rest, keep_requests)


def configured_aliases() -> Mapping[str, Mapping[str, str]]:
    """``MODEL_ALIASES`` with ``SUBAGENTS_MODEL_ALIASES`` (JSON, same shape) laid over it, e.g.
    ``{"sonnet": {"anthropic": "claude-sonnet-…", "openai": "my-big-model"}}``."""
    raw = os.environ.get("SUBAGENTS_MODEL_ALIASES")
    if not raw:
        return MODEL_ALIASES
    try:
        extra = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"SUBAGENTS_MODEL_ALIASES is not valid JSON: {exc}") from None
    if not isinstance(extra, dict) or not all(
        isinstance(v, dict) and all(isinstance(i, str) for i in v.values()) for v in extra.values()
    ):
        raise ValueError(
            "SUBAGENTS_MODEL_ALIASES must map alias -> {provider: model id}, e.g. "
            '{"sonnet": {"anthropic": "claude-sonnet-5-5"}}'
        )
    merged = {alias: dict(ids) for alias, ids in MODEL_ALIASES.items()}
    for alias, ids in extra.items():
        merged.setdefault(alias.lower(), {}).update(ids)
    return merged


def resolve_alias(
    provider_model: Model,
    alias: str | None,
    *,
    aliases: Mapping[str, Mapping[str, str]] | None = None,
) -> Model:
    """The model an agent definition's ``model`` field means, given the run's provider model.

    ``None``/``inherit`` keep the provider model; an alias maps through ``aliases`` (default
    ``MODEL_ALIASES``) for the provider; any other name is taken as a full model id. A scripted
    model answers every alias itself.
    """
    if alias is None or alias.strip().lower() in INHERIT:
        return provider_model
    if not isinstance(provider_model, ModelFamily):
        return provider_model
    table = configured_aliases() if aliases is None else aliases
    key = alias.strip().lower()
    if key in table:
        model_id = table[key].get(provider_model.provider)
        if model_id is None:
            return provider_model
    else:
        model_id = alias.strip()
    if model_id == provider_model.name:
        return provider_model
    return provider_model.with_model_id(model_id)
