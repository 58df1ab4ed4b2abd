"""The bytecode cache of ``dataclasses``' generated code (``cli/codegen_cache.py``), through the
``subagents`` command: written by a run, used by the next, never trusted when it should not be.

A run's start-up CPU is measured in ``bench/startup.py``, never here.
"""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli_helpers import run_cli, write_script

CACHE = Path("cache") / f"codegen-{sys.implementation.cache_tag}.marshal"


def _run(tmp_path: Path, **env: str) -> None:
    script = write_script(tmp_path, [{"turns": [{"text": "the answer"}]}])
    run = run_cli(
        "-p", "hi", "--model", f"scripted:{script}", cwd=tmp_path,
        env={
            "SUBAGENTS_HOME": str(tmp_path / "home"),
            "PYTHONDONTWRITEBYTECODE": "",
            "SUBAGENTS_CODEGEN_CACHE": "1",  # conftest turns it off for every other test
            **env,
        },
    )  # fmt: skip
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "the answer"


def _tampered(cache: Path, marker: Path) -> None:
    """Rewrite one entry so that, if it is ever run, it leaves ``marker`` behind."""
    tag, entries = marshal.loads(cache.read_bytes())
    text = next(key for key in entries if type(key) is str)
    entries[text] = compile(f"open({str(marker)!r}, 'w').close()\n{text}", "<string>", "exec")
    cache.write_bytes(marshal.dumps((tag, entries)))


def test_a_run_writes_the_cache_and_the_next_run_uses_it(tmp_path: Path) -> None:
    _run(tmp_path)
    cache = tmp_path / "home" / CACHE
    assert cache.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "home" / "cache").stat().st_mode & 0o777 == 0o700
    _, entries = marshal.loads(cache.read_bytes())
    assert any(str(text).startswith("def __create_fn__(") for text in entries)  # dataclasses
    written = cache.stat().st_mtime_ns
    marker = tmp_path / "ran-from-cache"
    _tampered(cache, marker)
    os.utime(cache, ns=(written, written))

    _run(tmp_path)

    assert marker.exists()  # the entry came from the cache, not from compiling its text
    assert cache.stat().st_mtime_ns == written  # nothing new was compiled: nothing rewritten


def test_annotations_and_namedtuples_are_served_from_the_cache_too(tmp_path: Path) -> None:
    """``typing.ForwardRef`` compiles each string annotation pydantic resolves, and
    ``namedtuple`` evals a lambda: both are cached as ``("eval", text)`` entries, and the next
    run evaluates the cached code."""
    _run(tmp_path)
    cache = tmp_path / "home" / CACHE
    tag, entries = marshal.loads(cache.read_bytes())
    evals = [key for key in entries if type(key) is tuple and key[0] == "eval"]
    assert any(key[1].startswith("lambda _cls, ") for key in evals)  # a namedtuple's __new__
    annotation = next(key for key in evals if key[1] == "str")  # a field annotated ``str``
    marker = tmp_path / "annotation-from-cache"
    entries[annotation] = compile(f"(open({str(marker)!r}, 'w').close(), str)[1]", "", "eval")
    cache.write_bytes(marshal.dumps((tag, entries)))

    _run(tmp_path)

    assert marker.exists()


def test_a_cache_others_can_write_is_never_run_and_is_replaced(tmp_path: Path) -> None:
    _run(tmp_path)
    cache = tmp_path / "home" / CACHE
    marker = tmp_path / "ran-from-cache"
    _tampered(cache, marker)
    cache.chmod(0o666)

    _run(tmp_path)

    assert not marker.exists()
    assert cache.stat().st_mode & 0o777 == 0o600  # rewritten from what this run compiled


def test_a_corrupt_or_foreign_cache_is_ignored(tmp_path: Path) -> None:
    cache = tmp_path / "home" / CACHE
    cache.parent.mkdir(parents=True, mode=0o700)
    cache.write_bytes(b"\x00not marshal data")
    cache.chmod(0o600)
    _run(tmp_path)
    tag, entries = marshal.loads(cache.read_bytes())
    assert entries and tag[0] == b"subagents-codegen-2"

    cache.write_bytes(
        marshal.dumps(((b"other", b"magic"), {"x = 1": compile("x = 1", "", "exec")}))
    )
    _run(tmp_path)
    assert marshal.loads(cache.read_bytes())[0] == tag


