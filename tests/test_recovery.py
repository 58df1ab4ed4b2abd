"""Crash recovery (issue 5 item 4): orphans, leftover processes, adoption, missed notifications.

Real files in ``tmp_path``, real processes and signals; the SIGKILL harness over the real CLI is
``test_crash_harness.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from subagents.agents.orphan_processes import is_our_group, pids_path, record_group
from subagents.agents.recovery import (
    INTERRUPTED_CALL_TEXT,
    INTERRUPTED_ERROR,
    adoptable,
    delivered_task_ids,
    pending_notifications,
    reconcile_orphans,
    repair_unanswered,
)
from subagents.agents.transcript_repair import inspect_transcript
from subagents.messages import Message, tool_uses
from subagents.session import Session, SessionOptions
from subagents.state import ProjectState
from subagents.store import (
    FileStore,
    Lineage,
    ProcessIdentity,
    RunResult,
    SidecarRecord,
    WorktreeInfo,
)
from subagents.store.process_identity import current_identity, hostname, start_identity
from subagents.store.transcript import read_messages, read_records
from subagents.testing import ScriptedModel
from subagents.testing.store_conformance import make_record

SESSION = "session-1"


# -- helpers ---------------------------------------------------------------------------------


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def said(text: str) -> Message:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def calls(*ids: str, name: str = "Glob", **input_: Any) -> Message:
    blocks: list[Any] = [
        {"type": "tool_use", "id": i, "name": name, "input": dict(input_)} for i in ids
    ]
    return {"role": "assistant", "content": blocks}


def results(*ids: str) -> Message:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids],
    }


def write_transcript(path: Path, turns: list[list[Message]], tail: str = "") -> None:
    """One marker after each turn, then ``tail`` verbatim (an interrupted turn, a torn line)."""
    lines: list[str] = []
    for number, turn in enumerate(turns, start=1):
        lines += [json.dumps({"type": "message", "message": m}) for m in turn]
        lines.append(json.dumps({"type": "turn_completed", "turn": number}))
    path.write_text("".join(f"{line}\n" for line in lines) + tail)


def dead_identity() -> ProcessIdentity:
    """The identity of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    identity = ProcessIdentity(pid=proc.pid, start_identity=start_identity(proc.pid))
    proc.wait()
    return replace(
        identity, start_identity=identity.start_identity or "1@gone", hostname=hostname()
    )


@pytest.fixture
def project(tmp_path: Path) -> ProjectState:
    folder = tmp_path / "project"
    folder.mkdir()
    return ProjectState(home=tmp_path / "home", project=Path(os.path.realpath(folder)))


def orphan(
    state: ProjectState, agent_id: str, turns: list[list[Message]] | None, **overrides: Any
) -> FileStore:
    """A running record owned by a dead process, with a transcript of ``turns``."""
    transcript = state.agent_transcript(agent_id)
    store = FileStore(state)
    fields: dict[str, Any] = {
        "project_path": str(state.project),
        "session_id": SESSION,
        "prompt": "do the thing",
        "process": dead_identity(),
        "transcript_path": str(transcript),
        "worktree": None,
        "output_path": None,
        **overrides,
    }
    store.create(make_record(agent_id, **fields))
    if turns is not None:
        write_transcript(transcript, turns)
    return store


def reconcile(state: ProjectState, hooks: Any = None) -> dict[str, str]:
    found = asyncio.run(reconcile_orphans(FileStore(state), state, hooks=hooks))
    return {r.agent_id: r.outcome for r in found}


def get(state: ProjectState, agent_id: str) -> SidecarRecord:
    record = FileStore(state).get(agent_id)
    assert record is not None
    return record


# -- orphans ---------------------------------------------------------------------------------


def test_durable_final_text_makes_the_orphan_completed(project: ProjectState) -> None:
    orphan(
        project,
        "a00000001",
        [[user("do the thing")], [calls("t1"), results("t1")], [said("done: 42")]],
    )
    assert reconcile(project) == {"a00000001": "completed"}
    record = get(project, "a00000001")
    assert record.status == "completed" and record.result.text == "done: 42"
    assert record.restart_recovery == "completed" and record.resumable
    assert record.process is None


