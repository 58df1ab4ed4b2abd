"""Reading configuration files (agent definitions, settings) without trusting them.

A `.claude/agents` folder or a settings path is written by whoever made the checkout: it may
hold a FIFO, a symlink loop, `/dev/zero`, a 2 GB file, 500-deep YAML or a billion-laughs alias
bomb. None of them may hang, crash or exhaust the process; each becomes one ``ConfigFileError``
naming the file, and the caller decides whether that costs the file (a definition) or the run
(a settings file, which may hold deny rules).

* ``read_config_text`` opens with ``O_NONBLOCK`` (a FIFO's open returns at once instead of
  waiting for a writer), checks with ``fstat`` *on the open descriptor* that it is a regular file
  (no check-then-open race), refuses one larger than ``max_bytes`` and never reads more than that.
* ``load_yaml`` reads YAML with the YAML 1.2 core schema Claude Code's parser uses (``yes``,
  ``on``, ``2024-01-01`` and ``1:30`` stay strings; only ``true``/``false`` are booleans), nesting
  bounded to ``MAX_DEPTH`` while composing (before any recursion can overflow) and aliases
  bounded by the size the document would have when expanded (``MAX_EXPANDED_NODES``), so an
  alias bomb is refused before anything walks it.
* ``load_json`` bounds nesting the same way.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Final

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_CONFIG_BYTES: Final = 1 << 20
"""Largest definition or settings file read (1 MiB; real ones are a few KB)."""

MAX_DEPTH: Final = 64
"""Deepest nesting of YAML/JSON collections accepted in a configuration file."""

MAX_EXPANDED_NODES: Final = 100_000
"""Largest number of YAML nodes a document may have once its aliases are expanded."""

_SPECIAL_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class ConfigFileError(ValueError):
    """A configuration file that cannot be used; the message names the file and why."""


class SpecialFileError(ConfigFileError):
    """The path is not a regular file (FIFO, device, socket, directory)."""


class ConfigSyntaxError(ConfigFileError):
    """The text is not valid YAML/JSON, or is nested or aliased beyond the bounds."""

    def __init__(self, message: str, *, line: int | None = None, bound: bool = False) -> None:
        super().__init__(message)
        self.line = line
        """1-based line of the problem inside the parsed text, when known."""
        self.bound = bound
        """True when the text broke a bound (depth, alias expansion) rather than the syntax."""


def read_config_text(path: Path, *, max_bytes: int = MAX_CONFIG_BYTES) -> str | None:
    """The UTF-8 text of ``path``; ``None`` when it does not exist. Every other problem raises
    ``ConfigFileError`` (``SpecialFileError`` for a FIFO, device, socket or directory)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise SpecialFileError(f"{path}: is a directory, not a regular file") from None
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot open: {_reason(exc)}") from None
    try:
        info = os.fstat(fd)
        _check_regular(path, info.st_mode)
        if info.st_size > max_bytes:
            raise ConfigFileError(
                f"{path}: file is {info.st_size:,} bytes, larger than the {max_bytes:,}-byte limit"
            )
        data = _read_bounded(fd, max_bytes)
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot read: {_reason(exc)}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew after the stat, or a /proc file reporting size 0
        raise ConfigFileError(f"{path}: file is larger than the {max_bytes:,}-byte limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


def _check_regular(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _SPECIAL_KINDS if test(mode)), "not a regular file")
    raise SpecialFileError(f"{path}: is {kind}, not a regular file")


def _read_bounded(fd: int, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    remaining = max_bytes + 1
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


# -- YAML -----------------------------------------------------------------------------------


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


# -- JSON -----------------------------------------------------------------------------------


def load_json(text: str) -> Any:
    """``json.loads`` with nesting bounded to ``MAX_DEPTH``; ``json.JSONDecodeError`` for invalid
    JSON, ``ConfigSyntaxError`` for excessive nesting."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ConfigSyntaxError(f"nested deeper than {MAX_DEPTH} levels", bound=True) from None
    if _json_depth(data) > MAX_DEPTH:
        raise ConfigSyntaxError(f"nested deeper than {MAX_DEPTH} levels", bound=True)
    return data


def _json_depth(value: Any) -> int:
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        depth += 1
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            return depth
        stack.extend((child, depth) for child in item)
    return deepest
