"""How the ``subagents`` process ends (``cli/entry.py``): every exit step a program can see —
threads joined, ``atexit`` callbacks run, output flushed, the exit code — and then no
interpreter teardown, unless something registered an ``atexit`` callback before the entry ran."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_helpers import run_script, script_args, write_script

PROBE = """
import atexit, sys, threading, time
from pathlib import Path
MARKS = Path(sys.argv.pop(1))
def mark(text):
    with MARKS.open("a") as handle:
        handle.write(text + "\\n")
if sys.argv[1:2] == ["--early-callback"]:  # as a sitecustomize or coverage's hook would
    sys.argv.pop(1)
    atexit.register(mark, "early callback")
from subagents.cli import entry
entry.prepare_exit()
def teardown(event, args, _open=open, _path=str(MARKS)):
    if event == "cpython.PyInterpreterState_Clear":  # the interpreter is tearing down
        with _open(_path, "a") as handle:
            handle.write("teardown\\n")
sys.addaudithook(teardown)
atexit.register(mark, "late callback")  # as logging or a telemetry exporter registers its own
def worker():
    time.sleep(0.3)
    mark("thread done")
threading.Thread(target=worker).start()  # not a daemon: the exit waits for it
sys.stdout.write("x" * 200_000)  # buffered: only the exit's flush writes the end of it
from subagents.cli.main import main
entry.exit_with(main())
"""


def _probe(tmp_path: Path, *first: str, text: str = "hi") -> tuple[int, str, list[str]]:
    script = write_script(tmp_path, [{"turns": [{"text": text}]}])
    marks = tmp_path / "marks"
    args = script_args(script, output_format="json", prompt="go")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(marks), *first, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = marks.read_text().splitlines() if marks.exists() else []
    return proc.returncode, proc.stdout, lines


def test_the_exit_joins_threads_runs_callbacks_flushes_and_skips_the_teardown(
    tmp_path: Path,
) -> None:
    code, stdout, marks = _probe(tmp_path)
    assert code == 0
    assert stdout.startswith("x" * 200_000)
    assert json.loads(stdout[200_000:])["result"] == "hi"
    assert marks == ["thread done", "late callback"]  # no "teardown": it was skipped


def test_a_callback_registered_before_the_entry_keeps_the_ordinary_exit(tmp_path: Path) -> None:
    code, stdout, marks = _probe(tmp_path, "--early-callback")
    assert code == 0
    assert json.loads(stdout[200_000:])["result"] == "hi"
    assert marks[:2] == ["thread done", "late callback"]
    assert set(marks[2:]) == {"early callback", "teardown"}  # after ours: so no skip


def test_the_command_keeps_its_exit_code_and_whole_output(tmp_path: Path) -> None:
    many = [{"tool_calls": [{"name": "NoSuchTool", "input": {"n": i}}]} for i in range(40)]
    script = write_script(tmp_path, [{"turns": [*many, {"text": "z" * 100_000}]}])
    run = run_script(script, tmp_path, output_format="stream-json")
    assert run.code == 0, run.stderr
    assert run.stderr == ""
    events = run.events()
    assert events[-1]["type"] == "result" and events[-1]["result"] == "z" * 100_000
    failing = write_script(tmp_path, [{"agent_type": "nobody", "turns": [{"text": "x"}]}], "f.json")
    run = run_script(failing, tmp_path)
    assert run.code == 1
    assert run.json()["is_error"] is True
