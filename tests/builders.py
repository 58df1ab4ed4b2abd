"""``check_builder``: a builder function builds what its dataclass's keyword call builds.

The per-child path builds its runtime objects (``AgentRun``, ``LoopStats``, ...) by functions
that set every field directly instead of calling the class with keywords (docs/performance.md,
session 15). Such a function names the fields it takes as keyword-only parameters and sets the
rest to the class's defaults. ``check_builder`` holds it to the class, trial by trial on random
input: every parameter is a field of the class (no other kind of parameter), a default it has is
the field's default; each given value — a distinct object per field, so two fields swapped show
— is that field's value in both builds; each field not given is equal to the class's default in
both (a fresh object per build where the class's is a factory's) or, for a field ``__init__``
does not take, the value ``__post_init__`` derives; every field is set, in the class's order
(``vars`` of both builds alike: they share one key table), and nothing else is.
"""

from __future__ import annotations

import dataclasses
import inspect
import random
import time
from collections.abc import Callable, Collection
from typing import Any


class Given:
    """A value no default equals: ``Given("prompt")`` is only ever the ``prompt`` field's."""

    def __init__(self, name: str, trial: int) -> None:
        self.name, self.trial = name, trial

    def __repr__(self) -> str:
        return f"Given({self.name!r}, {self.trial})"


def _state(made: object, names: list[str]) -> dict[str, Any]:
    if hasattr(made, "__dict__"):
        return dict(vars(made))
    return {name: getattr(made, name) for name in names}


def check_builder(
    builder: Callable[..., Any],
    cls: type,
    *,
    trials: int = 40,
    seed: int = 15,
    clocks: Collection[str] = (),
    values: Callable[[str, int], Any] | None = None,
) -> None:
    """Fail unless ``builder(**given)`` equals ``cls(**given)`` field by field (see the module
    docstring). ``clocks``: fields whose default is a clock reading (``time.monotonic``), checked
    to lie within the build's time in both; ``values``: a field's value for a trial when a
    ``Given`` would not do (None: a ``Given`` for every field; a field a ``__post_init__``
    reads from needs one with what it reads)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    names = list(fields)
    parameters = inspect.signature(builder).parameters
    for name, parameter in parameters.items():
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, f"{name}: keyword-only"
        assert name in fields, f"{name} is not a field of {cls.__name__}"
        if parameter.default is not inspect.Parameter.empty:
            assert fields[name].default is not dataclasses.MISSING, f"{name}: a factory's field"
            default = fields[name].default
            # The same object (a shared value: ``IN_PARENTS_FOLDER``), or an equal constant.
            assert parameter.default is default or (
                _immutable(default)
                and type(parameter.default) is type(default)
                and parameter.default == default
            ), f"{name}: another default"
    for name, spec in fields.items():
        has_default = (
            spec.default is not dataclasses.MISSING
            or spec.default_factory is not dataclasses.MISSING
        )
        # (a field ``__init__`` does not take is derived in ``__post_init__``: compared below)
        assert name in parameters or has_default or not spec.init, f"{name}: required"
    rng = random.Random(seed)
    optional = [n for n, p in parameters.items() if p.default is not inspect.Parameter.empty]
    for trial in range(trials):
        chosen = [n for n in optional if rng.random() < 0.5] if trial else []
        if trial == 1:
            chosen = optional
        given = {
            name: (values(name, trial) if values is not None else Given(name, trial))
            for name in parameters
            if name not in optional or name in chosen
        }
        before = time.monotonic()
        built, called = builder(**given), cls(**given)
        after = time.monotonic()
        assert type(built) is cls
        state, expected = _state(built, names), _state(called, names)
        # The same fields set, in the same order (an ``init=False`` field with a default may be
        # left to the class attribute by both).
        assert list(state) == list(expected), (
            f"{cls.__name__}: fields set {list(state)}, the class sets {list(expected)}"
        )
        assert [n for n in names if n in expected] == list(expected)
        assert all(n in expected for n in names if fields[n].init)
        for name in names:
            mine, theirs = getattr(built, name), getattr(called, name)
            if name in given:
                assert mine is given[name] and theirs is given[name], f"{name}: {mine!r}"
            elif name in clocks:
                assert before <= mine <= after and before <= theirs <= after, name
            else:
                assert type(mine) is type(theirs) and mine == theirs, f"{name}: {mine!r}"
                if fields[name].default is not dataclasses.MISSING and not _immutable(mine):
                    assert mine is theirs, f"{name}: not the class's shared default"
                if fields[name].default_factory is not dataclasses.MISSING:
                    again = builder(**given)
                    assert getattr(again, name) is not mine or _immutable(mine), (
                        f"{name}: one factory value shared by two builds"
                    )


def _immutable(value: object) -> bool:
    return isinstance(value, int | float | str | bytes | tuple | frozenset | type(None))
