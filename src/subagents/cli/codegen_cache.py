"""A bytecode cache for the code ``dataclasses`` (and ``typing``, ``namedtuple``) generate, so a
``subagents`` process does not compile the same source texts on every start.

Why: Python 3.11's ``dataclasses`` writes each generated method (``__init__``, ``__repr__``,
``__eq__``, frozen ``__setattr__``…) as source text and ``exec``s it. A ``-p`` run creates ~200
dataclasses, ~800 such methods, and parsing and compiling them was about a third of its start-up
CPU (measured with callgrind: 37 % of the instructions before the first model request). The
text is a pure function of the class definition, so its compiled code can be cached like a
module's ``.pyc``.

The same holds for two more places that compile text at run time: ``typing.ForwardRef``
compiles every string annotation it wraps (pydantic resolves ~850 of them while building the
runtime's models: ~5 % of a ``-p`` run's instructions), and ``collections.namedtuple`` ``eval``s
a ``lambda`` per class.

And for regular expressions: ``re`` parses and compiles each pattern a process uses in Python
(``re._parser``, ``re._compiler``) before handing the result, a list of integers, to the C
engine (``_sre.compile``). A ``-p`` run compiles ~60 patterns at import (``string.Template``,
``logging``, ``platform``, ``json``, argparse's, ours): ~5 % of its instructions. That list is
a pure function of the pattern text and its flags, so it is cached too, as
``("re", pattern, flags)`` with ``_sre.compile``'s other arguments, and a cached pattern goes
straight to ``_sre.compile``, which validates the code it is given. Patterns whose parsing can
warn (a non-ASCII text, a possible nested set or set operation, a numbered group condition) are
never cached, so their warnings are not lost.

How: ``install()`` (called by ``cli/main.py`` before the runtime is imported) puts an ``exec``
into the ``dataclasses`` module's namespace, an ``eval`` into ``collections``' and a ``compile``
into ``typing``'s (a name in a module resolves there before the builtin), and replaces
``re._compiler.compile`` (what ``re.compile`` calls for a pattern not in its own cache). Each
looks the source text up in the cache and compiles only a miss, exactly as the builtin would
there (``<string>``, no inherited ``__future__`` flags: those three modules have none); any other
call goes to the builtin. ``save()`` writes the cache back when this process compiled something new.

One more cost of the same ~200 classes is not compiling: for each field whose annotation is a
string (every module here has ``from __future__ import annotations``), ``dataclasses`` checks
twice whether it names ``ClassVar`` or ``InitVar`` by matching the text against a regular
expression (``_is_type``: ~3,300 matches, 11 M instructions of a ``-p`` start-up). The match is a
pure function of the text, so ``install()`` also gives ``dataclasses`` a stand-in for that
pattern whose ``match`` remembers its answer per text (``_RememberedMatch``); what ``_is_type``
then does with it (which module, which name) is unchanged.

And ``dataclasses``' ``__init__`` texts: on CPython 3.11, ``install()`` also replaces
``dataclasses._init_fn`` with one that keeps each text by the fields' shape
(``cli/dataclass_init.py``), so a known shape skips assembling it line by line.

Trust: a cache entry is code this process runs, so the file is read only if it is a regular file
(not a symlink), owned by this user and writable by nobody else, in the private state folder
(``~/.subagents/cache``, mode 0700), and it is tagged with the interpreter's bytecode magic
number; anything else is ignored (and replaced on save). Like Python's own ``.pyc`` files it is
not written under ``PYTHONDONTWRITEBYTECODE``; ``SUBAGENTS_CODEGEN_CACHE=0`` turns it off.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import importlib.util
import marshal
import os
import re
import stat
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, cast

from subagents.cli import dataclass_init
from subagents.cli.dataclass_init import InitTexts
from subagents.state import ensure_private_dir, subagents_home

MAX_CACHE_BYTES: Final = 16 << 20
"""Largest cache file read (a -p run's is ~1 MB)."""

MAX_ENTRIES: Final = 8192
"""Entries kept across runs; past it only what the last run used is written."""

_SRE: Final = sys.modules["_sre"]  # the regular expression engine; ``re`` imported it
_TAG: Final = (b"subagents-codegen-2", importlib.util.MAGIC_NUMBER, _SRE.MAGIC)


Key = str | tuple[str, str] | tuple[str, str | bytes, int] | tuple[object, ...]
"""An ``exec``'d text, ``("eval", text)`` for an expression, ``("re", pattern, flags)``, or
``("init", …)``: a dataclass ``__init__``'s shape (``cli/dataclass_init.py``)."""

RegexParts = tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]
"""``_sre.compile``'s arguments after the pattern: flags, code, groups, group index, names."""

