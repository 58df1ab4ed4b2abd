"""Bypass spellings end to end: the real CLI, a scripted model, and files that must survive.

The model calls Bash with corpus spellings; each would delete its own victim file. With
``Bash(rm:*)`` denied (even in ``bypassPermissions``), in plan mode, and inside the read-only
Explore agent, none may run: every victim must still exist afterwards, while an allowed control
command does run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from bash_corpus import NOT_RUNNABLE_HERE, PLAN_MODE_WRITES, RM_BYPASSES
from cli_helpers import agent_call, run_script, tool_call, write_script

# A representative subset: one or more from each family of the corpus.
E2E_SPELLINGS = [
    "'rm' tgt",
    "\\rm tgt",
    "r''m tgt",
    "$'rm' tgt",
    '"r"m tgt',
    "$'\\x72m' tgt",
    "r\\\nm tgt",
    "2>/dev/null rm tgt",
    "X=1 rm tgt",
    "rm 2>/dev/null tgt",
    "/usr/bin/rm tgt",
    "true && rm tgt",
    "f() { rm tgt; }; f",
    "echo $(rm tgt)",
    "cat <(rm tgt)",
    "echo ${x:-$(rm tgt)}",
    "echo $(( $(rm tgt) 0 ))",
    "X=rm; $X tgt",
    "{rm,tgt}",
    "/usr/bin/r? tgt",
    'eval "rm tgt"',
    'bash -c "rm tgt"',
    "echo rm tgt | bash",
    "cat <<EOF | sh\nrm tgt\nEOF",
    "source script.sh",
    "trap 'rm tgt' EXIT",
    "find . -name tgt -exec rm {} +",
    "echo tgt | xargs rm",
    "xargs -a list rm",
    "setsid -w rm tgt",
    "flock ./lk rm tgt",
    "ionice -c 3 rm tgt",
    "chrt -o 0 rm tgt",
    "nice -n 5 rm tgt",
    "timeout 5 rm tgt",
    "nohup rm tgt",
    "stdbuf -o0 rm tgt",
    "command rm tgt",
    "builtin eval 'rm tgt'",
    "exec rm tgt",
    "env -i /usr/bin/rm tgt",
    "taskset 1 rm tgt",
    "y='a[$(rm tgt)]'; echo $((y))",
    "hash -p /usr/bin/rm ls; ls tgt",
]


def victims(command: str, index: int) -> str:
    """The spelling with its own victim, script and list files (``tgt`` → ``tgt7``)."""
    return re.sub(r"\b(tgt|list|script)\b", lambda m: f"{m.group(1)}{index}", command)


def lay_out(folder: Path, count: int) -> None:
    for index in range(count):
        (folder / f"tgt{index}").write_text("victim\n")
        (folder / f"script{index}.sh").write_text(f"rm tgt{index}\n")
        (folder / f"list{index}").write_text(f"tgt{index}\n")


def write_settings(folder: Path, permissions: dict[str, object]) -> None:
    (folder / ".claude").mkdir(exist_ok=True)
    (folder / ".claude" / "settings.json").write_text(json.dumps({"permissions": permissions}))


def bash_turns(commands: list[str]) -> list[dict[str, object]]:
    calls = [tool_call("Bash", command=command) for command in commands]
    return [{"tool_calls": calls}, {"text": "{{tool_results}}"}]


BATCH = 15  # below the denial breaker's total of 20 per agent


def run_in_batches(folder: Path, commands: list[str], *extra: str) -> list[str]:
    """Each batch in its own session; an allowed ``true`` after each call keeps the breaker from
    tripping on consecutive denials, so every result comes from the checker itself.
    Returns the tool result texts of the checked commands."""
    results: list[str] = []
    for start in range(0, len(commands), BATCH):
        batch = commands[start : start + BATCH]
        calls = [call for command in batch for call in (command, "true")]
        turns = [
            {"tool_calls": [tool_call("Bash", command=c) for c in calls]},
            {"text": "{{tool_results}}"},
        ]
        script = write_script(folder, [{"agent_type": "main", "turns": turns}], f"s{start}.json")
        run = run_script(script, folder, *extra, timeout=120)
        assert run.code == 0, run.stderr
        texts = [
            block["content"] if isinstance(block["content"], str) else json.dumps(block)
            for block in _last_tool_results(folder)
        ]
        results += texts[0::2]
    return results


def _last_tool_results(folder: Path) -> list[dict[str, object]]:
    requests = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    last_user = requests[-1]["messages"][-1]
    return [b for b in last_user["content"] if b.get("type") == "tool_result"]


def test_subset_is_from_the_corpus() -> None:
    assert set(E2E_SPELLINGS) <= set(RM_BYPASSES) - set(NOT_RUNNABLE_HERE)


def test_no_spelling_runs_under_a_deny_rule_even_in_bypass_mode(tmp_path: Path) -> None:
    lay_out(tmp_path, len(E2E_SPELLINGS))
    write_settings(tmp_path, {"deny": ["Bash(rm:*)"]})
    commands = [victims(c, i) for i, c in enumerate(E2E_SPELLINGS)]
    control = "touch made_by_bash"  # proves Bash calls do run in these sessions
    results = run_in_batches(
        tmp_path, [control, *commands], "--permission-mode", "bypassPermissions"
    )
    assert (tmp_path / "made_by_bash").exists()
    survivors = [c for i, c in enumerate(E2E_SPELLINGS) if (tmp_path / f"tgt{i}").exists()]
    assert survivors == E2E_SPELLINGS
    checked = results[1:]
    assert len(checked) == len(commands)
    assert all(text.startswith("Permission to use Bash") for text in checked), checked
    assert sum("has been denied by rule 'Bash(rm:*)'" in text for text in checked) >= 25
    assert any("needs approval" in text for text in checked)  # opaque ones: asked, headless


def test_plan_mode_runs_no_write(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    lay_out(work, len(PLAN_MODE_WRITES))
    commands = [victims(c, i) for i, c in enumerate(PLAN_MODE_WRITES)]
    before = sorted(p.name for p in work.iterdir())
    results = run_in_batches(work, commands, "--permission-mode", "plan")
    after = sorted(p.name for p in work.iterdir() if p.suffix not in (".json", ".jsonl"))
    assert after == before
    assert all((work / f"tgt{i}").read_text() == "victim\n" for i in range(len(commands)))
    assert len(results) == len(commands)
    assert all("plan mode allows only read-only" in text for text in results), results


def test_read_only_explore_agent_cannot_delete_through_substitutions(tmp_path: Path) -> None:
    """Explore is read-only even when the settings allow every Bash command."""
    spellings = ["echo $(( $(rm tgt0) 0 ))", "cat <(rm tgt1)", "echo `rm tgt2`"]
    lay_out(tmp_path, len(spellings))
    write_settings(tmp_path, {"allow": ["Bash"]})
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("look around", "Explore")]},
                    {"text": "{{tool_results}}"},
                ],
            },
            {"agent_type": "Explore", "turns": bash_turns([*spellings, "ls > tgt3"])},
        ],
    )
    (tmp_path / "tgt3").write_text("victim\n")
    run = run_script(script, tmp_path, timeout=120)
    assert run.code == 0, run.stderr
    assert all((tmp_path / f"tgt{i}").read_text() == "victim\n" for i in range(4))
    explore = [r for r in _requests(tmp_path) if r["agent_type"] == "Explore"][-1]
    results = [b for b in explore["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert len(results) == 4
    assert all("is a read-only agent" in json.dumps(b) for b in results)


def _requests(folder: Path) -> list[dict[str, object]]:
    lines = (folder / "requests.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]