def test_a_turn_cut_by_the_crash_makes_it_interrupted_and_the_transcript_resumable(
    project: ProjectState,
) -> None:
    orphan(project, "a00000002", [[user("do the thing")], [calls("t1", "t2")]])
    transcript = project.agent_transcript("a00000002")
    with transcript.open("a") as handle:  # a turn that never got its marker, then a torn line
        handle.write(json.dumps({"type": "message", "message": said("lost")}) + "\n")
        handle.write('{"type": "message", "mess')
    assert reconcile(project) == {"a00000002": "interrupted"}
    record = get(project, "a00000002")
    assert record.status == "failed" and record.result.error == INTERRUPTED_ERROR
    assert record.restart_recovery == "interrupted" and record.resumable
    history = read_messages(transcript)  # parses: the torn line and the lost turn are gone
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    repaired = history[-1]["content"]
    assert isinstance(repaired, list)
    assert [b.get("tool_use_id") for b in repaired] == ["t1", "t2"]
    assert all(b.get("is_error") for b in repaired)
    assert "said" not in transcript.read_text() and "lost" not in transcript.read_text()


def test_history_ending_with_tool_results_is_interrupted(project: ProjectState) -> None:
    orphan(project, "a00000003", [[user("do the thing")], [calls("t1"), results("t1")]])
    assert reconcile(project) == {"a00000003": "interrupted"}
    assert get(project, "a00000003").resumable


def test_corrupted_transcript_gives_restart_recovery_failed(project: ProjectState) -> None:
    orphan(project, "a00000004", None)
    path = project.agent_transcript("a00000004")
    write_transcript(path, [[user("do the thing")], [said("done")]])
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(1, "{not json at all\n")  # damage in the middle, not a torn tail
    path.write_text("".join(lines))
    assert reconcile(project) == {"a00000004": "failed"}
    record = get(project, "a00000004")
    assert record.status == "failed" and record.restart_recovery == "failed"
    assert not record.resumable
    assert "could not be verified" in (record.result.error or "")


def test_a_transcript_of_something_else_is_not_verifiable(project: ProjectState) -> None:
    orphan(project, "a00000005", [[user("another prompt entirely")], [said("done")]])
    assert reconcile(project) == {"a00000005": "failed"}
    assert not get(project, "a00000005").resumable


def test_no_transcript_recorded_is_not_verifiable(project: ProjectState) -> None:
    orphan(project, "a00000006", None, transcript_path=None)
    assert reconcile(project) == {"a00000006": "failed"}
    assert get(project, "a00000006").restart_recovery == "failed"


def test_lines_without_any_marker_are_not_verifiable(project: ProjectState) -> None:
    orphan(project, "a00000007", None)
    line = json.dumps({"type": "message", "message": user("do the thing")})
    project.agent_transcript("a00000007").write_text(line + "\n")
    assert reconcile(project) == {"a00000007": "failed"}


def test_crash_before_the_first_transcript_write_rebuilds_history_from_the_sidecar(
    project: ProjectState,
) -> None:
    orphan(project, "a00000008", None)  # record written, transcript never created
    assert reconcile(project) == {"a00000008": "interrupted"}
    assert read_messages(project.agent_transcript("a00000008")) == [user("do the thing")]
    assert get(project, "a00000008").resumable


def test_a_child_that_never_started_is_rebuilt_even_without_its_transcript_folder(
    project: ProjectState, tmp_path: Path
) -> None:
    """The driver chose the path, the node that would have made the folder never ran it (a Ray
    host killed with its driver before the child started; no sidecar folder with PostgreSQL)."""
    transcript = tmp_path / "elsewhere" / "agents" / "a00000018.jsonl"
    orphan(project, "a00000018", None, transcript_path=str(transcript))
    assert reconcile(project) == {"a00000018": "interrupted"}
    assert read_messages(transcript) == [user("do the thing")]
    assert get(project, "a00000018").resumable


def test_a_live_owner_is_left_alone(project: ProjectState) -> None:
    orphan(project, "a00000009", [[user("do the thing")]], process=current_identity())
    assert reconcile(project) == {}
    assert get(project, "a00000009").status == "running"


def test_a_reused_pid_is_not_taken_for_the_live_owner(project: ProjectState) -> None:
    # Our own PID is alive, but it belonged to another process when the record was written.
    reused = ProcessIdentity(pid=os.getpid(), start_identity="1@another-boot", hostname=hostname())
    orphan(project, "a00000010", [[user("do the thing")], [said("ok")]], process=reused)
    assert reconcile(project) == {"a00000010": "completed"}


def test_a_live_lease_holder_keeps_the_orphan_and_a_second_pass_does_nothing(
    project: ProjectState,
) -> None:
    store = orphan(project, "a00000011", [[user("do the thing")], [said("ok")]])
    other = subprocess.Popen(["sleep", "30"])
    try:
        holder = ProcessIdentity(
            pid=other.pid, start_identity=start_identity(other.pid), hostname=hostname()
        )
        assert store.take_lease("a00000011", holder)
        assert reconcile(project) == {}
        assert get(project, "a00000011").status == "running"
    finally:
        other.kill()
        other.wait()
    assert reconcile(project) == {"a00000011": "completed"}
    assert reconcile(project) == {}  # idempotent
    assert not FileStore(project).lease_path("a00000011").exists()


