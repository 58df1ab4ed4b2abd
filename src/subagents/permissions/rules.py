"""Permission rules in Claude Code's syntax: ``Tool`` or ``Tool(specifier)``.

What a specifier means depends on the tool it names:

- ``Bash(git status:*)``: a prefix ending at a word boundary (matches ``git status`` and
  ``git status -s``, not ``git statusx``); ``Bash(npm run *)``: ``*`` is a wildcard, and a
  trailing `` *`` also matches the bare command; anything else is an exact command. A rule is
  matched against one *simple* command; the checker splits compound commands first.
- file tools: a gitignore-style glob (see ``globs.py``). ``Read(...)`` rules also cover Glob
  and Grep, ``Edit(...)`` rules cover Write and NotebookEdit, because those tools read or edit
  the same files and a deny must not be sidestepped by choosing the sibling tool.
- ``Agent(Explore)`` / ``Task(Explore)``: the ``subagent_type`` of an Agent call.
- ``mcp__server`` (or ``mcp__server__*``): every tool of that MCP server;
  ``mcp__server__tool``: that tool.
- ``WebFetch(domain:example.com)``: the URL's host or a subdomain of it.

A bare ``Tool`` (or ``Tool(*)``) matches every use of the tool. A specifier this module does
not understand for a tool matches nothing. Tool names match exactly, as in Claude Code (case
matters: ``bash(rm:*)`` and ``BASH(rm:*)`` name no tool); a ``*`` in the tool name of a deny or
ask rule is a glob over tool names (``*`` = every tool, ``mcp__*``).

``parse_rules`` checks each rule as Claude Code does and skips the invalid ones with a warning
that names the rule and its source (``rule_problem`` says what is wrong), so one bad rule never
drops the others. See ``docs/bash-permissions.md`` ("Rule syntax").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from subagents.permissions.globs import path_matches

AGENT_TOOL_NAMES = frozenset({"Agent", "Task"})
EDIT_TOOL_NAMES = frozenset({"Edit", "Write", "NotebookEdit"})
READ_TOOL_NAMES = frozenset({"Read", "Glob", "Grep"})
FILE_TOOL_NAMES = EDIT_TOOL_NAMES | READ_TOOL_NAMES

# Which tools a rule for the key also governs (a rule for any other name covers that tool only).
_FAMILIES: dict[str, frozenset[str]] = {
    "Read": READ_TOOL_NAMES,
    "Edit": EDIT_TOOL_NAMES,
    **{name: AGENT_TOOL_NAMES for name in AGENT_TOOL_NAMES},
}
_PATH_FIELDS = ("file_path", "notebook_path", "path")
_RULE = re.compile(r"(?P<tool>[^()\s]+)(?:\((?P<spec>.*)\))?", re.DOTALL)


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """One rule: the tool it names, its specifier (None = every use) and where it came from."""

    tool: str
    specifier: str | None = None
    source: str | None = None
    """The settings file (or ``--allowedTools``, ``session``...) that holds the rule."""

    def __str__(self) -> str:
        return self.tool if self.specifier is None else f"{self.tool}({self.specifier})"

    def origin(self) -> str:
        """`` from <source>`` for messages, or nothing when the source is unknown."""
        return f" from {self.source}" if self.source else ""


@dataclass(frozen=True, slots=True)
class RuleScope:
    """Where relative patterns of file rules are anchored."""

    project_root: Path
    home: Path


def parse_rule(text: str, source: str | None = None) -> PermissionRule:
    """Parse ``Tool`` or ``Tool(specifier)``; ``ValueError`` naming the rule and its source."""
    problem = rule_problem(text)
    if problem is not None:
        where = f" in {source}" if source else ""
        raise ValueError(f"invalid permission rule {text!r}{where}: {problem}")
    match = _RULE.fullmatch(text.strip())
    assert match is not None  # rule_problem checked the shape
    spec = match.group("spec")
    if spec is not None:
        spec = spec.strip()
        if spec == "*":
            spec = None  # `Bash(*)` means every use, as a bare `Bash` does
    return PermissionRule(tool=match.group("tool"), specifier=spec, source=source)


def parse_rules(
    texts: Iterable[str], source: str | None, *, behavior: str = "allow"
) -> tuple[list[PermissionRule], list[str]]:
    """The valid rules of ``texts``, and one warning (naming rule and source) per invalid one."""
    rules: list[PermissionRule] = []
    warnings: list[str] = []
    where = f"{source}: permissions.{behavior}" if source else f"permissions.{behavior}"
    for text in texts:
        problem = rule_problem(text, behavior=behavior)
        if problem is None:
            rules.append(parse_rule(text, source))
        else:
            warnings.append(f"{where}: invalid permission rule {text!r} was skipped: {problem}")
    return rules, warnings


_TOOL_NAMES = (
    "Bash Read Edit Write Glob Grep NotebookEdit NotebookRead MultiEdit LS WebFetch WebSearch "
    "Agent Task TaskOutput TaskStop KillShell BashOutput SendMessage TodoWrite ExitPlanMode "
    "EnterPlanMode Skill SlashCommand ToolSearch TeamCreate TeamDelete TaskCreate TaskUpdate "
    "TaskList TaskGet EnterWorktree ExitWorktree AskUserQuestion LSP ListMcpResourcesTool "
    "ReadMcpResourceTool"
)
KNOWN_TOOL_NAMES = frozenset(_TOOL_NAMES.split())
"""Claude Code's built-in tool names (and ours): a differently cased spelling is a typo."""
_BY_FOLDED_NAME = {name.lower(): name for name in KNOWN_TOOL_NAMES}
_SHAPE = "a rule is 'Tool' or 'Tool(content)' and ends at the closing ')'"


