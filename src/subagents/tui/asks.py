"""Permission prompts of an interactive session: one queue for every agent's asks.

``AskQueue.ask`` is the session's ``AskCallback`` (``SessionOptions.ask_callback``). The
``PermissionChecker`` calls it for the main agent's asks and routes background children's asks
to it too (SPEC §13, ``route_background_asks``); each waits here, first come first shown, until a
person answers it or the checker's bound (``ask_timeout``) runs out, which the checker turns into
a deny. A foreground ask whose turn is interrupted is withdrawn (its waiting task is
cancelled). The UI shows ``pending[0]`` and calls ``answer``.

Answers: allow once; allow for this session (the suggested rule is added to the permission
context of every agent of the session, running or started later, and carried to a teammate's
session by its relay — the checker still decides every later call, so a rule never allows what
the checker cannot see); allow always (the same, and the rule saved to
``.claude/settings.local.json``); deny with a reason, which the model reads.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from subagents.permissions.checker import AskAnswer, PermissionChecker, PermissionRequest
from subagents.permissions.rules import PermissionRule, parse_rule
from subagents.tui.local_settings import LocalSettingsError, add_allow_rule

Choice = Literal["once", "session", "always", "deny"]
_SUBCOMMAND = re.compile(r"[a-z][a-z0-9-]*")
"""``push`` in ``git push``; ``f0.txt`` in ``touch f0.txt`` is an argument, not one."""
_SHELL_SYNTAX = re.compile(r"[;&|<>$`(){}\[\]*?!~\\\n'\"#]")


@dataclass(kw_only=True)
class PendingAsk:
    """One waiting permission prompt."""

    request: PermissionRequest
    future: asyncio.Future[AskAnswer]
    since: float = field(default_factory=time.monotonic)

    @property
    def who(self) -> str:
        """The asking agent: ``main agent``, or ``Explore a1b2c3d4 (background)``."""
        agent = self.request.agent
        if agent.parent_agent_id is None:
            return "main agent"
        where = " (background)" if self.request.background else ""
        return f"{agent.agent_type} {agent.agent_id}{where}"

    @property
    def rule(self) -> str:
        return suggested_rule(self.request)


def suggested_rule(request: PermissionRequest) -> str:
    """The allow rule "don't ask again" adds: for a simple shell command its program (and
    subcommand) as a prefix rule, ``Bash(git push:*)``; for a command with shell syntax the
    exact command; for any other tool the tool itself."""
    if request.tool_name != "Bash":
        return request.tool_name
    command = str(request.input.get("command", "")).strip()
    if not command or _SHELL_SYNTAX.search(command):
        return f"Bash({command})"
    words = command.split()
    head = words[:2] if len(words) > 1 and _SUBCOMMAND.fullmatch(words[1]) else words[:1]
    return f"Bash({' '.join(head)}:*)"


@dataclass(kw_only=True)
class AskQueue:
    """Every agent's permission asks, answered by a person (see the module docstring)."""

    checker: Callable[[], PermissionChecker]
    """The session's checker (it changes with ``/clear`` and ``/resume``)."""
    project: Path
    on_change: Callable[[], None] = lambda: None
    notify: Callable[[str], None] = lambda _text: None
    """Tells the person something about an answer (a rule saved, a file that could not be)."""
    pending: list[PendingAsk] = field(default_factory=list)

    async def ask(self, request: PermissionRequest) -> bool | AskAnswer:
        future: asyncio.Future[AskAnswer] = asyncio.get_running_loop().create_future()
        entry = PendingAsk(request=request, future=future)
        self.pending.append(entry)
        self.on_change()
        try:
            return await future
        finally:
            if entry in self.pending:
                self.pending.remove(entry)
                self.on_change()

    @property
    def current(self) -> PendingAsk | None:
        return self.pending[0] if self.pending else None

    def answer(self, entry: PendingAsk, choice: Choice, reason: str = "") -> None:
        """Answer ``entry``; an allow for the session also answers the same call waiting
        behind it (several children asking for one thing at once)."""
        if choice == "deny":
            message = reason.strip() or "the user said no"
            self._resolve(entry, AskAnswer(allow=False, message=f"denied by the user: {message}"))
            return
        added: tuple[PermissionRule, ...] = ()
        if choice in ("session", "always"):
            added = self._allow_rule(entry.rule, save=choice == "always")
        answer = AskAnswer(allow=True, added_rules=added)
        self._resolve(entry, answer)
        if choice != "once":
            for other in list(self.pending):
                if _same_call(other.request, entry.request):
                    self._resolve(other, answer)

    def _resolve(self, entry: PendingAsk, answer: AskAnswer) -> None:
        if entry in self.pending:
            self.pending.remove(entry)
        if not entry.future.done():
            entry.future.set_result(answer)
        self.on_change()

    def _allow_rule(self, text: str, *, save: bool) -> tuple[PermissionRule, ...]:
        """The rule "don't ask again" adds, for every agent of the session (the answer carries
        it, so a teammate's session gets it too: ``AskAnswer.added_rules``)."""
        try:
            rule = parse_rule(text, "the permission prompt")
        except ValueError as exc:
            self.notify(f"allowed once: {exc}")
            return ()
        self.checker().add_session_rules((rule,))
        if not save:
            self.notify(f"allowed for this session: {text}")
            return (rule,)
        try:
            path = add_allow_rule(self.project, text)
        except LocalSettingsError as exc:
            self.notify(f"allowed for this session only: {exc}")
        else:
            self.notify(f"allowed always: {text} (saved to {path})")
        return (rule,)


def _same_call(a: PermissionRequest, b: PermissionRequest) -> bool:
    return a.tool_name == b.tool_name and a.input == b.input
