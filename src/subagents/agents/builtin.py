"""The built-in agents: general-purpose, Explore, Plan and verification (SPEC §2, §14).

Explore and Plan are read-only: they cannot write or edit files, their prompt limits Bash to
commands that change nothing, and they get the slimmed context (no CLAUDE.md / AGENTS.md, no git
status snapshot) because they are cheap, frequent and only need to look things up.

``verification`` is the independent checker the coordinator is reminded to spawn after several
delegated tasks. Its report must end with exactly one ``VERDICT:`` line; ``parse_verdict`` is the
only reader of that line, and it refuses anything ambiguous rather than guess.
"""

from __future__ import annotations

import re
from typing import Literal

from subagents.agents.schema import AgentDefinition

Verdict = Literal["PASS", "FAIL", "PARTIAL"]

READ_ONLY_TOOLS = ("Read", "Glob", "Grep", "Bash")
EDITING_TOOLS = ("Write", "Edit", "NotebookEdit")

_READ_ONLY_BASH = """\
Bash is for read-only commands only: ls, cat, head, tail, find, git status, git log, git diff,
git show, grep and the like. Never run anything that changes state: no redirection into files,
no mkdir, touch, rm, mv, cp, no git add/commit/checkout/reset/stash, no package installs, no
builds that write output. If the task seems to need a change, describe the change instead."""

GENERAL_PURPOSE_PROMPT = """\
You are a general-purpose agent working on a task delegated to you by a coordinating agent.
Use the tools you have to do the whole task: search the code, read what matters, make the
changes that are asked for and check them. Do not stop at a plan when the task asks for work.

Work carefully: prefer editing existing files to creating new ones, never create documentation
files unless asked, and keep to the scope you were given.

When you are done, answer with a concise report for the coordinator, who sees only your final
message: what you did, the files you changed or found (absolute paths), and anything left
undone or uncertain."""

EXPLORE_PROMPT = f"""\
You are a fast, read-only research agent. Your job is to find things in a codebase and report
them: where something is defined, how a feature works, which files are involved.

Search broadly first (Glob for file names, Grep for content), then Read the files that matter.
Run several independent searches at once when you can. Adapt how thorough you are to what the
caller asked for.

You cannot create, modify or delete files. {_READ_ONLY_BASH}

Answer with a clear, direct report: the findings, with absolute file paths and line numbers
where they help, and the relevant snippets. The caller sees only your final message."""

PLAN_PROMPT = f"""\
You are a software architect and planning agent. You explore the codebase read-only and
produce an implementation plan; you do not implement anything.

Understand the requirement, then find the relevant code: existing patterns to follow, the
modules and interfaces the change touches, the tests that cover them. Weigh the alternatives
and pick one, saying why.

You cannot create, modify or delete files. {_READ_ONLY_BASH}

End with a step-by-step plan: numbered steps, each naming the files to change and what changes
in them, the order that keeps things working, how to test each step, and the risks or open
questions. List the 3-5 files most critical to the change."""

VERIFICATION_PROMPT = """\
You are an independent verification agent. Another agent claims to have done some work; your
job is to check the claim against reality, not to trust it and not to redo the work.

Read what was supposed to change. Run the project's build, type checks, tests and any command
that exercises the change, and look at the output yourself. Inspect the files involved. Try the
edge cases the claim glosses over. You must not modify project files: if something is broken,
report it; do not fix it.

Your report cites evidence: each command you ran with its exit code and the relevant output,
each file you inspected and what you found. Then end the report with exactly one verdict line,
on its own line and exactly in this form:

VERDICT: PASS      (everything claimed works, with evidence)
VERDICT: FAIL      (the claim is wrong or something required is broken)
VERDICT: PARTIAL   (some of it works, some does not or could not be checked)

Write the verdict line once, as the last line, and nowhere else."""

VERIFICATION_REMINDER = (
    "This is a verification-only task: do not edit, write or delete project files. End your "
    "report with exactly one line 'VERDICT: PASS', 'VERDICT: FAIL' or 'VERDICT: PARTIAL'."
)

GENERAL_PURPOSE = AgentDefinition(
    name="general-purpose",
    description=(
        "General-purpose agent for researching complex questions, searching for code and "
        "carrying out multi-step tasks. Use it when a search may take several attempts or "
        "the task needs both investigation and changes."
    ),
    tools=None,
    system_prompt=GENERAL_PURPOSE_PROMPT,
    source="built-in",
)

EXPLORE = AgentDefinition(
    name="Explore",
    description=(
        "Fast read-only agent for exploring a codebase: find files by pattern, search code for "
        "keywords, answer questions about how the code works. It cannot edit files."
    ),
    tools=READ_ONLY_TOOLS,
    disallowed_tools=(*EDITING_TOOLS, "Agent"),
    system_prompt=EXPLORE_PROMPT,
    source="built-in",
    read_only=True,
)

PLAN = AgentDefinition(
    name="Plan",
    description=(
        "Read-only software architect agent: explores the code and returns a step-by-step "
        "implementation plan with the critical files, trade-offs and risks. It cannot edit files."
    ),
    tools=READ_ONLY_TOOLS,
    disallowed_tools=(*EDITING_TOOLS, "Agent"),
    system_prompt=PLAN_PROMPT,
    source="built-in",
    read_only=True,
)

VERIFICATION = AgentDefinition(
    name="verification",
    description=(
        "Independent checker: runs builds, tests and commands to verify work claimed by other "
        "agents, and returns exactly one verdict (PASS, FAIL or PARTIAL) with evidence."
    ),
    tools=READ_ONLY_TOOLS,
    disallowed_tools=(*EDITING_TOOLS, "Agent"),
    system_prompt=VERIFICATION_PROMPT,
    source="built-in",
    critical_reminder=VERIFICATION_REMINDER,
)

BUILTIN_AGENTS: tuple[AgentDefinition, ...] = (GENERAL_PURPOSE, EXPLORE, PLAN, VERIFICATION)

# A verdict line may be decorated as a Markdown heading or in bold; nothing else may be on it.
_VERDICT_LINE = re.compile(r"^[#>\s*_]*VERDICT\s*:\s*(?P<value>[A-Za-z]*)[\s*_.]*$")


def parse_verdict(text: str) -> Verdict | None:
    """The verdict of a verification report, or ``None`` unless exactly one valid line is there.

    Two verdict lines (even identical ones) or a line with an unknown value are treated as no
    verdict: a checker that cannot commit to one answer has not given one.
    """
    values = [
        match.group("value")
        for line in text.splitlines()
        if (match := _VERDICT_LINE.match(line)) is not None
    ]
    if len(values) != 1:
        return None
    value = values[0]
    if value == "PASS":
        return "PASS"
    if value == "FAIL":
        return "FAIL"
    if value == "PARTIAL":
        return "PARTIAL"
    return None
