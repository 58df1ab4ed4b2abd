"""``pricing.price_for`` walks ``SUBAGENTS_PRICES``'s table and then ``PRICES`` in place (no list
of both per look-up): compared here with the plain form it replaced, over model names, tables
given and unset, a program's own ``PRICES`` entries, and a malformed table refused alike. A
session prices each model name once (``SessionPrices``, its callers' ``prices``): the same
prices, one look-up."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from cli_helpers import agent_call
from subagents.messages import Usage
from subagents.models import pricing
from subagents.models.pricing import FREE, PRICES, Price, price_for
from subagents.session import Session, SessionOptions
from subagents.testing import ScriptedModel


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


@pytest.mark.parametrize("table", TABLES)
def test_a_sessions_prices_are_price_for_s_looked_up_once_per_name(
    table: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if table is not None:
        monkeypatch.setenv("SUBAGENTS_PRICES", table)
    else:
        monkeypatch.delenv("SUBAGENTS_PRICES", raising=False)
    asked: list[str] = []
    real = pricing.price_for

    def counted(model_name: str, env: Mapping[str, str] | None = None) -> Price:
        asked.append(model_name)
        return real(model_name, env)

    monkeypatch.setattr(pricing, "price_for", counted)
    prices = pricing.SessionPrices()
    for _ in range(3):
        for name in NAMES:
            assert prices(name) == real(name), name
    assert asked == NAMES  # the first look-up of each name, no more


async def test_a_sessions_agents_are_charged_their_calls_with_one_look_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A coordinator and three children on the priced scripted model: each agent's cost is
    its usage at ``price_for``'s price (as each loop looked it up before), and the agents'
    loops asked ``price_for`` once for the name."""
    monkeypatch.setenv("SUBAGENTS_PRICES", json.dumps({"scripted": {"input": 10, "output": 50}}))
    asked: list[str] = []
    real = pricing.price_for

    def counted(model_name: str, env: Mapping[str, str] | None = None) -> Price:
        asked.append(model_name)
        return real(model_name, env)

    monkeypatch.setattr(pricing, "price_for", counted)
    usage = {"input_tokens": 1000, "output_tokens": 100}
    launches = [agent_call(f"job {i}", "Explore", description=f"job {i}") for i in range(3)]
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": launches, "usage": usage},
                    {"text": "done", "usage": usage},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "report", "usage": usage}]},
        ]
    }
    session = Session(
        SessionOptions(model=ScriptedModel.from_dict(script), cwd=tmp_path, home=tmp_path / "home")
    )
    result = await session.run("go")
    assert len(result.agents) == 4
    for run in result.agents:
        price = real(run.model)
        assert price is not FREE
        assert run.stats.cost_usd == pytest.approx(price.cost(Usage(**usage)) * run.stats.num_turns)
    # One look-up for the four agents' calls (the session's prices), one for the result's
    # ``modelUsage`` (each loop made one of its own before).
    assert asked.count("scripted") == 2
