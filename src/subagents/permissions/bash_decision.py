"""The Bash half of a permission decision: the command is analysed (``tools.bash_commands``)
into every program it runs and each is checked against the rules (``commands.py``).

Its own module, imported at the first Bash call: the shell parser, the analysis and the program
tables are ~5 % of a ``-p`` start-up, and a run may never call Bash.
"""

from __future__ import annotations

from subagents.permissions.commands import (
    bash_rules,
    deny_or_ask_hit,
    invocation_allowed,
    unknown_runner,
)
from subagents.permissions.context import PermissionContext
from subagents.permissions.rules import bash_rule_matches, is_prefix_rule
from subagents.permissions.verdicts import (
    Decision,
    ask_by_rule,
    bash_subject,
    denied_by_rule,
    plan_denial,
)
from subagents.tools.bash_commands import Analysis, analyze
from subagents.tools.bash_readonly import READ_ONLY_MAX_CHARS, analysis_read_only


def decide_bash(context: PermissionContext, command: str) -> Decision:
    analysis = analyze(command)
    subject = bash_subject(command)
    hit = deny_or_ask_hit(context.deny, analysis)
    if hit is not None and hit.certain:
        return denied_by_rule(hit.rule, bash_subject(hit.part))
    if context.mode == "plan" and not _read_only(command, analysis):
        return plan_denial(subject)
    if hit is not None:  # a deny rule may match once computed words are known
        return ask_by_rule(hit.rule, bash_subject(hit.part), _MAY_MATCH)
    if hit := deny_or_ask_hit(context.ask, analysis):
        return ask_by_rule(hit.rule, bash_subject(hit.part), "" if hit.certain else _MAY_MATCH)
    if unseen := _unseen(context, analysis):
        return unseen
    if context.mode == "bypassPermissions":
        return Decision(behavior="allow", subject=subject)
    if any(not is_prefix_rule(r) and bash_rule_matches(r, command) for r in context.allow):
        return Decision(behavior="allow", subject=subject)  # an exact rule for the whole line
    for invocation in analysis.invocations:
        if not invocation_allowed(invocation, context.allow):
            part = bash_subject(invocation.command.source or invocation.forms[0].text)
            return Decision(behavior="ask", message=f"{part} needs approval.", subject=part)
    if analysis.opaque:
        reason = analysis.opaque[0]
        return Decision(
            behavior="ask", message=f"{subject} needs approval: {reason}.", subject=subject
        )
    return Decision(behavior="allow", subject=subject)


_MAY_MATCH = "part of it is computed when it runs and may turn out to match"


def _read_only(command: str, analysis: Analysis) -> bool:
    return len(command) <= READ_ONLY_MAX_CHARS and analysis_read_only(analysis)


def _unseen(context: PermissionContext, analysis: Analysis) -> Decision | None:
    """An ask when a deny/ask rule could apply to a part the checker cannot see."""
    rules = [r for r in bash_rules((*context.deny, *context.ask)) if r.specifier is not None]
    if not rules:
        return None
    subject = bash_subject(analysis.command)
    if analysis.opaque:
        rule = rules[0]
        message = (
            f"{subject} needs approval: {analysis.opaque[0]}, so it cannot be checked against "
            f"rule '{rule}'{rule.origin()}."
        )
        return Decision(behavior="ask", message=message, rule=rule, subject=subject)
    runner = unknown_runner(rules, analysis)
    if runner is not None:
        part = bash_subject(runner.part)
        named = f"rule '{runner.rule}'{runner.rule.origin()}"
        if runner.stored is not None:
            message = (
                f"{part} needs approval: {runner.stored} is set to text that names what {named} "
                "covers, and a program may run it as a command."
            )
        else:
            message = (
                f"{part} needs approval: it is not a program this checker knows, and an "
                f"argument names what {named} covers; it may run it."
            )
        return Decision(behavior="ask", message=message, rule=runner.rule, subject=part)
    return None
