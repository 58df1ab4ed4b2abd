"""``dataclasses``' ``__init__`` texts remembered by the fields' shape, in the codegen cache;
and its ``_get_field`` in one pass.

Why: for each dataclass, Python 3.11's ``_init_fn`` assembles the source of ``__init__`` line by
line (a line and a parameter per field, through ``_field_init``, ``_init_param``,
``_field_assign``) before ``exec`` finds its compiled code in the cache: ~0.1 M instructions a
class, ~21 M of a ``-p`` start-up. The text is a pure function of the fields' shape: each field's
name, whether it is in ``__init__``, whether it has a default or a default factory, whether it is
an ``InitVar``; which fields are keyword-only; ``frozen``, ``__post_init__``, the name of
``self``, ``slots``. The cache keeps ``("init", shape) -> text``; a class of a known shape gets
the text from there and only the values its ``__create_fn__`` takes are gathered (each field's
type, default or factory, as ``_init_fn`` puts them), so ``__init__`` is made by the same code
from the same values. A shape not seen yet goes through ``dataclasses``' own ``_init_fn``, whose
text is noted as it reaches ``exec``.

``get_field`` is ``_get_field`` (~21 K instructions a field, ~24 M of a start-up) with each
annotation text matched once instead of twice and ``Field`` made directly: the same look-ups in
the same order, the same checks and errors.

Only on CPython 3.11 (whose ``_init_fn`` and ``_get_field`` this follows);
``cli/codegen_cache.install`` decides.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

Shape = tuple[object, ...]
"""``("init", fields, std names, keyword-only names, frozen, post-init, self name, slots)``."""

_INIT_ARGS = ("fields", "std_fields", "kw_only_fields", "frozen", "has_post_init", "self_name")
_MISSING = dataclasses.MISSING
_FACTORY: Any = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", None)
_INITVAR: Any = getattr(dataclasses, "_FIELD_INITVAR", None)


def applies() -> bool:
    """Whether this Python's ``_init_fn`` is the one this module follows."""
    init_fn = getattr(dataclasses, "_init_fn", None)
    code = getattr(init_fn, "__code__", None)
    return (
        sys.version_info[:2] == (3, 11)
        and code is not None
        and code.co_varnames[: len(_INIT_ARGS) + 2] == (*_INIT_ARGS, "globals", "slots")
        and _FACTORY is not None
        and _INITVAR is not None
        and _fields_of(getattr(dataclasses, "_get_field", None))
        == ("cls", "a_name", "a_type", "default_kw_only")
        and None not in (_FIELD, _CLASSVAR, _IS_CLASSVAR, _IS_INITVAR)
    )


def _fields_of(function: object) -> tuple[str, ...]:
    code = getattr(function, "__code__", None)
    return tuple(code.co_varnames[: code.co_argcount]) if code is not None else ()


class InitTexts:
    """``dataclasses._init_fn`` with its texts from ``texts`` (the codegen cache's entries)."""

    def __init__(
        self,
        texts: Callable[[Shape], str | None],
        remember: Callable[[Shape, str], None],
        exec_text: Callable[[str, dict[str, Any], dict[str, Any]], None],
    ) -> None:
        self.texts = texts
        self.remember = remember
        self.exec_text = exec_text
        self.original: Callable[..., Any] = dataclasses._init_fn  # type: ignore[attr-defined]
        self.noting: dict[int, list[str]] = {}
        """Per thread making an unknown shape's ``__init__``: the texts ``exec`` was given."""

    def note(self, source: str) -> None:
        """Called by the cache's ``exec`` for each text (cheap when nothing is being noted)."""
        if self.noting:
            noted = self.noting.get(threading.get_ident())
            if noted is not None:
                noted.append(source)

    def init_fn(
        self,
        fields: list[Any],
        std_fields: tuple[Any, ...],
        kw_only_fields: tuple[Any, ...],
        frozen: bool,
        has_post_init: bool,
        self_name: str,
        globals: dict[str, Any],
        slots: bool,
    ) -> Any:
        shape = _shape(fields, std_fields, kw_only_fields, frozen, has_post_init, self_name, slots)
        text = self.texts(shape)
        if text is None:
            return self._first(shape, fields, std_fields, kw_only_fields, frozen, has_post_init,
                               self_name, globals, slots)  # fmt: skip
        namespace: dict[str, Any] = {}
        self.exec_text(text, globals, namespace)
        return namespace["__create_fn__"](**_values(fields, slots))

    def _first(self, shape: Shape, *args: Any) -> Any:
        ident = threading.get_ident()
        noted = self.noting[ident] = []
        try:
            made = self.original(*args)
        finally:
            del self.noting[ident]
        texts = [text for text in noted if text.startswith("def __create_fn__(")]
        if len(texts) == 1 and "\n def __init__(" in texts[0]:
            self.remember(shape, texts[0])
        return made