def test_two_processes_reconciling_at_once_recover_each_orphan_once(
    project: ProjectState,
) -> None:
    ids = [f"a0000002{n}" for n in range(6)]
    for agent_id in ids:
        orphan(project, agent_id, [[user("do the thing")], [said(f"r {agent_id}")]])
    code = (
        "import asyncio, json, sys; from pathlib import Path\n"
        "from subagents.agents.recovery import reconcile_orphans\n"
        "from subagents.state import ProjectState\nfrom subagents.store import FileStore\n"
        "s = ProjectState(home=Path(sys.argv[1]), project=Path(sys.argv[2]))\n"
        "found = asyncio.run(reconcile_orphans(FileStore(s), s))\n"
        "print(json.dumps([r.agent_id for r in found]))\n"
    )
    args = [sys.executable, "-c", code, str(project.home), str(project.project)]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    recovered = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert sorted(i for found in recovered for i in found) == ids
    assert all(get(project, i).status == "completed" for i in ids)


def test_leftover_process_group_is_killed_but_a_reused_pid_is_spared(
    project: ProjectState,
) -> None:
    orphan(project, "a00000030", [[user("do the thing")], [calls("t1")]])
    pids = pids_path(project.agent_transcript("a00000030"))
    leftover = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        record_group(pids, leftover.pid)
        with pids.open("a") as handle:  # the stranger has that PID now, but not that identity
            handle.write(f"{stranger.pid} 12345@some-other-process\n")
        assert oct(pids.stat().st_mode & 0o777) == "0o600"
        found = asyncio.run(reconcile_orphans(FileStore(project), project))
        assert found[0].killed_groups == [leftover.pid]
        assert leftover.wait(timeout=5) == -9
        assert stranger.poll() is None
    finally:
        for proc in (leftover, stranger):
            proc.kill()
            proc.wait()


def test_a_killed_but_unreaped_leader_is_not_a_surviving_group() -> None:
    """A zombie leader keeps its PID and start identity until reaped; it is not a survivor."""
    leader = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        identity = start_identity(leader.pid)
        assert is_our_group(leader.pid, identity)
        os.kill(leader.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{leader.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline, "the leader never became a zombie"
            time.sleep(0.01)
        assert start_identity(leader.pid) == identity  # still there, unreaped
        assert not is_our_group(leader.pid, identity)
    finally:
        leader.kill()
        leader.wait()


def test_recovered_children_get_their_subagent_stop(project: ProjectState) -> None:
    orphan(project, "a00000040", [[user("do the thing")], [said("ok")]])

    class Hooks:
        stopped: list[tuple[str, str]] = []

        async def ensure_stopped(self, agent_id: str, agent_type: str, path: str) -> None:
            self.stopped.append((agent_id, agent_type))

    hooks = Hooks()
    reconcile(project, hooks)
    assert hooks.stopped == [("a00000040", "general-purpose")]


def test_sidecar_and_transcript_modes_stay_private(project: ProjectState) -> None:
    orphan(project, "a00000050", None)  # recovery writes the transcript itself
    reconcile(project)
    sidecar = FileStore(project).sidecar_path("a00000050")
    assert sidecar is not None and oct(sidecar.stat().st_mode & 0o777) == "0o600"
    assert oct(project.agents_dir.stat().st_mode & 0o777) == "0o700"
    transcript = project.agent_transcript("a00000050")
    assert oct(transcript.stat().st_mode & 0o777) == "0o600"


# -- adoption --------------------------------------------------------------------------------

CALL_INPUT = {"description": "probe a", "prompt": "token A1", "subagent_type": "Explore"}


def foreground_child(**overrides: Any) -> SidecarRecord:
    record = make_record(
        "a00000060",
        project_path="/p",
        session_id=SESSION,
        agent_type="Explore",
        description="probe a",
        is_background=False,
        tool_use_id="toolu_1",
        status="completed",
        result=RunResult(text="found A1", reason="completed"),
        process=None,
    )
    return replace(record, **overrides)


def unanswered(*records: SidecarRecord, call_input: dict[str, Any] = CALL_INPUT) -> list[Any]:
    history = [user("go"), calls("toolu_1", name="Agent", **call_input)]
    return list(repair_unanswered(history, list(records), session_id=SESSION, project_path="/p"))


def test_a_matching_foreground_result_is_adopted() -> None:
    [block] = unanswered(foreground_child())
    assert block["tool_use_id"] == "toolu_1" and not block.get("is_error")
    assert block["content"].startswith("found A1")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tool_use_id", "toolu_other"),
        ("session_id", "session-2"),
        ("project_path", "/elsewhere"),
        ("description", "probe b"),
        ("agent_type", "general-purpose"),
        ("lineage", Lineage(root_agent_id="a00000001", resumed_from="a00000001", resume_depth=1)),
        ("is_background", True),
        ("status", "killed"),
        ("status", "failed"),
        ("status", "running"),
        ("restart_recovery", "failed"),
        ("result", RunResult(text="", reason="completed")),
    ],
)
def test_any_mismatching_field_refuses_adoption(field: str, value: Any) -> None:
    [block] = unanswered(foreground_child(**{field: value}))
    assert block["is_error"] and block["content"] == INTERRUPTED_CALL_TEXT


