"""A provider's wire form of a request's tool list, made once per list.

An agent sends the same tool list on every model call (its loop's ``schemas``, shared by every
child of a definition). Turning 13 schemas into the provider's dicts and then ~17 KB of JSON
on every request cost ~10-16 µs of a call. ``WireTools`` keeps the converted list per tool
list, checked by the identity of every element (a list changed in place is converted again),
and its JSON once as an ``orjson.Fragment`` for the lean transport, which splices those bytes
where ``orjson.dumps`` would have written the same ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

ToolDicts = list[dict[str, Any]]

_MAX_LISTS = 256


class _Made:
    __slots__ = ("dicts", "fragment", "items")

    def __init__(self, items: tuple[Any, ...], dicts: ToolDicts) -> None:
        self.items = items
        self.dicts = dicts
        self.fragment: orjson.Fragment | None = None


class WireTools:
    """``dicts(tools)``: the converted list (the same object while ``tools`` holds the same
    schemas; callers must not change it); ``fragment(dicts)``: its JSON, encoded once."""

    def __init__(self, convert: Callable[[Sequence[Any]], ToolDicts]) -> None:
        self._convert = convert
        self._by_tools: dict[int, tuple[Sequence[Any], _Made]] = {}
        self._by_dicts: dict[int, _Made] = {}

    def dicts(self, tools: Sequence[Any]) -> ToolDicts:
        found = self._by_tools.get(id(tools))
        items = tuple(tools)
        if found is not None and found[0] is tools and found[1].items == items:
            return found[1].dicts  # == on tuples compares elements by identity first
        made = _Made(items, self._convert(tools))
        if len(self._by_tools) >= _MAX_LISTS:
            self._by_tools.clear()  # agents come and go: start again
            self._by_dicts.clear()
        self._by_tools[id(tools)] = (tools, made)  # holds ``tools``: its id is not reused
        self._by_dicts[id(made.dicts)] = made
        return made.dicts

    def fragment(self, dicts: ToolDicts) -> orjson.Fragment | ToolDicts:
        """The JSON of a list ``dicts`` returned; any other list is given back as it is."""
        made = self._by_dicts.get(id(dicts))
        if made is None or made.dicts is not dicts:
            return dicts
        if made.fragment is None:
            made.fragment = orjson.Fragment(orjson.dumps(dicts))
        return made.fragment