def _shape(
    fields: list[Any],
    std_fields: tuple[Any, ...],
    kw_only_fields: tuple[Any, ...],
    frozen: bool,
    has_post_init: bool,
    self_name: str,
    slots: bool,
) -> Shape:
    each = tuple(
        (
            f.name,
            bool(f.init),
            f.default is _MISSING,
            f.default_factory is _MISSING,
            f._field_type is _INITVAR,
        )
        for f in fields
    )
    std = tuple(f.name for f in std_fields)
    kw_only = tuple(f.name for f in kw_only_fields)
    return ("init", each, std, kw_only, bool(frozen), bool(has_post_init), self_name, bool(slots))


def _values(fields: list[Any], slots: bool) -> dict[str, Any]:
    """What ``_init_fn`` passes to ``__create_fn__``: each field's type, ``MISSING``, the
    factory marker, ``object``, then each default or factory ``_field_init`` adds, and the
    return annotation."""
    values: dict[str, Any] = {f"_type_{f.name}": f.type for f in fields}
    values["MISSING"] = _MISSING
    values["_HAS_DEFAULT_FACTORY"] = _FACTORY
    values["__dataclass_builtins_object__"] = object
    for f in fields:
        if f.default_factory is not _MISSING:
            values[f"_dflt_{f.name}"] = f.default_factory
        elif f.default is not _MISSING and (f.init or slots):
            values[f"_dflt_{f.name}"] = f.default
    values["_return_type"] = None
    return values


_Field: Any = dataclasses.Field
_FIELD: Any = getattr(dataclasses, "_FIELD", None)
_CLASSVAR: Any = getattr(dataclasses, "_FIELD_CLASSVAR", None)
_MEMBER_TYPE = types.MemberDescriptorType
_MODULES = sys.modules
_IS_CLASSVAR: Any = getattr(dataclasses, "_is_classvar", None)
_IS_INITVAR: Any = getattr(dataclasses, "_is_initvar", None)


def get_field(cls: type, a_name: str, a_type: Any, default_kw_only: bool) -> Any:
    """``dataclasses._get_field`` of CPython 3.11 in one pass: the field's default, its kind
    (``ClassVar``, ``InitVar`` or a field: the same look-ups in the same order, a string
    annotation matched once) and the same checks, with the same errors."""
    default = getattr(cls, a_name, _MISSING)
    if isinstance(default, _Field):
        f = default
    else:
        if isinstance(default, _MEMBER_TYPE):  # a field in __slots__: no default
            default = _MISSING
        f = _Field(default, _MISSING, True, True, None, True, None, _MISSING)
    f.name = a_name
    f.type = a_type
    f._field_type = kind = _kind(cls, a_type)
    if kind is not _FIELD and f.default_factory is not _MISSING:
        raise TypeError(f"field {f.name} cannot have a default factory")
    if kind is _FIELD or kind is _INITVAR:
        if f.kw_only is _MISSING:
            f.kw_only = default_kw_only
    elif f.kw_only is not _MISSING:
        raise TypeError(f"field {f.name} is a ClassVar but specifies kw_only")
    if kind is _FIELD and f.default.__class__.__hash__ is None:
        raise ValueError(
            f"mutable default {type(f.default)} for field "
            f"{f.name} is not allowed: use default_factory"
        )
    return f


def _kind(cls: type, a_type: Any) -> Any:
    """``_FIELD_CLASSVAR``, ``_FIELD_INITVAR`` or ``_FIELD``, as ``_get_field`` decides it."""
    typing = _MODULES.get("typing")
    match = None
    if isinstance(a_type, str):  # install() may have replaced the pattern: read it now
        match = dataclasses._MODULE_IDENTIFIER_RE.match(a_type)  # type: ignore[attr-defined]
    if typing:
        if _IS_CLASSVAR(a_type, typing):
            return _CLASSVAR
        if match and _names(match, cls, typing, typing.ClassVar, _IS_CLASSVAR):
            return _CLASSVAR
    if _IS_INITVAR(a_type, dataclasses):
        return _INITVAR
    if match and _names(match, cls, dataclasses, dataclasses.InitVar, _IS_INITVAR):
        return _INITVAR
    return _FIELD


def _names(match: Any, cls: type, a_module: Any, a_type: Any, predicate: Any) -> bool:
    """``dataclasses._is_type`` after its match: does the annotation name ``a_type``?"""
    ns = None
    module_name = match.group(1)
    if not module_name:
        ns = _MODULES.get(cls.__module__).__dict__
    else:
        module = _MODULES.get(cls.__module__)
        if module and module.__dict__.get(module_name) is a_module:
            ns = _MODULES.get(a_type.__module__).__dict__
    return bool(ns and predicate(ns.get(match.group(2)), a_module))
