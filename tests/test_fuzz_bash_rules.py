"""Seeded, bounded fuzz of Bash deny rules: random disguises around a denied command.

A generator composes quoting, wrappers, substitutions, compound commands, shell strings and
computed names around ``rm tgt`` (every layer keeps it a command that deletes ``tgt``; a sample
is run by the real bash to prove it). Every composition must be denied or asked under
``Bash(rm:*)`` in ``bypassPermissions`` and refused in plan mode: 0 escapes, 0 crashes, and
pytest's timeout catches a hang. A second fuzz feeds random shell-ish text and checks only that
the checker answers.

CI runs a few thousand cases in seconds. ``SUBAGENTS_FUZZ_SOAK=1`` runs the soak mode: 50x the
cases and a larger real-bash sample (minutes). ``SUBAGENTS_FUZZ_SEED`` picks another seed.
"""

from __future__ import annotations

import os
import random
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from bash_corpus import run_bash
from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.permissions import PermissionContext, decide, parse_rule
from subagents.tools.base import ToolContext
from subagents.tools.bash import BashTool
from subagents.tools.inputs.bash import BashInput

SOAK = os.environ.get("SUBAGENTS_FUZZ_SOAK") == "1"
SEED = int(os.environ.get("SUBAGENTS_FUZZ_SEED", "1313"))
CASES = 100_000 if SOAK else 2_000
ORACLE_SAMPLE = 1_500 if SOAK else 40
NOISE_CASES = 100_000 if SOAK else 3_000
BASH = BashTool()

PROGRAM_SPELLINGS = [
    "rm", "'rm'", "\\rm", "r''m", '"r"m', "$'rm'", "$'\\x72m'", "$'\\162m'", "r\\m", '"rm"',
    "/bin/rm", "/usr/bin/rm", "r$'m'", '$"rm"', "'r'm",
]  # fmt: skip
WRAPPERS = [
    "nice", "nice -n 5", "nice -5", "timeout 5", "timeout -s KILL 9", "nohup", "stdbuf -o0",
    "stdbuf -oL", "setsid", "setsid -w", "env", "env X=1", "env -u HOME", "command",
    "command -p", "builtin command", "exec", "time", "time -p", "ionice -c 3", "chrt -o 0",
    "flock ./lk", "flock -n ./lk", "taskset 1", "prlimit --nofile=64",
]  # fmt: skip
PREFIXES = ["X=1 ", "2>/dev/null ", "</dev/null ", "A=1 B=2 ", ">/dev/null "]
SUFFIXES = [" 2>&1", " >/dev/null", " 2>/dev/null", " </dev/null"]


def _dq(text: str) -> str:
    """``text`` inside double quotes."""
    return (
        '"'
        + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
        + '"'
    )


Layer = Callable[[random.Random, str], str]

LAYERS: list[Layer] = [
    lambda r, c: f"{r.choice(WRAPPERS)} {c}" if _execs(c) else f"bash -c {shlex.quote(c)}",
    lambda r, c: f"{r.choice(PREFIXES)}{c}" if _simple(c) else f"{{ {c}; }}",
    lambda r, c: f"{c}{r.choice(SUFFIXES)}" if _simple(c) else f"{{ {c}; }}",
    lambda r, c: f"bash -c {shlex.quote(c)}",
    lambda r, c: f"bash -c {_dq(c)}",
    lambda r, c: f"eval {shlex.quote(c)}",
    lambda r, c: f"echo $( {c} )",
    lambda r, c: f"cat <( {c} )",
    lambda r, c: f"x=$( {c} )",
    lambda r, c: f"echo ${{x:-$( {c} )}}",
    lambda r, c: f"echo $(( $( {c} ) 0 ))",
    lambda r, c: f"true && {c}",
    lambda r, c: f"false || {c}",
    lambda r, c: f"true; {c}",
    lambda r, c: f"{{ {c}; }}",
    lambda r, c: f"( {c} )",
    lambda r, c: f"if true; then {c}; fi",
    lambda r, c: f"for i in 1; do {c}; done",
    lambda r, c: f"f() {{ {c}; }}; f",
    lambda r, c: f"echo x | {{ {c}; }}",
    lambda r, c: f"! {{ {c}; }}",
    lambda r, c: f"echo {shlex.quote(c)} | bash",
    lambda r, c: (lambda tag: f"{{ bash <<'{tag}'\n{c}\n{tag}\n}}")(f"EOF{r.randrange(10**6)}"),
    lambda r, c: f"bash <<< {shlex.quote(c)}",
    lambda r, c: f"trap {shlex.quote(c)} EXIT" if "trap" not in c else f"eval {shlex.quote(c)}",
]