def test_a_call_without_an_explicit_type_is_never_adopted() -> None:
    call_input = {k: v for k, v in CALL_INPUT.items() if k != "subagent_type"}
    [block] = unanswered(foreground_child(), call_input=call_input)
    assert block["is_error"]
    assert not adoptable(
        foreground_child(), call_id="toolu_1", call_input=call_input, session_id=SESSION,
        project_path="/p",
    )  # fmt: skip


def test_non_agent_calls_get_interrupted_results_and_answered_histories_nothing() -> None:
    history = [user("go"), calls("t1", "t2", name="Bash", command="make")]
    repaired = repair_unanswered(history, [], session_id=SESSION, project_path="/p")
    assert [b["tool_use_id"] for b in repaired] == ["t1", "t2"]
    assert (
        repair_unanswered(
            [*history, results("t1", "t2")], [], session_id=SESSION, project_path="/p"
        )
        == []
    )


# -- notifications ---------------------------------------------------------------------------


def test_pending_notifications_skip_delivered_foreground_and_running_children() -> None:
    done = foreground_child(agent_id="a00000070", is_background=True)
    delivered = foreground_child(agent_id="a00000071", is_background=True)
    running = foreground_child(agent_id="a00000072", is_background=True, status="running")
    foreground = foreground_child(agent_id="a00000073")
    history = [user("go"), said("x"), user("<task-notification>\n<task-id>a00000071</task-id>")]
    assert delivered_task_ids(history) == {"a00000071"}
    items = pending_notifications(history, [done, delivered, running, foreground], max_result=100)
    assert [i.id for i in items] == ["task-notification:a00000070"]
    assert "<task-id>a00000070</task-id>" in items[0].text and "found A1" in items[0].text


# -- through a resumed Session ---------------------------------------------------------------


async def test_resumed_session_adopts_a_foreground_result_and_delivers_a_missed_notice(
    project: ProjectState,
) -> None:
    session_id = "4a0c7ce4-0000-4000-8000-000000000001"
    transcript = project.session_transcript(session_id)
    transcript.parent.mkdir(parents=True)
    call = calls("toolu_1", name="Agent", **CALL_INPUT)
    write_transcript(transcript, [[user("go")], [call]], tail='{"type": "mess')
    store = FileStore(project)
    where = {"project_path": str(project.project), "session_id": session_id}
    store.create(replace(foreground_child(), **where))
    notice = replace(foreground_child(), agent_id="a00000061", is_background=True, tool_use_id="x")
    store.create(replace(notice, **where))
    script = {"agents": [{"agent_type": "main", "turns": [
        {"text": "got: {{tool_results}}"}, {"text": "then: {{last_user}}"}, {"text": "end"},
    ]}]}  # fmt: skip
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script),
            cwd=project.project,
            home=project.home,
            resume=session_id,
            background_wait_ms=0,
        )
    )
    result = await session.run("continue")
    assert result.subtype == "success", result.payload
    messages = read_messages(transcript)
    texts = [json.dumps(m) for m in messages if m["role"] == "user"]
    assert sum("<task-id>a00000061</task-id>" in t for t in texts) == 1
    assert "then: <task-notification>" in result.result  # delivered to the model, once
    answered = [m for m in messages if m["role"] == "user" and "toolu_1" in json.dumps(m)]
    assert len(answered) == 1 and "found A1" in json.dumps(answered[0])
    assert [m for m in messages if tool_uses(m)] == [call]  # the history was not written twice
    assert all(r.get("type") in ("message", "turn_completed") for r in read_records(transcript))


