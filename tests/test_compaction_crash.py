"""kill -9 in the middle of a compaction loses nothing (issue 18 "Done when").

In the crash harness's style (``tests/test_crash_harness.py``): the real CLI runs a script whose
summary turn is slow, gets SIGKILL once the summary request is in the ``record`` file (the
summary call is in flight), and is restarted with ``--resume``. Recovery must start from the
last durable boundary — here the history before the compaction, since the boundary is written
only after the summary arrives — so the restarted run compacts again and completes; a background
child killed while compacting is reconciled as interrupted, resumable, and a ``resume_from`` of
it compacts and completes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cli_helpers import agent_call, recorded, run_script, script_args, tool_call, write_script
from subagents.state import ProjectState
from subagents.store import FileStore
from subagents.store.transcript import read_messages
from test_compaction import SUMMARY, big_file, compact_entry, text_of

THRESHOLD = "6000"


def kill_during_summary(script: Path, project: Path, env: dict[str, str]) -> str:
    """Run the CLI; SIGKILL it while its first summary request is being answered."""
    args = script_args(script, output_format="stream-json", prompt="go")
    out = project / "crash.out"
    with out.open("wb") as stdout:
        proc = subprocess.Popen(
            [sys.executable, "-m", "subagents", *args], cwd=project, env=env, stdout=stdout
        )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            if any(r["agent_type"] == "compact" for r in _records(project)):
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before its compaction"
        time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    first = out.read_text().split("\n", 1)[0]
    return str(json.loads(first)["session_id"])


def _records(folder: Path) -> list[dict[str, Any]]:
    path = folder / "requests.jsonl"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip().endswith("}")]


def environment(home: Path) -> dict[str, str]:
    return {**os.environ, "SUBAGENTS_HOME": str(home), "SUBAGENTS_AUTOCOMPACT_TOKENS": THRESHOLD}


def slow_compact() -> dict[str, Any]:
    return {"agent_type": "compact", "turns": [{"text": "never served", "delay_ms": 30_000}]}


def test_the_main_agent_killed_while_compacting_resumes_from_its_durable_history(
    tmp_path: Path,
) -> None:
    big = big_file(tmp_path)
    home = tmp_path / "home"
    main = {
        "agent_type": "main",
        "turns": [{"tool_calls": [tool_call("Read", file_path=str(big))]}, {"text": "never"}],
    }
    script = write_script(tmp_path, [main, slow_compact()])
    session_id = kill_during_summary(script, tmp_path, environment(home))
    transcript = ProjectState.for_cwd(tmp_path, home).session_transcript(session_id)
    durable = json.dumps(read_messages(transcript))
    assert "line 0399" in durable and "never served" not in durable  # nothing lost, no boundary
    (tmp_path / "requests.jsonl").unlink()
    resume_main = {"agent_type": "main", "turns": [{"text": "resumed and done"}]}
    again = write_script(tmp_path, [resume_main, compact_entry()], name="again.json")
    env = {"SUBAGENTS_HOME": str(home), "SUBAGENTS_AUTOCOMPACT_TOKENS": THRESHOLD}
    run = run_script(again, tmp_path, "--resume", session_id, prompt="continue", env=env)
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "resumed and done"
    requests = recorded(tmp_path)
    assert [r["agent_type"] for r in requests] == ["compact", "main"]
    assert "line 0399" in text_of(requests[0])  # the summariser saw the durable history
    assert SUMMARY in text_of(requests[1]) and "continue" in text_of(requests[1])


def test_a_child_killed_while_compacting_is_interrupted_and_resumes(tmp_path: Path) -> None:
    big = big_file(tmp_path)
    home = tmp_path / "home"
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [agent_call("token B", "Explore", run_in_background=True)]},
            {"text": "waiting"},
            {"text": "never"},
        ],
    }
    child = {
        "agent_type": "Explore",
        "turns": [{"tool_calls": [tool_call("Read", file_path=str(big))]}, {"text": "never"}],
    }
    script = write_script(tmp_path, [main, child, slow_compact()])
    session_id = kill_during_summary(script, tmp_path, environment(home))
    env = {"SUBAGENTS_HOME": str(home), "SUBAGENTS_AUTOCOMPACT_TOKENS": THRESHOLD}
    # a restart reconciles the child; a later turn resumes it
    resume_main = {
        "agent_type": "main",
        "turns": [
            {
                "capture": {"id": r"resume (a[0-9a-z]{8})"},
                "tool_calls": [
                    tool_call(
                        "Agent",
                        description="go on",
                        prompt="go on",
                        resume_from="{{capture.id}}",
                    )
                ],
            },
            {"text": "{{tool_results}}"},
        ],
    }
    resumed_child = {"agent_type": "Explore", "match": "go on", "turns": [{"text": "child done"}]}
    store = FileStore(ProjectState.for_cwd(tmp_path, home))
    (child_id,) = [r.agent_id for r in store.list_agents(str(tmp_path.resolve()))]
    again = write_script(tmp_path, [resume_main, resumed_child, compact_entry()], name="again.json")
    (tmp_path / "requests.jsonl").unlink()
    run = run_script(again, tmp_path, "--resume", session_id, prompt=f"resume {child_id}", env=env)
    assert run.code == 0, run.stderr
    source = store.get(child_id)
    assert source is not None and source.status == "failed"
    assert source.restart_recovery == "interrupted" and source.resumable
    assert "child done" in run.json()["result"]
    requests = recorded(tmp_path)
    summaries = [r for r in requests if r["agent_type"] == "compact"]
    assert summaries and "line 0399" in text_of(summaries[0])  # the durable read survived
    resumed = [r for r in requests if r["agent_type"] == "Explore"][-1]
    assert SUMMARY in text_of(resumed) and "go on" in text_of(resumed)
