"""``pricing.price_for`` walks ``SUBAGENTS_PRICES``'s table and then ``PRICES`` in place (no list
of both per look-up): compared here with the plain form it replaced, over model names, tables
given and unset, a program's own ``PRICES`` entries, and a malformed table refused alike."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from subagents.models import pricing
from subagents.models.pricing import FREE, PRICES, Price, price_for


def _plain(model_name: str, env: Mapping[str, str]) -> Price:
    raw = env.get("SUBAGENTS_PRICES")
    table = pricing._parsed_prices(raw) if raw else {}
    name = model_name.lower()
    for key, price in [*table.items(), *PRICES.items()]:
        if key.lower() in name:
            return price
    return FREE


NAMES = ["claude-opus-4-5", "Claude-Sonnet-4", "HAIKU", "my-model-x", "gpt-4o", "", "scripted"]
TABLES = [
    None,
    "",
    json.dumps({"my-model": {"input": 1, "output": 2}}),
    json.dumps(
        {"Sonnet": {"input": 9, "output": 9, "cache_read": 0.5}, "gpt": {"input": 3, "output": 4}}
    ),
]


@pytest.mark.parametrize("table", TABLES)
def test_a_models_price_is_the_plain_look_ups(
    table: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {} if table is None else {"SUBAGENTS_PRICES": table}
    monkeypatch.setitem(PRICES, "scripted", Price(input=0.5, output=0.5))  # a program's own entry
    for name in NAMES:
        assert price_for(name, env) == _plain(name, env), name
        if table is not None:
            monkeypatch.setenv("SUBAGENTS_PRICES", table)
        else:
            monkeypatch.delenv("SUBAGENTS_PRICES", raising=False)
        assert price_for(name) == _plain(name, env), name


def test_a_malformed_table_is_refused_by_name() -> None:
    for raw in ("{", json.dumps({"x": {"input": 1}}), json.dumps(["x"])):
        with pytest.raises(ValueError, match="SUBAGENTS_PRICES"):
            price_for("x", {"SUBAGENTS_PRICES": raw})