async def test_task_stop_from_another_project_or_session_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    owner = ProjectState(home=home, project=Path(os.path.realpath(first)))
    store = FileStore(owner)
    store.create(make_record("a00000080", project_path=str(owner.project), session_id="s-first"))
    other = ProjectState(home=home, project=Path(os.path.realpath(second)))
    assert FileStore(other).list_agents(other.project) == []
    for cwd in (second, first):  # another project; the same project but another session
        script = {"agents": [{"agent_type": "main", "turns": [
            {"tool_calls": [{"name": "TaskStop", "input": {"task_id": "a00000080"}}]},
            {"text": "{{tool_results}}"},
        ]}]}  # fmt: skip
        options = SessionOptions(model=ScriptedModel.from_dict(script), cwd=cwd, home=home)
        result = await Session(options).run("stop it")
        assert "belongs to another session or project" in result.result
    record = store.get("a00000080")
    assert record is not None and record.status == "running" and not record.stop_requested


def test_recovery_time_is_bounded_for_many_orphans(project: ProjectState) -> None:
    for n in range(40):
        orphan(project, f"b{n:08d}", [[user("do the thing")], [said("ok")]])
    started = time.monotonic()
    assert len(reconcile(project)) == 40
    assert time.monotonic() - started < 30  # generous: each orphan is a few fsyncs


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.parametrize(("completed", "expected"), [(True, "removed"), (False, "kept")])
def test_an_orphans_worktree_is_settled_by_the_keep_remove_rule(
    project: ProjectState, completed: bool, expected: str
) -> None:
    repo = project.project
    git("init", "-q", "-b", "main", cwd=repo)
    git(
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "c",
        cwd=repo,
    )
    worktree = repo / ".subagents" / "worktrees" / "agent-a0000009"
    git("worktree", "add", "-q", "-b", "subagents/agent-a0000009", str(worktree), cwd=repo)
    last = said("ok") if completed else calls("t1")
    info = WorktreeInfo(path=str(worktree), branch="subagents/agent-a0000009")
    orphan(project, "a00000090", [[user("do the thing")], [last]], worktree=info)
    found = asyncio.run(reconcile_orphans(FileStore(project), project))
    assert found[0].worktree_outcome == expected
    record = get(project, "a00000090")
    assert record.worktree is not None and record.worktree.outcome == expected
    assert worktree.exists() == (expected == "kept")


@pytest.mark.parametrize(("age_s", "recovered"), [(3_600.0, True), (5.0, False)])
def test_a_schema_v1_running_record_loads_and_uses_the_legacy_window(
    project: ProjectState, age_s: float, recovered: bool
) -> None:
    """A v1 record has a PID but no start identity: trusted while young, recovered when old."""
    transcript = project.agent_transcript("a1v1run00")
    project.agents_dir.mkdir(parents=True, mode=0o700)
    write_transcript(transcript, [[user("Where is the config loaded?")], [said("in config.py")]])
    now = time.time()
    v1 = {
        "schema_version": 1,
        "agent_id": "a1v1run00",
        "agent_type": "Explore",
        "description": "Find the config loader",
        "prompt": "Where is the config loaded?",
        "status": "running",
        "session_id": "sess-v1",
        "project_path": str(project.project),
        "is_background": True,
        "pid": os.getpid(),  # alive, but nothing proves it is the same process
        "created_at": now - age_s,
        "updated_at": now - age_s,
        "transcript_path": str(transcript),
    }
    sidecar = project.agents_dir / "a1v1run00.json"
    sidecar.write_text(json.dumps(v1))
    sidecar.chmod(0o600)
    assert reconcile(project) == ({"a1v1run00": "completed"} if recovered else {})
    record = get(project, "a1v1run00")
    assert record.status == ("completed" if recovered else "running")
    if recovered:
        assert record.schema_version == 2 and record.result.text == "in config.py"


def test_a_torn_last_line_cut_inside_a_character_is_skipped_as_any_torn_line(
    tmp_path: Path,
) -> None:
    """A write cut short (a full disk, a power loss; a reader racing a running child's
    append) can end inside a multi-byte character: the torn last line is skipped as any torn
    line is, not a decode error of the whole transcript (as the resume of a session reads it,
    ``inspect_transcript``)."""
    path = tmp_path / "t.jsonl"
    write_transcript(path, [[user("do the thing"), said("fait")]])
    torn = json.dumps({"type": "message", "message": said("été")}, ensure_ascii=False)
    data = torn.encode()
    with path.open("ab") as handle:
        handle.write(data[: data.index("é".encode()) + 1])  # half of the é
    assert [m["role"] for m in read_messages(path)] == ["user", "assistant"]
    assert [r["type"] for r in read_records(path)] == ["message", "message", "turn_completed"]
    assert [m["role"] for m in inspect_transcript(path).durable] == ["user", "assistant"]
