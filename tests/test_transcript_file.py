"""A child's transcript path is made and handed on as text (``AgentRuntime.transcript_file``,
``AgentJob.transcript``, ``AgentRun.transcript_file``): the text is the ``pathlib`` path's own,
and every reader — the public ``AgentRun.transcript_path``, the record, the transcript writer,
the hooks, the process-group recorder — sees what it saw when the path was a ``Path``."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import agent_call
from subagents.agents.agent_run import AgentRun
from subagents.agents.orphan_processes import pids_path, transcript_group_recorder
from subagents.events import AgentRef
from subagents.session import Session, SessionOptions
from subagents.state import ProjectState
from subagents.store import FileStore
from subagents.store.transcript import read_records
from subagents.testing import ScriptedModel


def _session(tmp_path: Path, home: Path, children: int = 2) -> Session:
    calls = [
        agent_call(f"job {i}", "general-purpose", description="bg", run_in_background=True)
        for i in range(children)
    ]
    script: dict[str, Any] = {
        "agents": [
            {"agent_type": "main", "turns": [{"tool_calls": calls}, *({"text": "ok"},) * 4]},
            {"agent_type": "general-purpose", "turns": [{"text": "done {{prompt}}"}]},
        ]
    }
    options = SessionOptions(model=ScriptedModel.from_dict(script), cwd=tmp_path, home=home)
    return Session(options)


def test_the_transcript_text_is_the_states_path_for_every_kind_of_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``transcript_file`` against ``ProjectState.agent_transcript`` (the plain join): absolute
    and relative homes, a non-ASCII and spaced project, and after the state changes."""
    monkeypatch.chdir(tmp_path)
    for home, project in [
        (tmp_path / "home", tmp_path),
        (Path("rel-home"), Path("/srv/project")),
        (tmp_path / "hé me", tmp_path / "pro jet ü"),
    ]:
        session = _session(tmp_path, home)
        runtime = session.runtime
        runtime.state = ProjectState(home=home, project=project)
        for agent_id in ("a1b2c3d4e", "x"):
            expected = runtime.state.agent_transcript(agent_id)
            assert runtime.transcript_file(agent_id) == str(expected)
            assert runtime.transcript_for(agent_id) == expected
    runtime.transcripts = False
    assert runtime.transcript_file("a1") is None and runtime.transcript_for("a1") is None


async def test_a_childs_transcript_reaches_every_reader_as_its_path(tmp_path: Path) -> None:
    session = _session(tmp_path, tmp_path / "home", children=3)
    result = await session.run("go")
    state = session.runtime.state
    disk = FileStore(state)
    for run in result.agents[1:]:
        expected = state.agent_transcript(run.agent_id)
        assert isinstance(run.transcript_path, Path) and run.transcript_path == expected
        assert run.transcript_file == str(expected)
        record = disk.get(run.agent_id)
        assert record is not None and record.transcript_path == str(expected)
        lines = list(read_records(expected))
        assert any(line.get("type") == "message" for line in lines)
        assert oct(expected.stat().st_mode & 0o777) == "0o600"


def test_a_runs_transcript_path_reads_and_sets_its_text() -> None:
    run = AgentRun(ref=AgentRef(agent_id="a1", agent_type="t"))
    assert run.transcript_path is None and run.transcript_file is None
    run.transcript_path = Path("/x/y/a1.jsonl")
    assert run.transcript_file == "/x/y/a1.jsonl" and run.transcript_path == Path("/x/y/a1.jsonl")
    run.transcript_path = None
    assert run.transcript_file is None
    assert replace(run, transcript_file="/z.jsonl").transcript_path == Path("/z.jsonl")


def test_a_process_group_is_recorded_beside_a_transcript_given_as_text(tmp_path: Path) -> None:
    transcript = tmp_path / "agents" / "a1.jsonl"
    transcript.parent.mkdir()
    for given in (str(transcript), transcript):
        pids = pids_path(transcript)
        pids.unlink(missing_ok=True)
        transcript_group_recorder(given)(os.getpgid(0))
        assert pids.read_text().split()[0] == str(os.getpgid(0))
