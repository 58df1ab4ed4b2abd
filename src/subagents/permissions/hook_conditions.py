"""Matching a hook handler's ``if`` (one permission rule) against a tool call.

Claude Code's hooks reference: the hook runs only if the call matches the rule; for Bash,
leading ``VAR=value`` assignments are stripped, every subcommand is checked and so are the
commands inside ``$()`` and backticks; a dynamic command name (``$TOOL git push``) runs the
hook; a pattern naming more than the command (``git push *``) runs it whenever the command
holds ``$()``, backticks or ``$VAR``; a command that cannot be read runs it. One rule matches one
tool's calls (``Edit(...)`` is not ``Write``; ``Agent``/``Task`` are one tool). It is a filter, not
a permission: every doubt runs the hook, which then decides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final

from pydantic import BaseModel, create_model

from subagents.hooks.matchers import ToolCall
from subagents.permissions.rules import (
    PermissionRule,
    RuleScope,
    bash_specifier_matches,
    covers_tool,
    parse_rule,
    rule_matches,
)

_AGENT_ALIASES: Final = ("Agent", "Task")
_EXPANSION: Final = re.compile(r"\$[({A-Za-z_]|`")


class PermissionRuleConditions:
    """``hooks.matchers.CallConditions`` with Claude Code's permission-rule matching."""

    def holds(self, rule: str, call: ToolCall) -> bool:
        try:
            parsed = _parse(rule)
        except ValueError:
            return True  # not a rule: the hook runs (a warning said so at load)
        names = [call.tool_name, *(_AGENT_ALIASES if call.tool_name in _AGENT_ALIASES else ())]
        mcp = parsed.tool.startswith("mcp__") and covers_tool(parsed, [call.tool_name])
        if parsed.tool not in names and not mcp:
            return False
        if parsed.specifier is None:
            return True
        if parsed.tool == "Bash":
            command = call.tool_input.get("command")
            return isinstance(command, str) and bash_condition(parsed.specifier, command)
        return _other_condition(parsed, call)


@lru_cache(maxsize=256)
def _parse(rule: str) -> PermissionRule:
    return parse_rule(rule)


def bash_condition(spec: str, command: str) -> bool:
    """Whether a ``Bash(spec)`` condition selects ``command`` (Claude Code's Bash table)."""
    names_more_than_command = len(spec.removesuffix(":*").removesuffix(" *").split()) > 1
    if names_more_than_command and _EXPANSION.search(command):
        return True  # what `$(...)` or `$VAR` expands to cannot be seen
    from subagents.tools.bash_parse import parse_script  # the shell parser, at first use

    script = parse_script(command)  # every simple command, substitutions included
    if script.opaque:
        return True  # cannot be read: run the hook, let it decide
    if bash_specifier_matches(spec, command):
        return True
    for simple in script.commands:
        if not simple.words:
            continue  # assignments only
        if simple.words[0].dynamic:
            return True  # a dynamic command name (`$TOOL git push`)
        # Leading `VAR=value` assignments are not words: the command starts at its program.
        if bash_specifier_matches(spec, " ".join(word.text for word in simple.words)):
            return True
    return False


def _other_condition(rule: PermissionRule, call: ToolCall) -> bool:
    args = _input_view(call.tool_input)
    scope = RuleScope(project_root=call.project_root, home=call.home)
    try:
        return rule_matches(rule, [rule.tool], args, scope, call.cwd)
    except (OSError, ValueError, RuntimeError):
        return True  # a path that cannot be resolved: run the hook, let it decide


def _input_view(tool_input: Mapping[str, Any]) -> BaseModel:
    """The raw input as a model whose fields are its keys (what rule matching reads)."""
    keys = tuple(sorted(key for key in tool_input if key.isidentifier()))
    return _input_model(keys).model_validate({key: tool_input[key] for key in keys})


@lru_cache(maxsize=64)
def _input_model(keys: tuple[str, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = {key: (Any, None) for key in keys}
    return create_model("HookToolInput", **fields)