_EXECUTABLE_HEADS = (*PROGRAM_SPELLINGS, "bash ", *(f"{w} " for w in WRAPPERS))


def _execs(command: str) -> bool:
    """A program (not a builtin or a compound command) a wrapper can start."""
    return command.startswith(_EXECUTABLE_HEADS) and _simple(command)


def _simple(command: str) -> bool:
    """Still one simple command with no assignment in front: a wrapper or prefix can go first."""
    if command.startswith(("X=", "A=", "!")):
        return False
    if command.startswith(tuple(PROGRAM_SPELLINGS)):
        return not any(ch in command for ch in ";|&(){}\n")
    return not any(ch in command for ch in ";|&(){}<>\n$`")


def core(rng: random.Random) -> str:
    """The denied command itself, in one of its plain or computed spellings."""
    choice = rng.random()
    if choice < 0.75:
        return f"{rng.choice(PROGRAM_SPELLINGS)} tgt"
    return rng.choice(
        [
            "X=rm; $X tgt",
            "$(echo rm) tgt",
            "find . -name tgt -exec rm {} +",
            "echo tgt | xargs rm",
            "a=r; b=m; $a$b tgt",
            "/usr/bin/r? tgt",
            "{rm,tgt}",
        ]
    )


def disguise(rng: random.Random) -> str:
    command = core(rng)
    for _ in range(rng.randint(0, 4)):
        command = rng.choice(LAYERS)(rng, command)
    return command


def contexts(folder: Path) -> list[PermissionContext]:
    deny = (parse_rule("Bash(rm:*)", "fuzz"),)
    allow = tuple(parse_rule(r, "fuzz") for r in ("Bash(echo:*)", "Bash(bash:*)", "Bash(cat:*)"))
    return [
        PermissionContext(mode="bypassPermissions", project_root=folder, deny=deny),
        PermissionContext(mode="default", project_root=folder, deny=deny, allow=allow),
        PermissionContext(mode="plan", project_root=folder),
    ]


def tool_ctx(folder: Path) -> ToolContext:
    agent = AgentRef(agent_id="fuzz", agent_type="main")
    return ToolContext(cwd=folder, roots=(folder,), abort=AbortSignal(), agent=agent)


def test_random_disguises_never_escape(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    ctx, checks = tool_ctx(tmp_path), contexts(tmp_path)
    escapes: list[str] = []
    for _ in range(CASES):
        command = disguise(rng)
        args = BashInput(command=command)
        for context in checks:
            if decide(context, BASH, args, ctx).behavior == "allow":
                escapes.append(f"{context.mode}: {command!r}")
        if BASH.is_read_only(args):
            escapes.append(f"read-only: {command!r}")
    assert escapes == []


def test_the_generator_makes_real_bypasses(tmp_path: Path) -> None:
    """Run by bash, a sample of the disguises really deletes the file: the fuzz tests something."""
    rng = random.Random(SEED + 1)
    kept: list[str] = []
    for index in range(ORACLE_SAMPLE):
        command = disguise(rng)
        folder = tmp_path / str(index)
        folder.mkdir()
        (folder / "tgt").write_text("victim\n")
        run_bash(command, folder)
        if (folder / "tgt").exists():
            kept.append(command)
    assert kept == []


_ALPHABET = list("rm tgab $()`'\"\\;&|<>{}#=\n-0123456789EOF\t*?[]!~,.:/+%^@")
_TOKENS = ["rm", "tgt", "bash -c", "eval", "$(", "<<EOF\n", "\nEOF\n", "'", '"', "`", "${", "}",
           "((", "))", "[[", "]]", "&&", "||", "|", ";", "\\\n", "$'\\x72'", "<(", ">(", "2>&1"]  # fmt: skip


@pytest.mark.parametrize("seed", [SEED, SEED + 7])
def test_random_text_always_gets_an_answer(tmp_path: Path, seed: int) -> None:
    """Malformed and hostile text: the checker answers (no exception) for every input."""
    rng = random.Random(seed)
    ctx, checks = tool_ctx(tmp_path), contexts(tmp_path)
    for _ in range(NOISE_CASES // 2):
        pieces = [rng.choice(_TOKENS) if rng.random() < 0.4 else rng.choice(_ALPHABET)]
        pieces += [
            rng.choice(_TOKENS) if rng.random() < 0.4 else rng.choice(_ALPHABET)
            for _ in range(rng.randint(0, 40))
        ]
        command = "".join(pieces)
        args = BashInput(command=command)
        for context in checks:
            assert decide(context, BASH, args, ctx).behavior in ("allow", "deny", "ask")
        assert isinstance(BASH.is_read_only(args), bool)
