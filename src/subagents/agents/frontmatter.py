"""Claude Code's frontmatter reading rules, reproduced: where the block is, how broken YAML is
retried, and how the loosely typed values of real-world agent files are read.

Sources (Claude Code's ``frontmatterParser.ts``, ``markdownConfigLoader.ts``,
``permissionSetup.ts``, ``loadAgentsDir.ts``, as published in public mirrors; see
``docs/agents.md`` for what was found and what we chose):

* The block opens on the very first line (``---``) and closes at the next ``---``. Claude
  Code's pattern also closes at a ``---`` *inside* a line, silently cutting the frontmatter
  (and with it, often, the ``tools`` line: a permission widening); we close only at a line made
  of three or more dashes, which keeps the long dash rules some files use.
* When the YAML does not parse, it is parsed once more with every top-level ``key: value``
  line whose value holds a YAML-special character (``{}[]*&#!|>%@``` or ``": "``) and is not
  already fully quoted rewritten as a double-quoted string (``quote_problematic_values``). That
  is how ``description: Use when: ...``, ``tools: *`` and ``description: "a" b`` load there.
* Tool lists (``split_tool_list``): a string or a list of strings, split on commas *and spaces*,
  with parentheses kept together (``Bash(git add *, git commit *)`` is one entry).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from subagents.config_files import ConfigSyntaxError

_DASH_RULE: Final = re.compile(r"-{3,}[ \t]*")
_YAML_SPECIAL: Final = re.compile(r"[{}\[\]*&#!|>%@`]|: ")
_SIMPLE_ENTRY: Final = re.compile(r"^([a-zA-Z_-]+):\s+(.+)$")
_TOP_LEVEL_KEY: Final = re.compile(r"^([^\s#:][^:]*?)\s*:(?:\s|$)")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass(frozen=True, slots=True)
class Frontmatter:
    """The YAML text between the ``---`` lines and the Markdown body after them."""

    yaml_text: str
    body: str


def split_frontmatter(text: str) -> Frontmatter | str | None:
    """The block, ``None`` when the file has no frontmatter at its top, or a string saying why
    an opened block is broken (it never closes)."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None
    for index in range(1, len(lines)):
        if _DASH_RULE.fullmatch(lines[index].rstrip("\r\n")):
            return Frontmatter("".join(lines[1:index]), "".join(lines[index + 1 :]))
    return "the YAML frontmatter opened by '---' on line 1 has no closing '---' line"


def load_frontmatter(yaml_text: str) -> Any:
    """The parsed YAML, with Claude Code's one retry; ``ConfigSyntaxError`` if both fail
    (the error of the *first* attempt, whose line numbers match the file)."""
    from subagents.config_yaml import load_yaml  # PyYAML only when a definition has YAML

    try:
        return load_yaml(yaml_text)
    except ConfigSyntaxError as first:
        if first.bound:
            raise
        retried = quote_problematic_values(yaml_text)
        if retried == yaml_text:
            raise
        try:
            return load_yaml(retried)
        except ConfigSyntaxError:
            raise first from None


def quote_problematic_values(yaml_text: str) -> str:
    """Claude Code's retry: quote plain top-level values that hold YAML-special characters."""
    lines = []
    for line in yaml_text.split("\n"):
        match = _SIMPLE_ENTRY.match(line.rstrip("\r"))
        if match is not None:
            key, value = match.groups()
            fully_quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'"
            if not fully_quoted and _YAML_SPECIAL.search(value):
                escaped = value.replace("\\", "\\\\").replace('"', '\\"')
                line = f'{key}: "{escaped}"'
        lines.append(line)
    return "\n".join(lines)


def key_lines(yaml_text: str) -> dict[str, int]:
    """1-based file line of each top-level key (the opening ``---`` is line 1); best effort,
    read from the text so it works on files the YAML parser refused."""
    found: dict[str, int] = {}
    for number, line in enumerate(yaml_text.splitlines(), start=2):
        match = _TOP_LEVEL_KEY.match(line)
        if match is not None:
            found.setdefault(match.group(1).strip().strip("'\""), number)
    return found


def split_tool_list(value: Any) -> tuple[str, ...] | None:
    """A frontmatter tool list, read as Claude Code reads ``tools``.

    Absent (``None`` passed by the caller for a missing key is *not* this function's input)
    is handled by the caller; here: ``None``/empty/any non-string, non-list value → ``()`` (no
    tools); a ``*`` entry → ``None`` (every tool); else the entries."""
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, list):
        items = [item for item in value if isinstance(item, str)]
    else:
        return ()
    entries = [entry for item in items for entry in _split_entries(item)]
    return None if "*" in entries else tuple(entries)


def _split_entries(text: str) -> list[str]:
    """Split on ``,`` and `` `` outside parentheses (Claude Code's ``parseToolListFromCLI``)."""
    entries: list[str] = []
    current: list[str] = []
    in_parens = False
    for char in text:
        if char in "()":
            in_parens = char == "("
        elif char in ", " and not in_parens:
            entries.append("".join(current))
            current = []
            continue
        current.append(char)
    entries.append("".join(current))
    return [entry.strip() for entry in entries if entry.strip()]


def positive_int(value: Any) -> int | None:
    """Claude Code's ``parsePositiveIntFromFrontmatter``: a whole number > 0, from a number or
    from the leading digits of a string (JavaScript ``parseInt``); ``None`` otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        match = re.match(r"\s*([+-]?\d+)", value)
        value = int(match.group(1)) if match else None
    return value if isinstance(value, int) and value > 0 else None


def clean_name(name: str) -> str:
    """An agent name with control characters (newlines, NUL ...) replaced by spaces, trimmed:
    any other text is a valid name, but a line break in one could forge lines of the text the
    model is shown."""
    return _CONTROL.sub(" ", name).strip()