def test_nothing_is_written_without_bytecode_or_when_turned_off(tmp_path: Path) -> None:
    _run(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    _run(tmp_path, SUBAGENTS_CODEGEN_CACHE="0")
    assert not (tmp_path / "home" / "cache").exists()


FIELDS_PROBE = """
from __future__ import annotations
import dataclasses, json, os, sys, typing
from dataclasses import InitVar, dataclass, field, fields
from typing import ClassVar
from typing import ClassVar as CV
if sys.argv[1] == "installed":
    from subagents.cli import codegen_cache
    codegen_cache.install()
    assert type(dataclasses._MODULE_IDENTIFIER_RE).__name__ == "_RememberedMatch"
shapes = []
for _ in range(2):  # the second class matches every text again, from the memory
    @dataclass
    class Probe:
        plain: int = 0
        optional: str | None = None
        shared: ClassVar[int] = 1
        aliased: CV[list[int]] = []
        dotted: typing.ClassVar[str] = "x"
        seed: InitVar[int] = 0
        dotted_seed: dataclasses.InitVar[str] = ""
        spaced: " ClassVar [int]" = 2
        items: list[str] = field(default_factory=list)
        def __post_init__(self, seed, dotted_seed):
            pass
    every = Probe.__dataclass_fields__
    shapes.append([(name, str(f._field_type)) for name, f in every.items()]
                  + [[f.name for f in fields(Probe)]])
print(json.dumps(shapes))
"""


def test_the_remembered_annotation_match_finds_the_same_fields(tmp_path: Path) -> None:
    """``install`` remembers ``dataclasses``' ClassVar/InitVar pattern matches per text: the
    fields and their kinds come out as without it."""
    env = {**os.environ, "SUBAGENTS_HOME": str(tmp_path / "home"), "SUBAGENTS_CODEGEN_CACHE": "1"}
    outputs = [
        subprocess.run(
            [sys.executable, "-c", FIELDS_PROBE, mode],
            env=env, capture_output=True, text=True, check=True,
        ).stdout
        for mode in ("plain", "installed")
    ]  # fmt: skip
    assert outputs[0] == outputs[1]
    shapes = json.loads(outputs[0])
    assert shapes[0] == shapes[1]
    kinds = dict(shapes[0][:-1])
    assert kinds["plain"] == kinds["items"] == "_FIELD"
    classvars = ("shared", "aliased", "dotted")
    assert {kinds[name] for name in classvars} == {"_FIELD_CLASSVAR"}
    assert kinds["seed"] == kinds["dotted_seed"] == "_FIELD_INITVAR"


REGEX_PROBE = """
import json, re, sys, warnings
from subagents.cli import codegen_cache
codegen_cache.install()
PATTERNS = [
    ("(?P<tool>[^()\\s]+)(?:\\((?P<spec>.*)\\))?", 0, ["Bash(git *)", "Read", "(x"]),
    ("^[a-z]+$", re.IGNORECASE | re.MULTILINE, ["Abc\\ndef", "12"]),
    ("(?x) a  b # spaced", 0, ["ab", "a b"]),
    ("(?<![\\w`])@(\\w+)", 0, ["see @file", "x@y"]),
    (rb"[\\x80-\\xff]+", 0, [b"ab\\xe9\\xe8c"]),  # bytes, its text ASCII
]
out = []
for text, flags, subjects in PATTERNS:
    compiled = re.compile(text, flags)
    for subject in subjects:
        found = compiled.search(subject)
        out.append([compiled.flags, compiled.groups, dict(compiled.groupindex),
                    None if found is None else [repr(g) for g in found.groups()] + [found.span()]])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    re.compile("[[a]")  # a possible nested set: the FutureWarning comes on every run
out.append([str(w.category.__name__) for w in caught])
cache = codegen_cache._installed
out.append(cache and cache.compiled)
codegen_cache.save()
print(json.dumps(out))
"""


def _probe(tmp_path: Path, code: str, *args: str) -> Any:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"SUBAGENTS_HOME": str(tmp_path / "home"), "SUBAGENTS_CODEGEN_CACHE": "1"}
    ran = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(ran.stdout)


