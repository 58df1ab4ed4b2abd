"""The YAML half of ``config_files``: the bounded YAML 1.2 core-schema loader.

Its own module because PyYAML costs ~10 ms of start-up (its reader compiles a large Unicode
class, its resolver a dozen patterns) and most runs read no YAML at all: ``config_files.load_yaml``
imports this module on its first call (a definition's frontmatter, a ``.yaml`` script).
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from subagents.config_files import MAX_DEPTH, MAX_EXPANDED_NODES, ConfigSyntaxError


class _CoreSchema(yaml.constructor.SafeConstructor, yaml.resolver.BaseResolver):
    """SafeConstructor with the YAML 1.2 core-schema resolvers registered below."""


class _PythonLoader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _CoreSchema,
):
    """The pure-Python loader, used when PyYAML was built without libyaml."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _CoreSchema.__init__(self)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        """This composer recurses once per nesting level: the bound must hold here, while
        composing, before Python's own recursion limit is anywhere near."""
        if not self.check_event(yaml.MappingStartEvent, yaml.SequenceStartEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                message = f"nested deeper than {MAX_DEPTH} levels"
                raise ConfigSyntaxError(message, line=self.get_mark().line + 1, bound=True)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_CParser: Any
try:
    from yaml._yaml import CParser as _CParser  # PyYAML built with libyaml (every wheel)
except ImportError:  # pragma: no cover - a source build without libyaml
    _CParser = None

if _CParser is not None:

    class _LibyamlLoader(_CParser, _CoreSchema):  # type: ignore[misc]  # CParser is untyped
        """libyaml's parser and composer (7x faster; it stops nesting at 1,000 levels itself),
        with our schema; the bounds are checked on the composed graph."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            _CoreSchema.__init__(self)


def _add_resolver(tag: str, pattern: str, first: str) -> None:
    _CoreSchema.add_implicit_resolver(tag, re.compile(pattern, re.X), list(first))


# The YAML 1.2 core schema (what the `yaml` npm package and Bun.YAML resolve), not PyYAML's 1.1.
_add_resolver("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF")
_add_resolver("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789")
_add_resolver(
    "tag:yaml.org,2002:float",
    r"""^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$""",
    "-+0123456789.",
)
_CoreSchema.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)


def _int_core(loader: _CoreSchema, node: Node) -> int:
    text = str(node.value)
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text)


# Assigned rather than add_constructor'ed: the stubs only admit PyYAML's own loader classes there.
_CoreSchema.yaml_constructors = {
    **yaml.constructor.SafeConstructor.yaml_constructors,
    "tag:yaml.org,2002:int": _int_core,
}


def load_yaml(text: str) -> Any:
    """Parse ``text`` with the bounds of this module; ``ConfigSyntaxError`` (with a 1-based line
    when known) for invalid YAML, excessive nesting or an alias bomb."""
    try:
        loader = _LibyamlLoader(text) if _CParser is not None else _PythonLoader(text)
    except yaml.YAMLError as exc:  # the reader refuses NUL and other control characters
        raise ConfigSyntaxError(str(exc).splitlines()[0]) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_graph(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        bound = "nesting depth" in problem
        line = mark.line + 1 if mark else None
        raise ConfigSyntaxError(problem, line=line, bound=bound) from None
    except yaml.YAMLError as exc:
        raise ConfigSyntaxError(str(exc).splitlines()[0]) from None
    except ConfigSyntaxError:
        raise
    except (
        RecursionError,
        ValueError,
        TypeError,
        AttributeError,
        LookupError,
        OverflowError,
    ) as exc:
        # PyYAML's constructors assume well-formed values: `!!timestamp soon` fails inside one.
        problem = f"a value cannot be read ({type(exc).__name__}: {_first_line(exc)})"
        raise ConfigSyntaxError(problem, bound=True) from None
    finally:
        loader.dispose()


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return lines[0][:200] if lines else ""


def _check_graph(root: Node) -> None:
    """Refuse a document nested deeper than ``MAX_DEPTH``, holding an alias to a value that
    contains it (a cycle), or whose aliases would expand past ``MAX_EXPANDED_NODES`` nodes.

    One depth-first pass over the composed graph with one memo per node, so a bomb that would
    expand to billions of nodes is measured in time linear in its *written* size."""
    done: dict[int, tuple[int, int, int]] = {}  # id -> (expanded size, depth, deepest line)
    open_nodes: set[int] = set()
    stack: list[tuple[Node, list[Node]]] = [(root, _children(root))]
    open_nodes.add(id(root))
    while stack:
        node, pending = stack[-1]
        if pending:
            child = pending.pop()
            if id(child) in open_nodes:
                line = child.start_mark.line + 1
                message = "an alias refers to a value that contains it (a cycle)"
                raise ConfigSyntaxError(message, line=line, bound=True)
            if id(child) not in done:
                open_nodes.add(id(child))
                stack.append((child, _children(child)))
            continue
        stack.pop()
        open_nodes.discard(id(node))
        done[id(node)] = _measure(node, done)


def _measure(node: Node, done: dict[int, tuple[int, int, int]]) -> tuple[int, int, int]:
    line = node.start_mark.line + 1
    parts = [done[id(child)] for child in _children(node)]
    size = 1 + sum(part[0] for part in parts)
    nested, deepest = max(((part[1], part[2]) for part in parts), default=(0, line))
    depth = nested + 1 if isinstance(node, SequenceNode | MappingNode) else 0
    if depth > MAX_DEPTH:
        raise ConfigSyntaxError(f"nested deeper than {MAX_DEPTH} levels", line=deepest, bound=True)
    if size > MAX_EXPANDED_NODES:
        raise ConfigSyntaxError(
            f"aliases expand to more than {MAX_EXPANDED_NODES:,} values (an alias bomb?)",
            line=line,
            bound=True,
        )
    return size, depth, deepest


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []
