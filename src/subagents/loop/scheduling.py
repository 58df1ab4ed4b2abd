"""Running one turn's tool calls: validation, grouping, bounded concurrency, ordered results.

The calls of one assistant message are split, in order, into groups: a run of consecutive
concurrency-safe calls is one group and runs concurrently (at most ``MAX_CONCURRENT_TOOLS`` at a
time); every other call is a group of its own and runs alone. Results are written into a list
indexed by call position, so they reach the model in call order whatever order they finished in.

Nothing a tool does escapes as an exception: unknown tool, invalid input, a denied permission, a
``ToolError`` or any other exception all become ``is_error`` results and the loop goes on. The one
thing that propagates is cancellation; before it does, every call without a result gets a
cancelled result, so the history stays paired (each ``tool_use`` has its ``tool_result``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from subagents.events import ProgressEvent, discard
from subagents.messages import ToolResultBlock, ToolUseBlock, tool_result_block
from subagents.observe import RunObserver
from subagents.tools.base import (
    CURRENT_TOOL_USE_ID,
    HOOK_APPROVED,
    CallInfo,
    InstantPermission,
    LoopHooks,
    Tool,
    ToolContext,
    ToolError,
    ToolInputError,
    ToolOutput,
    truncate,
)

MAX_CONCURRENT_TOOLS = 10

_new = object.__new__

CANCELLED_MESSAGE = "Tool call cancelled: the agent was stopped before this call finished."


# Positional fields (no ``kw_only``) for these two: each is built once per tool call, and a
# class called with keywords packs them into a dict and unpacks it again for ``__init__``.
@dataclass(slots=True)
class PreparedCall:
    """A tool_use block after lookup and validation."""

    index: int
    block: ToolUseBlock
    tool: Tool[Any] | None
    args: BaseModel | None
    error: str | None
    concurrency_safe: bool


@dataclass(slots=True)
class CallResult:
    """A tool call's result block, with the tool's name and output."""

    block: ToolResultBlock
    tool_name: str
    output: ToolOutput | None = None


class TurnResults:
    """Results of one turn, filled in as calls finish; gaps are filled on cancellation."""

    __slots__ = ("calls", "results")

    def __init__(self, calls: list[ToolUseBlock]) -> None:
        self.calls = calls
        self.results: list[CallResult | None] = [None] * len(calls)

    def fill_cancelled(self) -> None:
        for i, result in enumerate(self.results):
            if result is None:
                call = self.calls[i]
                self.results[i] = CallResult(
                    block=tool_result_block(call["id"], CANCELLED_MESSAGE, is_error=True),
                    tool_name=call["name"],
                )

    def completed(self) -> list[CallResult]:
        return [r for r in self.results if r is not None]


def prepare_calls(
    calls: Sequence[ToolUseBlock], tools: Mapping[str, Tool[Any]]
) -> list[PreparedCall]:
    prepared: list[PreparedCall] = []
    for index, block in enumerate(calls):
        tool, args, error = validated(block, tools)
        if args is None:
            prepared.append(_invalid(index, block, tool, error or "invalid call"))
            continue
        assert tool is not None
        try:
            safe = bool(tool.is_concurrency_safe(args))
        except Exception:  # a broken flag runs the call alone
            safe = False
        prepared.append(PreparedCall(index, block, tool, args, None, safe))
    return prepared


def validated(
    block: ToolUseBlock, tools: Mapping[str, Tool[Any]]
) -> tuple[Tool[Any] | None, BaseModel | None, str | None]:
    """(tool, validated input, None), or (the tool if known, None, the error the model reads)."""
    tool = tools.get(block["name"])
    if tool is None:
        known = ", ".join(sorted({t.name for t in tools.values()})) or "none"
        return None, None, f"No such tool available: {block['name']}. Available tools: {known}"
    try:
        return tool, tool.parse_input(block["input"]), None
    except ValidationError as exc:
        return tool, None, format_validation_error(tool.name, exc)
    except ToolInputError as exc:
        return tool, None, str(exc)


def _invalid(index: int, block: ToolUseBlock, tool: Tool[Any] | None, error: str) -> PreparedCall:
    # An invalid call touches nothing, so it never forces the calls around it to run alone.
    return PreparedCall(
        index=index, block=block, tool=tool, args=None, error=error, concurrency_safe=True
    )


def format_validation_error(tool_name: str, exc: ValidationError) -> str:
    """One line per problem, naming the field, as the model needs to fix its call."""
    lines = [f"InputValidationError: {tool_name} was called with invalid input:"]
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(input)"
        lines.append(f"- field `{where}`: {err['msg']}")
    return "\n".join(lines)


def group_calls(prepared: list[PreparedCall]) -> list[list[PreparedCall]]:
    """Consecutive concurrency-safe calls form one group; every other call is alone."""
    groups: list[list[PreparedCall]] = []
    current: list[PreparedCall] = []
    for call in prepared:
        if call.concurrency_safe:
            current.append(call)
            continue
        if current:
            groups.append(current)
            current = []
        groups.append([call])
    if current:
        groups.append(current)
    return groups


async def run_tool_calls(
    turn: TurnResults,
    tools: Mapping[str, Tool[Any]],
    ctx: ToolContext,
    max_concurrency: int = MAX_CONCURRENT_TOOLS,
) -> None:
    """Run a turn's calls into ``turn.results``; on cancellation, fill the gaps and re-raise."""
    concurrent = False
    try:
        calls = turn.calls
        if len(calls) == 1:
            turn.results[0] = await lone_call(calls[0], tools, ctx)
            return
        for group in group_calls(prepare_calls(calls, tools)):
            if len(group) == 1:
                call = group[0]
                turn.results[call.index] = await execute_call(call, ctx)
            else:
                concurrent = True
                await _run_group(group, turn, ctx, max_concurrency)
    except asyncio.CancelledError:
        turn.fill_cancelled()
        raise
    if concurrent:
        # A call task cancelled on its own (not through us) still owes the model a result; a
        # call awaited here has its result once the await returns.
        turn.fill_cancelled()


def lone_call(
    block: ToolUseBlock, tools: Mapping[str, Tool[Any]], ctx: ToolContext
) -> Coroutine[Any, Any, CallResult]:
    """The call of a one-call turn (most turns), to await; what ``run_tool_calls`` runs for it.
    A lone call is a group of its own: no ``PreparedCall`` and no ``is_concurrency_safe``
    question, whose answer only groups calls. A plain function that validates the call and
    picks its coroutine, so the loop awaits the call itself and no frame around it; a call
    cancelled meanwhile has no result, which the awaiting side fills (``fill_cancelled``)."""
    tool, args, error = validated(block, tools)
    observer = ctx.observer
    if observer is None:  # ``execute_call``, inlined
        return _execute(block, tool, args, error, ctx)
    return _observed_call(observer, block, tool, args, error, ctx)


async def _run_group(
    group: list[PreparedCall], turn: TurnResults, ctx: ToolContext, max_concurrency: int
) -> None:
    """The group's calls, each in a task of one ``TaskGroup`` (at most ``max_concurrency``
    running), but for its leading calls answered at once (``_answer_at_once``), which need
    none: a swarm's thousand background launches of one response create no task."""
    answered = _answer_at_once(group, turn, ctx)
    if answered:
        if answered == len(group):
            return
        group = group[answered:]
    limit = asyncio.Semaphore(max_concurrency) if len(group) > max_concurrency else None

    async def run(call: PreparedCall) -> None:
        if limit is None:
            turn.results[call.index] = await execute_call(call, ctx)
            return
        async with limit:
            turn.results[call.index] = await execute_call(call, ctx)

    async with asyncio.TaskGroup() as group_tasks:
        for call in group:
            group_tasks.create_task(run(call), name=f"tool:{call.block['name']}:{call.block['id']}")


def _answer_at_once(group: list[PreparedCall], turn: TurnResults, ctx: ToolContext) -> int:
    """How many of the group's leading calls were answered here, without a task, their results
    put in ``turn``: each an invalid call or one its tool answers at once (``call_at_once``),
    allowed without an awaited check, in a context with no hooks and no observer. It stops at
    the first call that needs a task, so the calls still start in their order: in a task
    group each call's first step would run in this order too, and one answered at once never
    suspends (it only starts before other tasks waiting in the loop instead of after them). A
    call cancelled here (a ``CancelledError`` from ``call_at_once``) is left without a result,
    as its cancelled task's would be (``fill_cancelled`` gives it one)."""
    if ctx.hooks is not None or ctx.observer is not None:
        return 0
    results = turn.results
    for answered, call in enumerate(group):
        block, tool, args = call.block, call.tool, call.args
        if call.error is not None or tool is None or args is None:
            results[call.index] = _error(block, call.error or "invalid call")
            continue
        if type(tool).call_at_once is Tool.call_at_once:
            return answered
        name = block["name"]
        step = "permission check"
        try:
            if not _allowed_at_once(tool, args, ctx):
                return answered
            step = "call"
            tool_use_id = block["id"]
            info = _new(CallInfo)
            info.tool_use_id = tool_use_id
            info.progress = _ignore if ctx.emit is discard else _progress_reporter(ctx, tool_use_id)
            output = tool.call_at_once(args, ctx, info)
            if output is None:
                return answered
        except asyncio.CancelledError:
            continue
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # ``_execute``'s answers, in its order
            output = _failed_output(name, step, exc)
        content = output.content
        if len(content) > tool.max_result_chars:
            content = truncate(content, tool.max_result_chars)
        result: ToolResultBlock = {
            "type": "tool_result",
            "tool_use_id": block["id"],
            "content": content,
        }
        if output.is_error:
            result["is_error"] = True
        results[call.index] = CallResult(result, name, output)
    return len(group)


def _failed_output(name: str, step: str, exc: Exception) -> ToolOutput:
    """What ``_execute`` answers for an exception its step raised."""
    if isinstance(exc, ToolError):
        return ToolOutput(content=str(exc), is_error=True)
    if isinstance(exc, ValidationError):
        return ToolOutput(content=format_validation_error(name, exc), is_error=True)
    if isinstance(exc, ToolInputError):
        return ToolOutput(content=str(exc), is_error=True)
    return ToolOutput(content=_failure(name, step, exc), is_error=True)


def execute_call(call: PreparedCall, ctx: ToolContext) -> Coroutine[Any, Any, CallResult]:
    """Permission checks, hooks and the call itself; never raises except on cancellation.
    A plain function that picks the coroutine, so an unobserved call awaits no extra frame."""
    observer = ctx.observer
    if observer is not None:
        return _observed_call(observer, call.block, call.tool, call.args, call.error, ctx)
    return _execute(call.block, call.tool, call.args, call.error, ctx)


async def _observed_call(
    observer: RunObserver,
    block: ToolUseBlock,
    tool: Tool[Any] | None,
    args: BaseModel | None,
    error: str | None,
    ctx: ToolContext,
) -> CallResult:
    """``_execute`` inside the observer's tool-call observation (telemetry's span)."""
    observation = observer.tool_call_started(ctx.agent, block["name"], block["id"], block["input"])
    try:
        result = await _execute(block, tool, args, error, ctx)
    except BaseException:
        observation.end(content="", is_error=True, cancelled=True)
        raise
    observation.end(content=_text(result.block), is_error=bool(result.block.get("is_error")))
    return result


def _text(block: ToolResultBlock) -> str:
    content = block["content"]
    return content if isinstance(content, str) else ""


