"""``new_frozen``: a frozen dataclass instance built without its generated ``__init__``.

A frozen dataclass's ``__init__`` sets every field through ``object.__setattr__`` (its own
``__setattr__`` refuses), a method look-up and a call per field: on Python 3.11 about 1.7 k
instructions a field, 44 k for a 26-field sidecar record, against ~10 k for filling the
instance's dict at once. Every child of a swarm builds two such values with many fields (its
running record, its notification), so those two use this instead. For a class of a few fields
it gains nothing (the checks here cost what the ``__setattr__`` calls do) unless every field is
given: then the dict given becomes the instance's own (a terminal write's result and stats).

The instance is the same value ``cls(**values)`` makes — same fields, same defaults, equal and
hashed alike — with two differences that do not matter for the values it is used for: there is no
``__post_init__`` call (a class with one is refused) and the field values are not type-checked
by mypy at the call site (a test per call site compares the result with ``cls(**values)``).
A misspelt or missing field still fails: it is handed to ``__init__``, which raises as usual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class _Shape:
    """A frozen dataclass's fields as ``new_frozen`` needs them: defaults, factories, names."""

    defaults: dict[str, Any]
    factories: dict[str, Callable[[], Any]]
    names: frozenset[str]
    required: frozenset[str]


_SHAPES: dict[type, _Shape] = {}


def new_frozen(cls: type[T], values: dict[str, Any]) -> T:
    """``cls(**values)`` for a frozen dataclass ``cls`` (see the module docstring). When
    ``values`` names every field it *becomes* the instance's dict (pass a dict of your own, a
    literal, and do not change it afterwards); otherwise the defaults are copied and
    ``values`` laid over them. Either way a few thousand instructions whatever the number of
    fields, which pays off from three fields on (all given) or about ten (defaults filled)."""
    shape = _SHAPES.get(cls)
    if shape is None:
        shape = _SHAPES[cls] = _shape_of(cls)
    if values.keys() == shape.names:  # every field given: ``values`` becomes the instance's dict
        fields = values
    else:
        fields = shape.defaults.copy()
        fields.update(values)
        for name, factory in shape.factories.items():
            if name not in values:
                fields[name] = factory()
        if fields.keys() != shape.names:
            return cls(**values)  # a wrong or missing field: ``__init__`` says which
    made: T = object.__new__(cls)
    object.__setattr__(made, "__dict__", fields)  # (at once: cheaper than updating its own)
    return made


def _shape_of(cls: type) -> _Shape:
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or hasattr(cls, "__post_init__"):
        raise TypeError(
            f"new_frozen: {cls.__name__} is not a frozen dataclass without __post_init__"
        )
    fields = [f for f in dataclasses.fields(cls) if f.init]
    if len(fields) != len(dataclasses.fields(cls)) or hasattr(cls, "__slots__"):
        raise TypeError(f"new_frozen: {cls.__name__} has init=False fields or slots")
    missing = dataclasses.MISSING
    return _Shape(
        defaults={f.name: f.default for f in fields if f.default is not missing},
        factories={f.name: f.default_factory for f in fields if f.default_factory is not missing},
        names=frozenset(f.name for f in fields),
        required=frozenset(
            f.name for f in fields if f.default is missing and f.default_factory is missing
        ),
    )
