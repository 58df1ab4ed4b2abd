"""A loop's tool tables (``query._tool_tables``: the tools by name and alias, the durable
names) made once per tool list and shared by the loops of that list: always what
``tool_lookup`` and the durable-name set of the list as it is now would be, the same objects
for an unchanged list, new ones for a list changed in place, and never another list's tools
(even tools that compare equal)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from subagents.loop import query
from subagents.loop.query import _tool_tables, tool_lookup
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolOutput


class _In(BaseModel):
    pass


@dataclass(eq=True)
class ValueTool(Tool[_In]):
    """A program's tool that compares by value: two instances of one name are ``==``."""

    name: str
    durable: bool = False
    description = "a tool"
    input_model = _In

    @property
    def durable_call_identity(self) -> bool:  # type: ignore[override]
        return self.durable

    async def call(self, args: _In, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        return ToolOutput(content=self.name)


class Aliased(ValueTool):
    aliases = ("Alias", "Other")


def _plain(tools: list[Tool[Any]]) -> tuple[dict[str, Tool[Any]], frozenset[str]]:
    lookup = dict(tool_lookup(tools))
    return lookup, frozenset(n for n, t in lookup.items() if t.durable_call_identity)


def _same(tables: Any, tools: list[Tool[Any]]) -> None:
    lookup, durable = _plain(tools)
    assert dict(tables[0]) == lookup and tables[1] == durable
    for name, tool in lookup.items():
        assert tables[0][name] is tool, name  # this list's own instances


def _tool(rng: random.Random) -> Tool[Any]:
    kind = Aliased if rng.random() < 0.3 else ValueTool
    return kind(name=rng.choice(["A", "B", "C", "Alias"]), durable=rng.random() < 0.3)


@pytest.mark.parametrize("seed", range(30))
def test_the_tables_are_the_lists_as_it_is_now(seed: int) -> None:
    rng = random.Random(seed)
    lists = [[_tool(rng) for _ in range(rng.randint(0, 6))] for _ in range(3)]
    lists.append([ValueTool(name=t.name, durable=t.durable) for t in lists[0]])  # equal values
    for _ in range(40):
        tools = rng.choice(lists)
        before = _tool_tables(tools)
        _same(before, tools)
        again = _tool_tables(tools)
        assert again is before  # unchanged: shared
        change = rng.random()
        if change < 0.2 and tools:
            tools[rng.randrange(len(tools))] = _tool(rng)
        elif change < 0.35:
            tools.append(_tool(rng))
        elif change < 0.45 and tools:
            tools.pop()
        else:
            continue
        _same(_tool_tables(tools), tools)


def test_equal_lists_of_other_tools_get_their_own_tables() -> None:
    first: list[Tool[Any]] = [ValueTool(name="A", durable=True), Aliased(name="B")]
    second: list[Tool[Any]] = [ValueTool(name="A", durable=True), Aliased(name="B")]
    assert first == second
    one, two = _tool_tables(first), _tool_tables(second)
    assert one[0]["A"] is first[0] and two[0]["A"] is second[0]
    assert two[0]["Alias"] is second[1]


def test_the_kept_tables_are_bounded() -> None:
    lists = [[ValueTool(name=str(i))] for i in range(query._TABLES_KEPT * 2 + 3)]
    for tools in lists:
        _same(_tool_tables(tools), tools)
        assert len(query._tables) <= query._TABLES_KEPT
