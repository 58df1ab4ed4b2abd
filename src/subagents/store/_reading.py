"""Typed reading of one JSON object, with errors that name the source file and the field.

Durable records are read from files other versions (or other people) wrote; a wrong type must
say *where* (``agents/a1.json: sidecar.stats.numTurns: expected an integer >= 0, got 'four'``)
rather than fail later as an ``AttributeError`` deep in the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from subagents.store.errors import InvalidRecordError

REQUIRED: Any = object()


@dataclass(kw_only=True, frozen=True)
class Reader:
    """Typed access to one JSON object; every error names the source file and the field."""

    data: Mapping[str, Any]
    source: str
    where: str

    def _fail(self, key: str, expected: str, value: Any) -> InvalidRecordError:
        shown = repr(value)[:60]
        return InvalidRecordError(
            f"{self.source}: {self.where}.{key}: expected {expected}, got {shown}"
        )

    def get(self, key: str, check: Callable[[Any], bool], expected: str, default: Any) -> Any:
        if key not in self.data:
            if default is REQUIRED:
                raise InvalidRecordError(f"{self.source}: {self.where}.{key}: missing")
            return default
        value = self.data[key]
        if not check(value):
            raise self._fail(key, expected, value)
        return value

    def str_(self, key: str, default: Any = REQUIRED) -> str:
        return cast(str, self.get(key, is_str, "a string", default))

    def opt_str(self, key: str) -> str | None:
        return cast("str | None", self.get(key, optional(is_str), "a string or null", None))

    def int_(self, key: str, default: Any = REQUIRED) -> int:
        return cast(int, self.get(key, is_int, "an integer >= 0", default))

    def opt_int(self, key: str) -> int | None:
        return cast("int | None", self.get(key, optional(is_int), "an integer or null", None))

    def float_(self, key: str, default: Any = REQUIRED) -> float:
        return float(self.get(key, is_number, "a number", default))

    def opt_float(self, key: str) -> float | None:
        value = self.get(key, optional(is_number), "a number or null", None)
        return None if value is None else float(value)

    def bool_(self, key: str, default: Any = REQUIRED) -> bool:
        return cast(bool, self.get(key, is_bool, "true or false", default))

    def choice(self, key: str, allowed: tuple[Any, ...], default: Any = REQUIRED) -> Any:
        return self.get(key, lambda v: v in allowed, f"one of {list(allowed)}", default)

    def obj(self, key: str) -> Reader:
        value = self.get(key, is_obj, "an object", REQUIRED)
        return Reader(data=value, source=self.source, where=f"{self.where}.{key}")

    def opt_obj(self, key: str) -> Reader | None:
        value = self.get(key, optional(is_obj), "an object or null", None)
        return None if value is None else self.obj(key)

    def child(self, key: str) -> Reader:
        """A nested object that may be missing: read as empty so its fields take defaults."""
        value = self.get(key, is_obj, "an object", {})
        return Reader(data=value, source=self.source, where=f"{self.where}.{key}")


def is_str(value: Any) -> bool:
    return isinstance(value, str)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def is_obj(value: Any) -> bool:
    return isinstance(value, dict)


def optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def is_str_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)