Entry = types.CodeType | RegexParts | str

_REGEX_WARNS: Final = ("[[", "--", "&&", "~~", "||", "(?(")
"""Texts near which ``re._parser`` may warn (sets, numbered group conditions)."""


class _Cache:
    def __init__(self, path: Path, entries: dict[Key, Entry]) -> None:
        self.path = path
        self.entries = entries
        self.used: dict[Key, Entry] = {}
        self.compiled = 0
        self.regex_compile: Callable[[Any, int], re.Pattern[Any]] | None = None
        self.init_texts: InitTexts | None = None

    def code(self, key: Key, source: str, mode: str) -> types.CodeType:
        code = self.entries.get(key)
        if type(code) is not types.CodeType:
            code = compile(source, "<string>", mode, dont_inherit=True)
            self.compiled += 1
        self.used[key] = code
        return code

    def regex(self, pattern: Any, flags: int = 0) -> re.Pattern[Any]:
        """``re._compiler.compile`` for a pattern text: its code from the cache, or parsed and
        compiled as ``re`` does and remembered (see the module docstring)."""
        compile_regex = cast("Callable[[Any, int], re.Pattern[Any]]", self.regex_compile)
        kind = type(pattern)
        if (kind is not str and kind is not bytes) or flags & re.DEBUG:
            return compile_regex(pattern, flags)
        key = ("re", pattern, int(flags))
        parts = self.entries.get(key)
        if type(parts) is tuple:
            try:
                cached: re.Pattern[Any] = _SRE.compile(pattern, *parts)
            except (RuntimeError, TypeError, ValueError, OverflowError):
                pass  # code the engine refuses (a damaged file): compiled again below
            else:
                self.used[key] = parts
                return cached
        if not _quiet(pattern):
            return compile_regex(pattern, flags)
        parts = _regex_parts(pattern, int(flags))
        self.compiled += 1
        self.used[key] = parts
        compiled: re.Pattern[Any] = _SRE.compile(pattern, *parts)
        return compiled

    def exec(self, source: Any, globals: Any = None, locals: Any = None, /) -> None:
        """``exec`` as ``dataclasses`` calls it (no ``__future__`` flags there to inherit)."""
        if type(source) is str:
            if self.init_texts is not None:
                self.init_texts.note(source)
            source = self.code(source, source, "exec")
        builtins.exec(source, globals, locals)

    def init_text(self, shape: Key) -> str | None:
        """A remembered ``__init__`` text (``cli/dataclass_init.py``)."""
        text = self.entries.get(shape)
        if type(text) is not str:
            return None
        self.used[shape] = text
        return text

    def remember_init(self, shape: Key, text: str) -> None:
        self.used[shape] = text
        self.compiled += 1

    def eval(self, source: Any, globals: Any = None, locals: Any = None, /) -> Any:
        """``eval`` as ``collections.namedtuple`` calls it: a string is stripped of leading
        spaces and tabs, as the builtin does, and compiled with no inherited flags (none in
        ``collections``)."""
        if type(source) is str:
            text = source.lstrip(" \t")
            source = self.code(("eval", text), text, "eval")
        return builtins.eval(source, globals, locals)

    def compile(
        self,
        source: Any,
        filename: Any,
        mode: str,
        flags: int = 0,
        dont_inherit: bool = False,
        optimize: int = -1,
    ) -> Any:
        """``compile`` as ``typing.ForwardRef`` calls it, once per string annotation pydantic
        resolves (~850 in a ``-p`` run): ``(text, "<string>", "eval")``, inheriting nothing
        (``typing`` has no ``__future__`` imports), so ``dont_inherit=True`` is the same."""
        plain = not flags and optimize == -1
        if type(source) is str and filename == "<string>" and mode == "eval" and plain:
            return self.code(("eval", source), source, "eval")
        return builtins.compile(source, filename, mode, flags, True, optimize)


_installed: _Cache | None = None


def cache_path() -> Path:
    return subagents_home() / "cache" / f"codegen-{sys.implementation.cache_tag}.marshal"