def rule_problem(text: str, *, behavior: str = "deny") -> str | None:
    """Why ``text`` is not a valid rule (Claude Code's checks), or None when it is."""
    stripped = text.strip()
    if not stripped:
        return "the rule is empty"
    match = _RULE.fullmatch(stripped)
    if match is None:
        return f"malformed rule: {_SHAPE}"
    tool, spec = match.group("tool"), match.group("spec")
    return _tool_problem(tool, spec, stripped, behavior) or _spec_problem(tool, spec)


def _tool_problem(tool: str, spec: str | None, text: str, behavior: str) -> str | None:
    rest = text[len(tool) :]
    if tool.startswith("mcp__"):
        return "MCP rules take no '(...)' part" if spec is not None else None
    if "*" in tool:
        if behavior == "allow":
            return "a wildcard tool name is allowed only in deny and ask rules"
        return None
    known = _BY_FOLDED_NAME.get(tool.lower())
    if tool[0].islower():
        hint = known or tool[0].upper() + tool[1:]
        return (
            "tool names start with an upper-case letter and are case-sensitive; "
            f"did you mean {hint + rest!r}?"
        )
    if known is not None and known != tool:
        return f"tool names are case-sensitive; did you mean {known + rest!r}?"
    return None


def _spec_problem(tool: str, spec: str | None) -> str | None:
    if spec is None:
        return None
    content = spec.strip()
    if not content:
        return f"empty parentheses: write {tool!r} for every use, or put a pattern inside"
    if content.count(")") > content.count("("):
        return f"malformed rule: an unmatched ')' ({_SHAPE})"
    if tool == "Bash" and ":*" in content:
        if content == ":*":
            return "the prefix before ':*' is empty: put a command prefix before it"
        if not content.endswith(":*"):
            return "':*' must be at the end (or use '*' as a wildcard)"
    return None


def covers_tool(rule: PermissionRule, names: Sequence[str]) -> bool:
    """Whether the rule's tool part names this tool (``names``: the name and its aliases)."""
    if rule.tool.startswith("mcp__"):
        return any(_mcp_matches(rule.tool, name) for name in names)
    if "*" in rule.tool:
        return any(fnmatchcase(name, rule.tool) for name in names)
    family = _FAMILIES.get(rule.tool, frozenset({rule.tool}))
    return any(name in family for name in names)


def rule_matches(
    rule: PermissionRule, names: Sequence[str], args: BaseModel, scope: RuleScope, cwd: Path
) -> bool:
    """Whether the rule governs this call of a non-Bash tool (Bash: use ``bash_rule_matches``)."""
    if not covers_tool(rule, names):
        return False
    spec = rule.specifier
    if spec is None:
        return True
    if rule.tool.startswith("mcp__"):
        return False  # MCP rules take no specifier
    if rule.tool in AGENT_TOOL_NAMES:
        return _string_field(args, "subagent_type") == spec
    if rule.tool in FILE_TOOL_NAMES:
        path = tool_path(args, cwd)
        return path is not None and path_matches(spec, path, scope, directory=_searches(args))
    if rule.tool == "WebFetch" and spec.startswith("domain:"):
        return _domain_matches(spec.removeprefix("domain:"), _string_field(args, "url"))
    return False


