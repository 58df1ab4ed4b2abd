"""What a model call costs in US dollars: the price table behind ``--max-budget-usd``,
``total_cost_usd`` and ``modelUsage``.

Prices are USD per million tokens, looked up by the first table key the model name contains
(so ``anthropic:claude-sonnet-4-5`` and ``claude-sonnet-4-5-20250929`` both find ``sonnet``).
Cache writes cost 1.25x input and cache reads 0.1x input unless a price says otherwise, as
Anthropic bills them. Models we do not know (a local server, the embedded model, a script) cost
nothing unless ``SUBAGENTS_PRICES`` names them, e.g.
``{"scripted": {"input": 3, "output": 15}}`` — which is how tests give a script a price.
Other budgets (per-child cost limits) read the same table through ``price_for``. A session's
agents are charged through its ``SessionPrices``: each model name priced once, at its first call
in the session.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from subagents.messages import Usage


@dataclass(frozen=True, kw_only=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float | None = None
    cache_read: float | None = None

    def cost(self, usage: Usage) -> float:
        write = self.input * 1.25 if self.cache_write is None else self.cache_write
        read = self.input * 0.1 if self.cache_read is None else self.cache_read
        total = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_creation_input_tokens * write
            + usage.cache_read_input_tokens * read
        )
        return total / 1_000_000


FREE = Price(input=0.0, output=0.0, cache_write=0.0, cache_read=0.0)

PRICES: dict[str, Price] = {
    "opus": Price(input=5.0, output=25.0),
    "sonnet": Price(input=3.0, output=15.0),
    "haiku": Price(input=1.0, output=5.0),
}
"""Substring of a model name -> price. Extend it (or set ``SUBAGENTS_PRICES``) for others."""


def price_for(model_name: str, env: Mapping[str, str] | None = None) -> Price:
    """The price of ``model_name``: ``SUBAGENTS_PRICES`` first, then ``PRICES``, else free."""
    name = model_name.lower()
    # (each table walked in place: no list of both per look-up, once per agent's loop)
    raw = (os.environ if env is None else env).get("SUBAGENTS_PRICES")
    if raw:
        for key, price in _parsed_prices(raw).items():
            if key.lower() in name:
                return price
    for key, price in PRICES.items():
        if key.lower() in name:
            return price
    return FREE


class SessionPrices:
    """A session's prices: each model name priced once, at its first call in the session
    (``price_for``: ``SUBAGENTS_PRICES`` and ``PRICES`` as they are then), not once per agent
    (every child of a swarm read the variable and walked the table for the same name)."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[str, Price] = {}

    def __call__(self, model_name: str) -> Price:
        price = self._known.get(model_name)
        if price is None:
            price = self._known[model_name] = price_for(model_name)
        return price


def cost_usd(model_name: str, usage: Usage, env: Mapping[str, str] | None = None) -> float:
    return price_for(model_name, env).cost(usage)


def _parsed_prices(raw: str) -> dict[str, Price]:
    """``SUBAGENTS_PRICES``'s table (``raw``: its non-empty value)."""
    try:
        data = json.loads(raw)
        return {
            str(key): Price(
                input=float(value["input"]),
                output=float(value["output"]),
                cache_write=_optional(value.get("cache_write")),
                cache_read=_optional(value.get("cache_read")),
            )
            for key, value in data.items()
        }
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(
            "SUBAGENTS_PRICES must map a model name part to {input, output[, cache_write, "
            'cache_read]} in USD per million tokens, e.g. {"my-model": {"input": 1, '
            f'"output": 2}}}}: {exc}'
        ) from None


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)
