"""The bytecode cache of ``dataclasses``' generated code (``cli/codegen_cache.py``), through the
``subagents`` command: written by a run, used by the next, never trusted when it should not be.

A run's start-up CPU is measured in ``bench/startup.py``, never here.
"""

from __future__ import annotations

import marshal
import os
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
