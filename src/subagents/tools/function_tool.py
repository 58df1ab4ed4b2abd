"""``@tool``: a typed async function as a tool — its schema from its signature and docstring.

::

    @tool(read_only=True)
    async def word_count(text: str, min_length: int = 1) -> int:
        \"\"\"Count the words of a text.

        Args:
            text: The text to count.
            min_length: Shorter words are not counted.
        \"\"\"
        return sum(len(word) >= min_length for word in text.split())

    Session(SessionOptions(model=..., tools=[word_count, *core_tools()]))

The decorator returns a ``Tool`` (a ``FunctionTool`` of a class made for the function, so its
schema is built once and each call is validated like any tool's). What it takes from the function:

* name — the function's name (or ``name=``); description — the docstring up to its argument
  section (or ``description=``); a tool without one is refused, since the model needs it;
* the input model — one field per parameter, typed by its annotation (any type pydantic can
  validate: ``str``, ``int``, ``list[str]``, ``Literal[...]``, a model...), required unless it
  has a default, described by the docstring's ``Args:`` (Google), ``:param x:`` (Sphinx) or
  ``Parameters`` (NumPy) entry. A parameter annotated ``ToolContext`` receives the caller's
  context and one annotated ``CallInfo`` the call's info; neither is in the schema;
* the result — a ``ToolOutput`` as it is, a ``str`` as the content, anything else as JSON
  (pydantic models by ``model_dump_json``); raising ``ToolError`` makes an ``is_error`` result
  with its message, as for every tool;
* the scheduling flags — ``read_only`` (default False: plan mode and read-only agents refuse
  the tool) and ``concurrency_safe`` (default: ``read_only``; safe calls of one turn run side by
  side), plus ``max_result_chars`` and ``requires_permission``.

Mistakes are refused when the decorator runs, naming the function and parameter: a sync function,
``*args``/``**kwargs``, a parameter without annotation, a name the model API would refuse.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, overload

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticSchemaGenerationError,
    PydanticUserError,
    create_model,
)

from subagents.tools.base import CallInfo, Tool, ToolContext, ToolInput, ToolOutput

ToolFunction = Callable[..., Awaitable[object]]

NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What the model APIs accept as a tool name."""

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?):?\s*$"
)
_SPHINX = re.compile(r"^:param\s+(?:[^:\s]+\s+)?(\w+):\s*(.*)$")