def bash_rule_matches(rule: PermissionRule, command: str) -> bool:
    """Whether a ``Bash`` rule matches one simple command."""
    if not covers_tool(rule, ("Bash",)):
        return False
    return rule.specifier is None or bash_specifier_matches(rule.specifier, command)


def bash_rule_may_match(rule: PermissionRule, literal_prefix: str) -> bool:
    """Whether the rule could match a command whose words after ``literal_prefix`` are computed.

    ``git push $F`` may be ``git push --force``: a rule whose literal head and the command's
    literal prefix agree as far as both go may match once the words are known.
    """
    if not covers_tool(rule, ("Bash",)):
        return False
    if rule.specifier is None:
        return True
    head = " ".join(rule_literal_head(rule.specifier).split())
    prefix = " ".join(literal_prefix.split())
    return head.startswith(prefix) or prefix.startswith(head)


def rule_literal_head(spec: str) -> str:
    """The part of a Bash specifier before its first wildcard (``git push:*`` → ``git push``)."""
    body = spec[:-2] if spec.endswith(":*") else spec
    return body.split("*", 1)[0]


def rule_program(rule: PermissionRule) -> str | None:
    """The program a Bash rule names (``Bash(rm -rf:*)`` → ``rm``), if it names one literally."""
    if rule.specifier is None or not covers_tool(rule, ("Bash",)):
        return None
    words = rule_literal_head(rule.specifier).split()
    if not words or words[0] != rule.specifier.split()[0].removesuffix(":*"):
        return None  # the first word itself holds a wildcard
    return words[0].rsplit("/", 1)[-1]


def bash_specifier_matches(spec: str, command: str) -> bool:
    """``prefix:*`` at a word boundary, ``*`` wildcards, or an exact command."""
    # Runs of whitespace are not significant to the shell between words; ignoring them keeps
    # `rm  -rf /` from slipping past an exact deny rule for `rm -rf /`.
    command, spec = " ".join(command.split()), " ".join(spec.split())
    if spec.endswith(":*"):
        pattern = re.escape(spec[:-2].rstrip()) + r"(?:\s.*)?"
    elif "*" in spec:
        pattern = _bash_wildcard(spec)
    else:
        return command == spec
    return re.fullmatch(pattern, command, re.DOTALL) is not None


def is_prefix_rule(rule: PermissionRule) -> bool:
    """A rule that matches more than one exact command (bare, ``:*`` or wildcard)."""
    return rule.specifier is None or "*" in rule.specifier


def tool_path(args: BaseModel, cwd: Path) -> Path | None:
    """The absolute, resolved path a file tool call targets (Glob/Grep default: ``cwd``)."""
    fields = type(args).model_fields
    for name in _PATH_FIELDS:
        if name in fields:
            raw = getattr(args, name)
            if raw is None and name == "path":
                return cwd.resolve(strict=False)
            if isinstance(raw, str) and raw.strip():
                path = Path(raw).expanduser()
                return (path if path.is_absolute() else cwd / path).resolve(strict=False)
    return None


def _searches(args: BaseModel) -> bool:
    """Glob and Grep name a directory to search: a rule covering its contents covers them."""
    fields = type(args).model_fields
    return "path" in fields and "file_path" not in fields and "notebook_path" not in fields


def _bash_wildcard(spec: str) -> str:
    trailing = spec.endswith(" *")
    body = spec[:-2] if trailing else spec
    pattern = ".*".join(re.escape(part) for part in body.split("*"))
    return pattern + (r"(?:\s.*)?" if trailing else "")


def _mcp_matches(rule_tool: str, tool_name: str) -> bool:
    parts = rule_tool.split("__")
    if len(parts) == 2 or (len(parts) == 3 and parts[2] == "*"):
        return tool_name.startswith(f"mcp__{parts[1]}__")
    return tool_name == rule_tool


def _string_field(args: BaseModel, name: str) -> str | None:
    value: Any = getattr(args, name, None)
    return value if isinstance(value, str) else None


def _domain_matches(domain: str, url: str | None) -> bool:
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    domain = domain.lower()
    return host == domain or host.endswith("." + domain)