def test_regular_expressions_come_from_the_cache_and_match_as_compiled(tmp_path: Path) -> None:
    """A pattern's engine code is cached as ``("re", text, flags)``: the next process compiles
    nothing, and what it builds from the cache matches exactly as ``re`` compiled it; a pattern
    whose parsing warns is never cached, so its warning comes every time."""
    plain = subprocess.run(
        [sys.executable, "-c", REGEX_PROBE.replace("codegen_cache.install()", "")],
        env={**os.environ, "SUBAGENTS_CODEGEN_CACHE": "0"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    expected = json.loads(plain.stdout)[:-1]

    first = _probe(tmp_path, REGEX_PROBE)
    second = _probe(tmp_path, REGEX_PROBE)

    assert first[:-1] == second[:-1] == expected
    assert first[-2] == ["FutureWarning"]
    assert first[-1] == 5 and second[-1] == 0  # compiled once, then served from the cache
    _, entries = marshal.loads((tmp_path / "home" / CACHE).read_bytes())
    regexes = {key[1] for key in entries if type(key) is tuple and key[0] == "re"}
    assert rb"[\x80-\xff]+" in regexes and "^[a-z]+$" in regexes
    assert "[[a]" not in regexes


SWAP_PROBE = """
import json, re
from subagents.cli import codegen_cache
codegen_cache.install()
out = [bool(re.compile("cat").fullmatch("dog")), bool(re.compile("emu").fullmatch("emu"))]
codegen_cache.save()
print(json.dumps(out))
"""


def test_a_cached_pattern_is_used_and_damaged_code_is_compiled_again(tmp_path: Path) -> None:
    assert _probe(tmp_path, SWAP_PROBE) == [False, True]
    cache = tmp_path / "home" / CACHE
    tag, entries = marshal.loads(cache.read_bytes())
    flags, code, *rest = entries[("re", "emu", 0)]
    entries[("re", "emu", 0)] = (flags, [99999, *code], *rest)  # code the engine refuses
    entries[("re", "cat", 0)] = _parts_of("dog")
    cache.write_bytes(marshal.dumps((tag, entries)))

    assert _probe(tmp_path, SWAP_PROBE) == [True, True]  # "cat" ran the cached code of "dog"


def _parts_of(text: str) -> object:
    """What the cache holds for ``text``, from a process that has nothing cached."""
    code = (
        "import marshal, sys\n"
        "from subagents.cli import codegen_cache\n"
        f"sys.stdout.buffer.write(marshal.dumps(codegen_cache._regex_parts({text!r}, 0)))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    return marshal.loads(ran.stdout)


INIT_PROBE = """
import dataclasses, importlib, json, pkgutil, re, sys, typing
from dataclasses import KW_ONLY, InitVar, dataclass, field
if sys.argv[1] == "installed":
    from subagents.cli import codegen_cache
    codegen_cache.install()
import subagents

for info in pkgutil.walk_packages(subagents.__path__, "subagents."):
    if ".tui" in info.name or ".testing" in info.name or info.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(info.name)
    except Exception:  # an optional dependency: its dataclasses are not compared
        pass


@dataclass
class Plain:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)
    d: int = field(default=3, init=False)
    e: int = field(default_factory=int, init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class FrozenSlots:
    a: int
    b: int = 2
    c: int = field(default=3, init=False)


@dataclass
class Marked:
    a: int
    _: KW_ONLY
    b: int = 1
    seed: InitVar[int] = 0
    shared: typing.ClassVar[int] = 5
    def __post_init__(self, seed):
        pass


@dataclass
class SelfNamed:
    self: int
    other: "InitVar[str]" = "x"
    def __post_init__(self_, other):
        pass


@dataclass(order=True, frozen=True)
class Ordered:
    a: int
    b: str = ""


ADDRESS = re.compile(r" at 0x[0-9a-f]+")
shown = lambda value: ADDRESS.sub("", repr(value))
METHODS = ("__init__", "__repr__", "__eq__", "__lt__", "__le__", "__gt__", "__ge__",
           "__setattr__", "__delattr__", "__hash__")


def described(fn):
    if not callable(fn) or not hasattr(fn, "__code__"):
        return shown(fn)
    code = fn.__code__
    return [
        code.co_code.hex(), shown(code.co_consts), code.co_names, code.co_varnames,
        code.co_freevars, code.co_argcount, code.co_kwonlyargcount,
        shown(fn.__defaults__), shown(fn.__kwdefaults__), shown(fn.__annotations__),
        [shown(cell.cell_contents) for cell in fn.__closure__ or ()], fn.__qualname__,
        described(fn.__wrapped__) if hasattr(fn, "__wrapped__") else None,
    ]
out = {}
for name, module in sorted(sys.modules.items()):
    for cls in list(vars(module).values()):
        if not isinstance(cls, type) or cls.__module__ != name or "__init__" not in vars(cls):
            continue
        if not dataclasses.is_dataclass(cls):
            continue
        out[f"{name}.{cls.__qualname__}"] = [
            {method: described(vars(cls)[method]) for method in METHODS if method in vars(cls)},
            [[f.name, shown(f.type), str(f._field_type), shown(f.default),
              shown(f.default_factory), f.init, f.repr, f.hash, f.compare, shown(f.metadata),
              shown(f.kw_only)] for f in cls.__dataclass_fields__.values()],
            shown(vars(cls).get("__match_args__")),
        ]
errors = []
for body in (
    "x: list = []",
    "x: typing.ClassVar[list] = field(default_factory=list)",
    "x: typing.ClassVar[int] = field(default=1, kw_only=True)",
    "x: 'InitVar[int]' = field(default_factory=int)",
    "x: 'dataclasses.InitVar[int]' = field(default_factory=int)",
    "x: 'CV[int]' = field(default_factory=int)",
):
    try:
        exec(f"@dataclass\\nclass Bad:\\n    {body}", {**globals(), "CV": typing.ClassVar})
    except (TypeError, ValueError) as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    else:
        errors.append("no error")
out["errors"] = errors
cache = sys.modules.get("subagents.cli.codegen_cache")
installed = cache._installed if cache else None
new = [k for k in installed.used if k not in installed.entries] if installed else []
print(json.dumps({"classes": out, "new": sum(1 for k in new if k[0] == "init")}))
if installed:
    cache.save()
"""


def test_every_dataclass_is_made_the_same_from_remembered_texts(tmp_path: Path) -> None:
    """``install`` serves ``dataclasses``' ``__init__`` texts by the fields' shape and finds
    fields in one pass (``cli/dataclass_init.py``): every dataclass of the runtime and a few of
    every kind (defaults, factories, ``init=False``, frozen with slots, ``KW_ONLY``,
    ``InitVar``, a ClassVar, a field named ``self``, ``order=True``) gets the same fields and
    the same methods — ``__init__``, ``__repr__``, ``__eq__``, the orderings, frozen
    ``__setattr__``/``__delattr__``, ``__hash__``: code, defaults, annotations, closure values —
    as without it, made fresh and then from the cache; a bad field fails with the same error."""
    plain = subprocess.run(
        [sys.executable, "-c", INIT_PROBE, "plain"],
        env={**os.environ, "SUBAGENTS_CODEGEN_CACHE": "0"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    expected = json.loads(plain.stdout)["classes"]
    first = _probe(tmp_path, INIT_PROBE, "installed")
    second = _probe(tmp_path, INIT_PROBE, "installed")

    assert len(expected) > 150
    for made in (first, second):
        assert isinstance(made, dict)
        assert made["classes"] == expected
    assert first["new"] > 150
    assert second["new"] == 0  # every __init__ text came from the cache
    _, entries = marshal.loads((tmp_path / "home" / CACHE).read_bytes())
    assert sum(1 for key in entries if type(key) is tuple and key[0] == "init") > 150