class _FunctionInput(ToolInput):
    """The base of generated input models (``model_*`` parameter names allowed)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, protected_namespaces=())


class FunctionTool(Tool[BaseModel]):
    """A tool made by ``@tool`` from an async function (one subclass per function)."""

    read_only: ClassVar[bool] = False
    concurrency_safe: ClassVar[bool] = False
    _function: ClassVar[ToolFunction]
    _fields: ClassVar[tuple[tuple[str, str], ...]] = ()
    """(model field, parameter) pairs: a parameter shadowing a pydantic name gets an alias."""
    _context_params: ClassVar[tuple[str, ...]] = ()
    _info_params: ClassVar[tuple[str, ...]] = ()

    @property
    def function(self) -> ToolFunction:
        """The decorated function itself (to call it directly, e.g. in a unit test)."""
        return type(self)._function

    def is_read_only(self, args: BaseModel) -> bool:
        return self.read_only

    def is_concurrency_safe(self, args: BaseModel) -> bool:
        return self.concurrency_safe

    async def call(self, args: BaseModel, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        values = dict(args)
        kwargs: dict[str, object] = {param: values[field] for field, param in self._fields}
        kwargs.update(dict.fromkeys(self._context_params, ctx))
        kwargs.update(dict.fromkeys(self._info_params, info))
        return to_output(await type(self)._function(**kwargs))


@overload
def tool(function: ToolFunction, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool | None = None,
    max_result_chars: int | None = None,
    requires_permission: bool = True,
) -> Callable[[ToolFunction], FunctionTool]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool | None = None,
    max_result_chars: int | None = None,
    requires_permission: bool = True,
) -> FunctionTool | Callable[[ToolFunction], FunctionTool]:
    """Make a tool of a typed async function: ``@tool`` or ``@tool(read_only=True, ...)``."""

    def build(fn: ToolFunction) -> FunctionTool:
        return function_tool(
            fn,
            name=name,
            description=description,
            read_only=read_only,
            concurrency_safe=read_only if concurrency_safe is None else concurrency_safe,
            max_result_chars=max_result_chars,
            requires_permission=requires_permission,
        )

    return build if function is None else build(function)


def function_tool(
    fn: ToolFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool = False,
    max_result_chars: int | None = None,
    requires_permission: bool = True,
) -> FunctionTool:
    """``@tool`` without the decorator syntax (see the module docstring)."""
    where = f"@tool {getattr(fn, '__qualname__', fn)!r}"
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"{where}: the function must be async (async def)")
    tool_name = name or fn.__name__
    if not NAME_PATTERN.fullmatch(tool_name):
        raise ValueError(f"{where}: tool name {tool_name!r} must match {NAME_PATTERN.pattern}")
    summary, param_docs = parse_docstring(inspect.getdoc(fn) or "")
    text = description if description is not None else summary
    if not text.strip():
        raise ValueError(f"{where}: a tool needs a description: write a docstring or pass one")
    parts = _parameters(fn, where, param_docs)
    namespace: dict[str, Any] = {
        "name": tool_name,
        "description": text.strip(),
        "input_model": parts.model,
        "read_only": read_only,
        "concurrency_safe": concurrency_safe,
        "requires_permission": requires_permission,
        "_function": staticmethod(fn),
        "_fields": parts.fields,
        "_context_params": parts.context,
        "_info_params": parts.info,
        "__doc__": fn.__doc__,
        "__module__": fn.__module__,
    }
    if max_result_chars is not None:
        namespace["max_result_chars"] = max_result_chars
    cls = type(f"{_pascal(tool_name)}Tool", (FunctionTool,), namespace)
    instance: FunctionTool = cls()
    return instance


class _Parts(typing.NamedTuple):
    model: type[BaseModel]
    fields: tuple[tuple[str, str], ...]
    context: tuple[str, ...]
    info: tuple[str, ...]


def _parameters(fn: ToolFunction, where: str, docs: dict[str, str]) -> _Parts:
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError) as exc:
        raise TypeError(f"{where}: cannot resolve the annotations ({exc})") from exc
    fields: dict[str, Any] = {}
    pairs: list[tuple[str, str]] = []
    context: list[str] = []
    info: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{where}: *args and **kwargs cannot be tool inputs ({param.name})")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"{where}: parameter {param.name!r} is positional-only")
        if param.name not in hints:
            raise TypeError(f"{where}: parameter {param.name!r} needs a type annotation")
        annotation = hints[param.name]
        if _is(annotation, ToolContext):
            context.append(param.name)
            continue
        if _is(annotation, CallInfo):
            info.append(param.name)
            continue
        field = f"{param.name}_" if hasattr(BaseModel, param.name) else param.name
        default = ... if param.default is param.empty else param.default
        fields[field] = (
            annotation,
            Field(default, alias=param.name, description=docs.get(param.name)),
        )
        pairs.append((field, param.name))
    try:
        model = create_model(
            f"{_pascal(fn.__name__)}Input",
            __base__=_FunctionInput,
            __module__=fn.__module__,
            **fields,
        )
    except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
        raise TypeError(f"{where}: a parameter's type cannot be a tool input: {exc}") from exc
    return _Parts(model, tuple(pairs), tuple(context), tuple(info))


def _is(annotation: object, kind: type) -> bool:
    """``annotation`` is ``kind`` or ``kind | None``."""
    if annotation is kind:
        return True
    args = typing.get_args(annotation)
    return bool(args) and kind in args and all(a in (kind, type(None)) for a in args)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (up to the first section) and each parameter's text, from a Google,
    Sphinx or NumPy style docstring."""
    lines = doc.splitlines()
    index = 0
    while index < len(lines) and not _opens_section(lines[index]):
        index += 1
    summary = "\n".join(lines[:index]).strip()
    params: dict[str, str] = {}
    section, current, entry_indent = "", None, -1
    for line in lines[index:]:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if sphinx := _SPHINX.match(stripped):
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if stripped.startswith(":"):
            current = None  # another Sphinx field (:returns:, :raises:)
            continue
        header = _SECTION.match(stripped)
        if header and indent == 0:
            section, current, entry_indent = header.group(1).lower(), None, -1
            continue
        if not stripped or set(stripped) == {"-"}:
            continue  # a blank line, a NumPy underline
        if section not in _PARAM_SECTIONS:
            if current is not None and indent > 0:
                params[current] = f"{params[current]} {stripped}".strip()
            continue
        if entry_indent < 0:
            entry_indent = indent
        if indent == entry_indent:
            current, params_text = _entry(stripped, numpy=indent == 0)
            params[current] = params_text
        elif current is not None:
            params[current] = f"{params[current]} {stripped}".strip()
    return summary, params


_PARAM_SECTIONS = frozenset({"args", "arguments", "parameters", "params"})


def _opens_section(line: str) -> bool:
    stripped = line.strip()
    return bool(_SECTION.match(stripped) or _SPHINX.match(stripped))


def _entry(stripped: str, *, numpy: bool) -> tuple[str, str]:
    """``name (type): text`` (Google) or ``name : type`` (NumPy: the text follows)."""
    name, _, rest = stripped.partition(":")
    name = name.split("(")[0].strip().lstrip("*")
    return name, "" if numpy else rest.strip()


def to_output(result: object) -> ToolOutput:
    """A tool function's return value as a tool result."""
    if isinstance(result, ToolOutput):
        return result
    if isinstance(result, str):
        return ToolOutput(content=result)
    if isinstance(result, BaseModel):
        return ToolOutput(content=result.model_dump_json())
    return ToolOutput(content=json.dumps(result, ensure_ascii=False, default=str))


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_\-]+", name) if part)