async def _execute(
    block: ToolUseBlock,
    tool: Tool[Any] | None,
    args: BaseModel | None,
    error: str | None,
    ctx: ToolContext,
) -> CallResult:
    name = block["name"]
    if error is not None or tool is None or args is None:
        return _error(block, error or "invalid call")
    extra_context = ""
    step = "permission check"
    tool_use_id = block["id"]
    try:
        # ``CURRENT_TOOL_USE_ID`` is read by a permission prompt and a denial record
        # (``permissions.checker``), which only run inside an awaited check: it is set before
        # each (a ``ContextVar.set`` is ~790 instructions: not for a call allowed at once) and
        # not reset after it, since the next awaited check in this context sets it first.
        if ctx.hooks is None:  # no hook to consult: straight to the rules (one await less)
            if _allowed_at_once(tool, args, ctx):
                denial = None
            else:
                CURRENT_TOOL_USE_ID.set(tool_use_id)
                args, denial = await _check_rules(tool, args, ctx)
        else:
            CURRENT_TOOL_USE_ID.set(tool_use_id)
            args, denial, extra_context = await _authorize(tool, args, block, ctx)
        if denial is not None:
            return _error(block, denial)
        step = "call"
        # Nobody listening: progress reports are dropped here, not built into events.
        progress = _ignore if ctx.emit is discard else _progress_reporter(ctx, tool_use_id)
        # ``CallInfo(tool_use_id=..., progress=...)`` without the keyword round trip (a dict
        # packed and unpacked: ~3,000 instructions against ~1,100); both fields are set.
        info = _new(CallInfo)
        info.tool_use_id, info.progress = tool_use_id, progress
        output = await tool.call(args, ctx, info)
    except ToolError as exc:
        output = ToolOutput(content=str(exc), is_error=True)
    except ValidationError as exc:
        output = ToolOutput(content=format_validation_error(name, exc), is_error=True)
    except ToolInputError as exc:
        output = ToolOutput(content=str(exc), is_error=True)
    except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        output = ToolOutput(content=_failure(name, step, exc), is_error=True)
    content = output.content
    if len(content) > tool.max_result_chars:
        content = truncate(content, tool.max_result_chars)
    if ctx.hooks is not None:
        added = await _post_tool_use(ctx.hooks, name, block, output, ctx)
        if added:
            content = f"{content}\n\n{added}"
    if extra_context:
        content = f"{content}\n\n{extra_context}"
    result: ToolResultBlock = {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": content,
    }
    if output.is_error:  # ``tool_result_block``, inlined: this runs for every call
        result["is_error"] = True
    return CallResult(result, name, output)


async def _authorize(
    tool: Tool[Any], args: BaseModel, block: ToolUseBlock, ctx: ToolContext
) -> tuple[BaseModel, str | None, str]:
    """Hooks, the tool's own check and the session's rules; returns (args, denial, context).

    A PreToolUse hook's ``allow`` answers the *question* a rule-less call would have raised (no
    prompt is needed), but it cannot overrule a deny: deny rules, plan mode and a read-only
    agent's guard still apply, so a hook cannot widen what an agent may do."""
    extra = ""
    token = None
    if ctx.hooks is not None:
        verdict = await ctx.hooks.pre_tool_use(tool.name, block["input"], block["id"], ctx)
        extra = verdict.additional_context
        if verdict.decision == "deny":
            if ctx.observer is not None:
                decision = {"tool": tool.name, "behavior": "deny", "decided_by": "hook"}
                ctx.observer.record(ctx.agent, "permission.decision", decision)
            return args, f"Blocked by PreToolUse hook: {verdict.reason or 'denied'}", extra
        if verdict.updated_input is not None:
            try:
                args = tool.parse_input(verdict.updated_input)
            except ToolInputError as exc:
                problem = str(exc).partition("\n")[2] or str(exc)
                return (
                    args,
                    f"A PreToolUse hook returned an invalid updatedInput:\n{problem}",
                    extra,
                )
            except ValidationError as exc:
                problem = format_validation_error(tool.name, exc).partition("\n")[2]
                return (
                    args,
                    f"A PreToolUse hook returned an invalid updatedInput:\n{problem}",
                    extra,
                )
        if verdict.decision == "allow":
            token = HOOK_APPROVED.set(True)
    try:
        if _allowed_at_once(tool, args, ctx):
            return args, None, extra
        args, denial = await _check_rules(tool, args, ctx)
        return args, denial, extra
    finally:
        if token is not None:
            HOOK_APPROVED.reset(token)


AtOnce = Callable[[Any, Tool[Any], BaseModel, ToolContext], bool]
_AT_ONCE: dict[type, AtOnce | None] = {}
"""Per ``can_use_tool`` type: its ``InstantPermission.allowed_at_once``, or None."""


