"""The forms of one simple command that ``deny`` and ``ask`` rules are matched against.

A deny rule ``Bash(rm:*)`` is meant to stop ``rm``, however it is spelled. Splitting compound
commands (``bash_parse.split_commands``) handles ``a && rm x``; this module handles the spellings
of a single command that run ``rm`` while starting with another word: leading variable
assignments (``FOO=1 rm x``), a path to the program (``/bin/rm x``), and wrappers that run their
arguments as a command (``sudo``, ``env``, ``xargs``, ``timeout 5``, ``nohup``, ``nice``,
``command``, ``exec``, ``time``...). Each unwrapping step adds a form; a deny or ask rule that
matches any form applies. Allow rules are matched only against the command as written, so
unwrapping can only ever make a decision stricter.
"""

from __future__ import annotations

import shlex

from subagents.tools.bash_parse import ASSIGNMENT
from subagents.tools.bash_readonly import XARGS_VALUE_OPTIONS

# Wrapper → options of it that take a separate value (so the value is not taken as the command).
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}),
    "env": frozenset({"-u", "-C", "-S"}),
    "xargs": XARGS_VALUE_OPTIONS,
    "nice": frozenset({"-n"}),
    "nohup": frozenset(),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "time": frozenset({"-f", "-o"}),
    "stdbuf": frozenset(),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "doas": frozenset({"-u", "-C"}),
}
_TAKES_POSITIONAL = frozenset({"timeout"})  # `timeout 5 CMD`: the duration comes first


def command_forms(command: str) -> list[str]:
    """``command`` as written, then each form with one more wrapper/assignment/path removed."""
    forms = [command.strip()]
    words = _words(command)
    while words:
        stripped = _strip_one(words)
        if stripped is None or stripped == words:
            break
        words = stripped
        form = " ".join(words)
        if form and form not in forms:
            forms.append(form)
    return forms


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=False, posix=True)
    except ValueError:  # unbalanced quotes: fall back to whitespace words
        return command.split()


def _strip_one(words: list[str]) -> list[str] | None:
    head = words[0]
    if ASSIGNMENT.match(head):
        return words[1:]
    program = head.rsplit("/", 1)[-1]
    if program != head:
        return [program, *words[1:]]
    options = _WRAPPERS.get(program)
    if options is None:
        return None
    index = 1
    while index < len(words) and (words[index].startswith("-") or ASSIGNMENT.match(words[index])):
        index += 2 if words[index] in options else 1
    if program in _TAKES_POSITIONAL and index < len(words):
        index += 1
    return words[index:]
