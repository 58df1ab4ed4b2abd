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
    evals = [key for key in entries if type(key) is tuple]
    assert all(key[0] == "eval" for key in evals)
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
    assert entries and tag[0] == b"subagents-codegen-1"

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