def install() -> None:
    """Serve ``dataclasses``' generated code from the cache (see the module docstring)."""
    global _installed
    if _installed is not None or os.environ.get("SUBAGENTS_CODEGEN_CACHE", "1") == "0":
        return
    path = cache_path()
    _installed = _Cache(path, _read(path))
    # Each name shadows the builtin in that module's namespace only.
    dataclasses.exec = _installed.exec  # type: ignore[attr-defined]
    collections.eval = _installed.eval  # type: ignore[attr-defined]
    typing.compile = _installed.compile  # type: ignore[attr-defined]
    pattern = getattr(dataclasses, "_MODULE_IDENTIFIER_RE", None)
    if isinstance(pattern, re.Pattern):  # a Python without it keeps its own
        dataclasses._MODULE_IDENTIFIER_RE = _RememberedMatch(pattern)  # type: ignore[attr-defined]
    if dataclass_init.applies():
        texts = InitTexts(_installed.init_text, _installed.remember_init, _installed.exec)
        _installed.init_texts = texts
        dataclasses._init_fn = texts.init_fn  # type: ignore[attr-defined]
        dataclasses._get_field = dataclass_init.get_field  # type: ignore[attr-defined]
    compiler, parser = sys.modules.get("re._compiler"), sys.modules.get("re._parser")
    if compiler is not None and parser is not None and hasattr(compiler, "_code"):
        _installed.regex_compile = compiler.compile  # 3.11's re; another keeps its own
        compiler.__dict__["compile"] = _installed.regex


def _quiet(pattern: str | bytes) -> bool:
    """Whether parsing ``pattern`` cannot warn: ASCII only, and none of the texts near which
    ``re._parser`` issues its FutureWarnings and DeprecationWarnings."""
    text = pattern if type(pattern) is str else cast(bytes, pattern).decode("latin-1")
    return text.isascii() and not any(near in text for near in _REGEX_WARNS)


def _regex_parts(pattern: str | bytes, flags: int) -> RegexParts:
    """What ``re._compiler.compile`` passes to ``_sre.compile`` after the pattern (its body,
    CPython 3.11-3.13, up to that call)."""
    parsed = sys.modules["re._parser"].parse(pattern, flags)
    # Plain ints: opcodes are an int subclass, which marshal does not write.
    code = [int(word) for word in sys.modules["re._compiler"]._code(parsed, flags)]
    groupindex = parsed.state.groupdict
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    final = int(flags | parsed.state.flags)
    return final, code, parsed.state.groups - 1, dict(groupindex), tuple(indexgroup)


class _RememberedMatch(dict[str, "re.Match[str] | None"]):
    """A regular expression's ``match``, each text matched once (a ``re.Match`` is immutable,
    so the same one serves every later call). ``match`` is the dict's own look-up: a text seen
    before costs no Python call."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        super().__init__()
        self.pattern = pattern
        self.match = self.__getitem__

    def __missing__(self, text: str) -> re.Match[str] | None:
        found = self[text] = self.pattern.match(text)
        return found


def save() -> None:
    """Write the cache back if this process compiled code it did not have (never raises)."""
    cache = _installed
    if cache is None or not cache.compiled or sys.dont_write_bytecode:
        return
    merged = {**cache.entries, **cache.used}
    if len(merged) > MAX_ENTRIES:
        merged = cache.used
    try:
        _write(cache.path, marshal.dumps((_TAG, merged)))
    except (OSError, ValueError):
        pass  # a cache: the next run compiles again
    cache.entries, cache.compiled = merged, 0


def _read(path: Path) -> dict[Key, Entry]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if not _trusted(info):
            return {}
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(MAX_CACHE_BYTES + 1)
    except OSError:
        return {}
    finally:
        os.close(fd)
    return _entries(raw)


def _trusted(info: os.stat_result) -> bool:
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & 0o022
        and info.st_size <= MAX_CACHE_BYTES
    )


def _entries(raw: bytes) -> dict[Key, Entry]:
    try:
        tag, entries = marshal.loads(raw)
    except (EOFError, ValueError, TypeError):
        return {}
    if tag != _TAG or type(entries) is not dict:
        return {}
    return {key: entry for key, entry in entries.items() if _is_entry(key, entry)}


def _is_entry(key: object, entry: object) -> bool:
    if type(key) is str:
        return type(entry) is types.CodeType
    if type(key) is not tuple:
        return False
    if len(key) == 2:
        return key[0] == "eval" and type(key[1]) is str and type(entry) is types.CodeType
    if key[0] == "init":
        return len(key) == 8 and type(entry) is str
    return (
        len(key) == 3
        and key[0] == "re"
        and type(key[1]) in (str, bytes)
        and type(key[2]) is int
        and _is_regex_parts(entry)
    )


def _is_regex_parts(entry: object) -> bool:
    if type(entry) is not tuple or len(entry) != 5:
        return False
    flags, code, groups, groupindex, indexgroup = entry
    return (
        type(flags) is int
        and type(code) is list  # of ints: _sre.compile converts and validates each
        and type(groups) is int
        and type(groupindex) is dict
        and type(indexgroup) is tuple
    )


def _write(path: Path, data: bytes) -> None:
    ensure_private_dir(path.parent)
    temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
