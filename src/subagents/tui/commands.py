"""Slash commands of the interactive session.

A line starting with ``/`` is a command, not a prompt (``//text`` sends ``/text``). Each
handler acts on the ``Conversation`` (and through it the ``Session``) and returns Markdown for
the chat; a command it cannot carry out says why. ``/compact [instructions]`` summarises the
held session between turns (``Session.compact``); the next turn continues from the summary.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from subagents.agents.tasks import TaskState
from subagents.cli.progress import human_tokens
from subagents.cli.session_plan import recent_sessions
from subagents.session import Session
from subagents.tui.conversation import Conversation

HELP = """\
| command | what it does |
|---|---|
| `/agents` | the agent types this session can start (name, source, description) |
| `/tasks` | this session's tasks: agents and shells, running and finished |
| `/stop ID` | stop a task (an id, the start of one, or an agent's name) |
| `/resume [ID]` | continue an earlier session of this project (no id: list them) |
| `/clear` | start a new conversation (this one stays resumable) |
| `/model [NAME]` | show or switch the main agent's model |
| `/permissions [allow\\|deny\\|ask RULE \\| mode MODE]` | show or change the rules |
| `/compact [INSTRUCTIONS]` | summarise the conversation to free context (what to keep: optional) |
| `/help` | this list |
| `/quit` | end the session (children are stopped, everything is saved) |

Keys: **Enter** sends, **Shift+Enter** or **Ctrl+J** adds a line, **Up/Down** walk the
history, **Esc** interrupts the turn (background agents go on), **Ctrl+C** twice quits,
**Tab** moves to the agents panel (Enter opens an agent)."""


class CommandError(Exception):
    """A command that cannot be carried out; the message says why."""


@dataclass(kw_only=True)
class CommandContext:
    conversation: Conversation
    quit: Callable[[], Awaitable[None]]
    choose_model: Callable[[str], str] = lambda name: name
    """A ``/model`` argument → the model spec to run (Claude names map like ``--model``)."""

    @property
    def session(self) -> Session:
        session = self.conversation.session
        if session is None:
            raise CommandError("no session is open")
        return session


Handler = Callable[[CommandContext, str], Awaitable[str]]


def parse(line: str) -> tuple[str, str] | None:
    """``/name args`` → (name, args); None for a prompt (``//x`` is the prompt ``/x``)."""
    text = line.strip()
    if not text.startswith("/") or text.startswith("//"):
        return None
    name, _, rest = text[1:].partition(" ")
    return name.lower(), rest.strip()


def prompt_text(line: str) -> str:
    text = line.strip()
    return text[1:] if text.startswith("//") else line


async def run_command(name: str, args: str, ctx: CommandContext) -> str:
    handler = COMMANDS.get(name)
    if handler is None:
        known = ", ".join(f"/{n}" for n in COMMANDS)
        return f"Unknown command `/{name}`. Commands: {known}"
    try:
        return await handler(ctx, args)
    except CommandError as exc:
        return f"`/{name}`: {exc}"
    except Exception as exc:  # a failing command must not end the session
        return f"`/{name}` failed: {type(exc).__name__}: {exc}"


async def _help(_ctx: CommandContext, _args: str) -> str:
    return HELP


async def _agents(ctx: CommandContext, _args: str) -> str:
    definitions = ctx.session.runtime.definitions
    lines = ["| agent | source | description |", "|---|---|---|"]
    for definition in definitions.definitions.values():
        about = " ".join(definition.description.split())[:120]
        lines.append(f"| `{definition.name}` | {definition.source} | {_cell(about)} |")
    for error in definitions.errors:
        lines.append(f"| (skipped) | {_cell(error.file)} | {_cell(error.message)} |")
    return "\n".join(lines)


async def _tasks(ctx: CommandContext, _args: str) -> str:
    tasks = ctx.session.registry.list()
    if not tasks:
        return "No tasks in this session yet."
    lines = ["| id | type | status | description | elapsed |", "|---|---|---|---|---|"]
    lines.extend(_task_row(task) for task in tasks)
    return "\n".join(lines)


def _task_row(task: TaskState) -> str:
    start = task.started_at or task.created_at
    elapsed = (task.ended_at or time.time()) - start
    kind = (
        "agent"
        if task.type == "local_agent"
        else "shell"
        if task.type == "local_bash"
        else task.type
    )
    return f"| `{task.id}` | {kind} | {task.status} | {_cell(task.description)} | {elapsed:.1f} s |"


async def _stop(ctx: CommandContext, args: str) -> str:
    if not args:
        raise CommandError("which task? `/stop ID` (see `/tasks`)")
    session = ctx.session
    task_id = _find_task(session, args)
    stopped = await session.registry.kill(task_id)
    state = session.registry.get(task_id)
    if not stopped:
        return f"Task `{task_id}` had already ended ({state.status})."
    return f"Stopped task `{task_id}` ({state.description}): {state.status}."


def _find_task(session: Session, target: str) -> str:
    named = session.background.names.get(target)
    if named is not None:
        return named
    ids = [t.id for t in session.registry.list()]
    if target in ids:
        return target
    matches = [i for i in ids if i.startswith(target)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise CommandError(f"`{target}` is the start of several tasks: {', '.join(matches)}")
    raise CommandError(f"no task `{target}` in this session (see `/tasks`)")


async def _resume(ctx: CommandContext, args: str) -> str:
    session = ctx.session
    if not args:
        sessions = recent_sessions(session.state, limit=10)
        if not sessions:
            return "No earlier sessions in this project."
        lines = ["| session | last active |", "|---|---|"]
        for session_id, mtime in sessions:
            when = datetime.fromtimestamp(mtime).strftime("%Y-%m-%d %H:%M")
            lines.append(f"| `{session_id}` | {when} |")
        return "\n".join(lines) + "\n\n`/resume ID` continues one."
    try:
        uuid.UUID(args)
    except ValueError:
        raise CommandError(f"`{args}` is not a session id (see `/resume`)") from None
    if not session.state.session_transcript(args).is_file():
        raise CommandError(f"no session `{args}` in this project (see `/resume`)")
    await ctx.conversation.replace(args)
    return f"Resumed session `{args}`: the next message continues it."


async def _clear(ctx: CommandContext, _args: str) -> str:
    old = ctx.session.session_id
    new = await ctx.conversation.replace(None)
    return f"New conversation `{new.session_id}` (the last one: `/resume {old}`)."


async def _model(ctx: CommandContext, args: str) -> str:
    session = ctx.session
    if not args:
        return f"Model: `{session.model.name}`. `/model NAME` switches it."
    try:
        model = session.set_model(ctx.choose_model(args))
    except (ValueError, OSError) as exc:
        raise CommandError(str(exc)) from None
    return f"The main agent now uses `{model.name}` (from its next model call)."


async def _permissions(ctx: CommandContext, args: str) -> str:
    checker = ctx.session.permissions
    if args:
        verb, _, value = args.partition(" ")
        value = value.strip()
        if verb == "mode" and value:
            update: dict[str, object] = {"type": "setMode", "mode": value}
        elif verb in ("allow", "deny", "ask") and value:
            tool, _, rest = value.partition("(")
            rule: dict[str, object] = {"toolName": tool.strip()}
            if rest:
                rule["ruleContent"] = rest.rstrip(")")
            update = {"type": "addRules", "rules": [rule], "behavior": verb}
        else:
            raise CommandError("use `/permissions allow|deny|ask RULE` or `/permissions mode MODE`")
        try:
            checker.apply_updates([update], lambda _w: None)  # rules: every agent's
        except (ValueError, TypeError, KeyError) as exc:
            raise CommandError(str(exc)) from None
    context = checker.context
    lines = [f"Mode: `{context.mode}`", ""]
    for behavior, rules in (("allow", context.allow), ("deny", context.deny), ("ask", context.ask)):
        shown = ", ".join(f"`{r}`" for r in rules) or "none"
        lines.append(f"- **{behavior}**: {shown}")
    return "\n".join(lines)


async def _compact(ctx: CommandContext, args: str) -> str:
    if ctx.conversation.last is None and ctx.session.options.resume is None:
        raise CommandError("nothing to compact yet: the conversation has no turns")
    try:
        result = await ctx.conversation.compact(args.strip() or None)
    except (ValueError, RuntimeError) as exc:
        raise CommandError(str(exc)) from None
    if result.method == "skipped":
        return f"Not compacted: {result.error or 'a PreCompact hook blocked it'}."
    before, after = human_tokens(result.tokens_before), human_tokens(result.tokens_after)
    if result.method == "truncated":
        return (
            f"The summary failed ({result.error}); the oldest turns were dropped instead: "
            f"{before} → {after} tokens."
        )
    return f"Compacted: {before} → {after} tokens; the next turn continues from the summary."


async def _quit(ctx: CommandContext, _args: str) -> str:
    await ctx.quit()
    return "Bye."


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


COMMANDS: dict[str, Handler] = {
    "help": _help,
    "agents": _agents,
    "tasks": _tasks,
    "stop": _stop,
    "resume": _resume,
    "clear": _clear,
    "model": _model,
    "permissions": _permissions,
    "compact": _compact,
    "quit": _quit,
    "exit": _quit,
}
