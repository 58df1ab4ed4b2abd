"""Reading configuration files (agent definitions, settings) without trusting them.

A `.claude/agents` folder or a settings path is written by whoever made the checkout: it may
hold a FIFO, a symlink loop, `/dev/zero`, a 2 GB file, 500-deep YAML or a billion-laughs alias
bomb. None of them may hang, crash or exhaust the process; each becomes one ``ConfigFileError``
naming the file, and the caller decides whether that costs the file (a definition) or the run
(a settings file, which may hold deny rules).

* ``read_config_text`` opens with ``O_NONBLOCK`` (a FIFO's open returns at once instead of
  waiting for a writer), checks with ``fstat`` *on the open descriptor* that it is a regular file
  (no check-then-open race), refuses one larger than ``max_bytes`` and never reads more than that.
* ``config_yaml.load_yaml`` (its own module: PyYAML is ~10 ms of start-up and most runs read no
  YAML) reads YAML with the YAML 1.2 core schema Claude Code's parser uses (``yes``,
  ``on``, ``2024-01-01`` and ``1:30`` stay strings; only ``true``/``false`` are booleans), nesting
  bounded to ``MAX_DEPTH`` while composing (before any recursion can overflow) and aliases
  bounded by the size the document would have when expanded (``MAX_EXPANDED_NODES``), so an
  alias bomb is refused before anything walks it.
* ``load_json`` bounds nesting the same way.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Final

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