def _allowed_at_once(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> bool:
    """Whether ``_check_rules`` would allow the call as it is, answered without awaiting:
    the tool has no check of its own and the context's check is an ``InstantPermission``
    that says so (a read-only call no rule can change, on every call of most agents)."""
    if type(tool).check_permissions is not Tool.check_permissions:
        return False
    check = ctx.can_use_tool
    if check is None or not tool.requires_permission:
        return True
    kind = type(check)
    at_once = _AT_ONCE.get(kind)
    if at_once is None:
        if kind in _AT_ONCE:  # not an ``InstantPermission``
            return False
        at_once = _AT_ONCE[kind] = _at_once_of(check)
        if at_once is None:
            return False
    return at_once(check, tool, args, ctx)


def _at_once_of(check: object) -> AtOnce | None:
    """The class's ``allowed_at_once`` when ``check`` is an ``InstantPermission`` (a protocol
    check walks its members, so it is made once per type; a method protocol's answer is the
    class's)."""
    if not isinstance(check, InstantPermission):
        return None
    method: AtOnce = type(check).allowed_at_once
    return method


async def _check_rules(
    tool: Tool[Any], args: BaseModel, ctx: ToolContext
) -> tuple[BaseModel, str | None]:
    """The tool's own check, then the session's rules; returns (args, denial)."""
    if type(tool).check_permissions is not Tool.check_permissions:  # the default allows all
        result = await tool.check_permissions(args, ctx)
        if result.behavior == "deny":
            return args, result.message or f"Permission to use {tool.name} was denied."
        if result.updated_input is not None:
            args = tool.parse_input(result.updated_input)
    if ctx.can_use_tool is not None and tool.requires_permission:
        decision = await ctx.can_use_tool(tool, args, ctx)
        if decision.behavior != "allow":
            return args, decision.message or f"Permission to use {tool.name} was denied."
        if decision.updated_input is not None:
            args = tool.parse_input(decision.updated_input)
    return args, None


def _failure(name: str, step: str, exc: Exception) -> str:
    """An unexpected exception as the model's error result: which step, which exception.

    A permission check that cannot look at the call's path (a symlink loop, a folder it may not
    enter) refuses the call: it fails closed, and says so in words."""
    if step != "call" and isinstance(exc, OSError | RuntimeError | ValueError):
        return (
            f"{name} was not run: checking its permission failed ({_short(exc)}). "
            "Fix the arguments (for example the path) and try again."
        )
    where = "" if step == "call" else f" ({step})"
    return f"{name} failed{where}: {type(exc).__name__}: {_short(exc)}"


def _short(exc: BaseException, limit: int = 2000) -> str:
    # An exception's text may be huge (a hook's output, a deeply nested value): keep a head.
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not turn one failure into a crash
        text = repr(type(exc))
    return text if len(text) <= limit else text[:limit] + "…"


async def _post_tool_use(
    hooks: LoopHooks, name: str, block: ToolUseBlock, output: ToolOutput, ctx: ToolContext
) -> str:
    """PostToolUse context for the result; a failing hook step is reported, never raised."""
    try:
        return await hooks.post_tool_use(name, block["input"], block["id"], output, ctx)
    except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        return f"(PostToolUse hook step failed: {type(exc).__name__}: {_short(exc, 500)})"


def _error(block: ToolUseBlock, message: str) -> CallResult:
    return CallResult(
        block=tool_result_block(block["id"], message, is_error=True),
        tool_name=block["name"],
        output=ToolOutput(content=message, is_error=True),
    )


def _ignore(data: dict[str, Any]) -> None:
    """A progress report with nobody listening (the context's sink is ``discard``)."""


def _progress_reporter(ctx: ToolContext, tool_use_id: str) -> Any:
    agent, emit = ctx.agent, ctx.emit

    def report(data: dict[str, Any]) -> None:
        event = ProgressEvent(
            agent=agent, subtype="tool_progress", tool_use_id=tool_use_id, data=data
        )
        emit(event)

    return report
