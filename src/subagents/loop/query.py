"""One agent's turn cycle: call the model, run its tool calls, repeat until done or out of budget.

The loop knows nothing of sub-agents. It is given a model, a system prompt, tools, a context and
budgets; it returns a ``LoopOutcome`` whose ``reason`` names why it ended:

* ``completed``      the model answered without tool calls (and no Stop hook objected);
* ``max_turns``      the model-call budget is spent;
* ``max_tokens``     the token budget (all four usage counters) is spent;
* ``max_wall_time``  the wall-clock budget ran out (the run is aborted at that moment);
* ``max_budget_usd`` the cost budget (``models.pricing``) is spent;
* ``aborted``        the context's abort signal fired; pending tool calls got cancelled results;
* ``model_error``    the model failed beyond what retries and the fallback could absorb.

Budgets are checked before every model call. Between turns the loop drains its inbox (background
completions, messages from other agents), so such input never lands inside a running model output.
Then, when the running token count (``LoopStats.context_tokens``: the last call's usage plus an
estimate of what was appended since — O(1) per turn) reaches the compaction threshold, the history
is compacted (``loop.compaction``, docs/compaction.md) before the call.

Cancellation protocol: the loop's task is bound to the context's abort signal, so an abort cancels
whatever the loop awaits. The loop catches that cancellation only when its own signal fired
(``Task.uncancel``), records cancelled results for pending calls, and returns ``aborted``; a
cancellation from anywhere else is re-raised after the history is made consistent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from subagents.events import AssistantEvent, SystemEvent, ToolResultsEvent, discard
from subagents.loop.compaction import CompactionPolicy, Compactor
from subagents.loop.history_trim import (
    CHARS_PER_TOKEN,
    blocks_chars,
    history_tokens,
    message_chars,
    parts_chars,
)
from subagents.loop.inbox import Inbox
from subagents.loop.log import MessageLog
from subagents.loop.scheduling import (
    MAX_CONCURRENT_TOOLS,
    CallResult,
    TurnResults,
    lone_call,
    run_tool_calls,
)
from subagents.messages import (
    ContentBlock,
    Message,
    ToolUseBlock,
    Usage,
    assistant_text,
    text_block,
    usage_of,
    user_message,
)
from subagents.models.base import MessageDone, ModelError, new_metadata, new_request
from subagents.models.pricing import FREE
from subagents.models.retry import ModelCaller
from subagents.tools.base import Tool, ToolContext

MAX_OUTPUT_TOKENS = 8192
"""Output tokens asked for per model call."""
_ACTIVITIES_KEPT = 5
"""``LoopStats.recent_calls`` keeps the last this many tool calls."""
_NEVER = 1 << 62
"""``compact_at`` when automatic compaction is off: no count reaches it."""

TerminalReason: TypeAlias = Literal[
    "completed",
    "max_turns",
    "max_tokens",
    "max_wall_time",
    "max_budget_usd",
    "aborted",
    "model_error",
]


@dataclass(kw_only=True, slots=True, frozen=True)
class Budget:
    """Per-agent limits; ``None`` means unlimited."""

    max_turns: int | None = None
    max_tokens: int | None = None
    """All four usage counters over the agent's calls (summary calls included)."""
    max_wall_ms: int | None = None
    max_cost_usd: float | None = None
    """US dollars over the agent's calls, priced by ``models.pricing``."""


class Limits(Protocol):
    """Anything that names the four limits (a definition, a record's config snapshot)."""

    @property
    def max_turns(self) -> int | None: ...
    @property
    def max_tokens(self) -> int | None: ...
    @property
    def max_wall_ms(self) -> int | None: ...
    @property
    def max_cost_usd(self) -> float | None: ...


def budget_of(limits: Limits) -> Budget:
    return Budget(
        max_turns=limits.max_turns,
        max_tokens=limits.max_tokens,
        max_wall_ms=limits.max_wall_ms,
        max_cost_usd=limits.max_cost_usd,
    )


@dataclass(kw_only=True)
class LoopSpec:
    """Everything one loop run needs."""

    caller: ModelCaller
    system: str
    tools: Sequence[Tool[Any]]
    ctx: ToolContext
    messages: list[Message]
    prompt: str
    budget: Budget = field(default_factory=Budget)
    max_output_tokens: int = MAX_OUTPUT_TOKENS
    thinking: dict[str, Any] | None = None
    inbox: Inbox | None = None
    log: MessageLog | None = None
    on_turn: Callable[[LoopStats], None] | None = None
    tool_concurrency: int = MAX_CONCURRENT_TOOLS
    """At most this many concurrency-safe calls of one turn run at once."""
    stats: LoopStats | None = None
    """Counters to update in place (so others can watch a running loop); default: fresh ones."""
    tool_schemas: list[Any] | None = None
    """Exact schema array to send (a fork reuses its parent's bytes); default: from ``tools``."""
    reminders: Callable[[], list[ContentBlock]] | None = None
    """Blocks appended to every user message the loop builds (``agents.reminders``)."""
    restate: Callable[[], list[ContentBlock]] | None = None
    """Standing context a compacted history starts with again (the agent catalog)."""
    compaction: CompactionPolicy | None = None
    """When to compact the history (None: never automatically)."""
    task_text: str = ""
    """The agent's task as given (a child's prompt, a fork's directive): kept verbatim through
    compaction."""
    team_name: str | None = None
    member_name: str | None = None
    """A teammate's team and name: sent in every request's metadata (docs/teams.md)."""


def new_loop_spec(
    *,
    caller: ModelCaller,
    system: str,
    tools: Sequence[Tool[Any]],
    ctx: ToolContext,
    messages: list[Message],
    prompt: str,
    budget: Budget,
    thinking: dict[str, Any] | None,
    inbox: Inbox | None,
    log: MessageLog | None,
    tool_concurrency: int,
    stats: LoopStats | None,
    tool_schemas: list[Any] | None,
    compaction: CompactionPolicy | None,
    task_text: str,
) -> LoopSpec:
    """``LoopSpec(caller=..., ...)`` of these fields, the others at their defaults (the caller
    sets those it has), with every field set directly: each agent's run builds one, and a class
    called with keywords packs them into a dict and unpacks it for ``__init__``. Fifteen
    parameters, no more: Python 3.11 compiles a call with more than fifteen keywords into a
    dict and ``CALL_FUNCTION_EX`` (docs/performance.md, session 15). The fields in the class's
    order; a field added to the class fails ``tests/test_run_builders.py`` until it is set
    here too."""
    spec: LoopSpec = _new(LoopSpec)
    spec.caller = caller
    spec.system = system
    spec.tools = tools
    spec.ctx = ctx
    spec.messages = messages
    spec.prompt = prompt
    spec.budget = budget
    spec.max_output_tokens = MAX_OUTPUT_TOKENS
    spec.thinking = thinking
    spec.inbox = inbox
    spec.log = log
    spec.on_turn = None
    spec.tool_concurrency = tool_concurrency
    spec.stats = stats
    spec.tool_schemas = tool_schemas
    spec.reminders = None
    spec.restate = None
    spec.compaction = compaction
    spec.task_text = task_text
    spec.team_name = None
    spec.member_name = None
    return spec


@dataclass(kw_only=True)
class LoopStats:
    """Running counters of one loop; read by progress reporting while the loop runs."""

    num_turns: int = 0
    tool_use_count: int = 0
    usage: Usage = field(default_factory=Usage)
    latest_input_tokens: int = 0
    context_tokens: int = 0
    """Estimated tokens of the next request: the last call's input and output, plus characters
    / 4 of each user message appended since (what automatic compaction compares)."""
    compactions: int = 0
    """Summary compactions so far (the ordinal of the next summary request is this + 1)."""
    api_ms: int = 0
    """Wall time spent waiting for model calls (``duration_api_ms``)."""
    cost_usd: float = 0.0
    """US dollars of every call of this agent (``models.pricing``; unknown models are free)."""
    recent_calls: list[ToolUseBlock | str] = field(default_factory=list)
    """The last ``_ACTIVITIES_KEPT`` tool calls, described only when ``activities`` is read
    (rarely: a progress report, a supervision line) rather than on every call; a string is an
    activity described already (a remote node's report)."""
    call_outputs: list[CallResult] = field(default_factory=list)
    """The tool calls whose output carried metadata (files changed, a command's exit code, an
    Agent call's result), in call order: what verification's evidence reads. A call with a plain
    result is not kept (its text is in the history): two objects per call less that the garbage
    collector would walk for the rest of the agent's life."""

    @property
    def activities(self) -> list[str]:
        """The last few tool calls in a few words (``describe_call``), oldest first."""
        return [
            call if isinstance(call, str) else describe_call(call["name"], call["input"])
            for call in self.recent_calls
        ]

    @activities.setter
    def activities(self, activities: Sequence[str]) -> None:
        self.recent_calls = list(activities)


def new_stats() -> LoopStats:
    """``LoopStats()`` with every field set directly: each agent's run starts one, and a class
    call goes through ``type.__call__`` and ``slot_tp_init`` and calls three default factories
    (7.1 k instructions against 4.3 k; docs/performance.md, session 15). Same fields, same
    order (``tests/test_run_builders.py``)."""
    stats: LoopStats = _new(LoopStats)
    stats.num_turns = 0
    stats.tool_use_count = 0
    stats.usage = usage_of(0, 0, 0, 0)
    stats.latest_input_tokens = 0
    stats.context_tokens = 0
    stats.compactions = 0
    stats.api_ms = 0
    stats.cost_usd = 0.0
    stats.recent_calls = []
    stats.call_outputs = []
    return stats


_new = object.__new__


@dataclass(kw_only=True)
class LoopOutcome:
    """How an agent's loop ended: why, its messages, final text and stats."""

    reason: TerminalReason
    messages: list[Message]
    final_text: str
    stats: LoopStats
    error: str | None = None
    duration_ms: int = 0


def new_outcome(
    *,
    reason: TerminalReason,
    messages: list[Message],
    final_text: str,
    stats: LoopStats,
    error: str | None,
    duration_ms: int,
) -> LoopOutcome:
    """``LoopOutcome(reason=..., ...)`` with every field set directly (one per agent's run;
    ``tests/test_run_builders.py`` holds it to the class)."""
    outcome: LoopOutcome = _new(LoopOutcome)
    outcome.reason = reason
    outcome.messages = messages
    outcome.final_text = final_text
    outcome.stats = stats
    outcome.error = error
    outcome.duration_ms = duration_ms
    return outcome


async def run_loop(spec: LoopSpec) -> LoopOutcome:
    """Run the agent loop to a terminal reason. Never raises for tool or model failures."""
    runner = _Loop(spec)
    return await runner.run()


class _Loop:
    def __init__(self, spec: LoopSpec) -> None:
        self.spec = spec
        self.ctx = spec.ctx
        self.stats = spec.stats if spec.stats is not None else new_stats()
        self.tool_map, self._durable_names = _tool_tables(spec.tools)
        """The tools by name and alias, and the names (aliases too) of tools whose calls must
        be in the transcript before they run: both shared by the loops of one tool list."""
        self.schemas = spec.tool_schemas or [t.schema() for t in spec.tools]
        self.started = time.monotonic()
        self.turn: TurnResults | None = None
        policy = spec.compaction
        self.compact_at = policy.trigger_tokens if policy is not None and policy.auto else _NEVER
        """The running count at which the next automatic compaction starts."""
        self._compactor: Compactor | None = None
        self._priced_model = ""
        self._price = FREE
        self._check_floor = False
        budget = spec.budget
        self._budgeted = (
            budget.max_turns is not None
            or budget.max_tokens is not None
            or budget.max_wall_ms is not None
            or budget.max_cost_usd is not None
        )
        """Whether any limit is set (no budget: no check before each call)."""
        if self.compact_at != _NEVER and not self.stats.context_tokens:
            self.stats.context_tokens = history_tokens(spec.system, spec.messages)
        agent = self.ctx.agent
        self.request = new_request(
            model="",
            system=spec.system,
            messages=spec.messages,
            tools=self.schemas,
            metadata=new_metadata(
                agent_id=agent.agent_id,
                agent_type=agent.agent_type,
                prompt=spec.prompt,
                team_name=spec.team_name,
                name=spec.member_name,
            ),
            max_tokens=spec.max_output_tokens,
            thinking=spec.thinking,
            abort=spec.ctx.abort,
        )
        """Every model call of this loop sends this one request: each field is the same object on
        every call (``messages`` is the live history, changed in place; the caller sets
        ``model``), so it is built once, not per call (a class call with eight keywords)."""

    async def run(self) -> LoopOutcome:
        spec, ctx = self.spec, self.ctx
        task = asyncio.current_task()
        unbind = ctx.abort.bind_task(task) if task is not None else None
        wall_timer = self._arm_wall_timer()
        reason: TerminalReason = "completed"
        error: str | None = None
        try:
            reason, error = await self._cycle()
        except asyncio.CancelledError:
            self._settle_interrupted_turn()
            if not ctx.abort.aborted or task is None:
                raise
            task.uncancel()
            reason, error = self._abort_end()
        finally:
            if wall_timer is not None:
                wall_timer.cancel()
            if unbind is not None:
                unbind()
            if spec.log is not None:
                spec.log.flush()
            if spec.caller.on_notice == self._notice:
                # The caller holds this loop through the bound method: drop it, so a finished
                # loop is freed by reference counting rather than a full garbage collection.
                spec.caller.on_notice = None
        return self._outcome(reason, error)

    async def _cycle(self) -> tuple[TerminalReason, str | None]:
        spec, stats = self.spec, self.stats
        durable_names, abort = self._durable_names, self.ctx.abort
        caller = spec.caller
        while True:
            # ``reason``, a plain attribute (``aborted`` is a property: a call from C into
            # Python on 3.11, ~600 instructions a read), read into a local for the reason below.
            stopped = abort.reason
            if stopped is not None:
                return self._abort_end()
            if self._budgeted:
                spent = self._spent_budget()
                if spent is not None:
                    return spent, self._budget_error(spent)
            messages = spec.messages
            if messages and messages[-1]["role"] == "assistant":
                self._deliver_inbox()
            if stats.context_tokens >= self.compact_at and len(messages) > 1:
                await self._auto_compact()
            if caller.on_notice is None:
                caller.on_notice = self._notice
            started = time.monotonic()
            try:  # the call awaited here, the answer taken in a plain method: one frame less
                done = await caller.call(self.request)
            except ModelError as exc:
                return "model_error", f"{exc.kind}: {exc}"
            stats.api_ms += int((time.monotonic() - started) * 1000)
            message, calls = self._take_answer(done)
            if (
                calls
                and durable_names
                and spec.log is not None
                and any(call["name"] in durable_names for call in calls)
            ):
                # The calls are durable before they run: a restart repairs them. Only calls that
                # start something which outlives a crash (a child agent) pay for this extra
                # write; the rest are made durable with their results at the end of the turn.
                spec.log.flush()
            # Read again: the reason can be set across the awaits above (the first read went
            # into ``stopped``, so a type checker does not narrow this one away).
            if abort.reason is not None:
                # Aborted from inside this task (a hook, the denial breaker): no tool runs.
                self.turn = TurnResults(calls)
                self._settle_interrupted_turn()
                return self._abort_end()
            if not calls:
                if await self._continue_after_answer(message):
                    continue
                return "completed", None
            self.turn = turn = TurnResults(calls)
            if len(calls) == 1:
                # Awaited here, not inside ``run_tool_calls``: one coroutine frame less. If it
                # is cancelled, ``run`` fills the missing result (``_settle_interrupted_turn``).
                turn.results[0] = await lone_call(calls[0], self.tool_map, self.ctx)
            else:
                await run_tool_calls(turn, self.tool_map, self.ctx, spec.tool_concurrency)
            self._record_tool_results(turn)
            self.turn = None
            if spec.log is not None:
                spec.log.flush()

    def _abort_end(self) -> tuple[TerminalReason, str | None]:
        """An abort ends the loop; the wall-time timer's abort is the wall-time budget."""
        if self.ctx.abort.reason == "max_wall_time":
            return "max_wall_time", self._budget_error("max_wall_time")
        return "aborted", self.ctx.abort.reason

    def _budget_error(self, reason: TerminalReason) -> str:
        """What ran out, in words the parent and the user read ("max_tokens: used ...")."""
        budget, stats = self.spec.budget, self.stats
        spent = {
            "max_turns": f"reached the limit of {budget.max_turns} model calls",
            "max_tokens": f"used {stats.usage.total} of {budget.max_tokens} tokens",
            "max_wall_time": f"ran {self._elapsed_ms()} ms of {budget.max_wall_ms} ms",
            "max_budget_usd": f"spent ${stats.cost_usd:.6f} of ${budget.max_cost_usd}",
        }.get(reason, "")
        return f"{reason}: {spent}"

    def _spent_budget(self) -> TerminalReason | None:
        """The budget that is used up, if any (checked before every model call)."""
        budget, stats = self.spec.budget, self.stats
        if budget.max_turns is not None and stats.num_turns >= budget.max_turns:
            return "max_turns"
        if budget.max_tokens is not None and stats.usage.total >= budget.max_tokens:
            return "max_tokens"
        if budget.max_wall_ms is not None and self._elapsed_ms() >= budget.max_wall_ms:
            return "max_wall_time"
        if budget.max_cost_usd is not None and stats.cost_usd >= budget.max_cost_usd:
            return "max_budget_usd"
        return None

    def _take_answer(self, done: MessageDone) -> tuple[Message, list[ToolUseBlock]]:
        """A model call's answer counted, appended to the history and logged; returns it and
        its tool calls."""
        spec, stats, ctx = self.spec, self.stats, self.ctx
        usage = done.usage
        stats.num_turns += 1
        # ``Usage.add``, not its four sums inlined (~350 instructions more a call): a counter
        # added to ``Usage`` later is summed here too.
        stats.usage.add(usage)
        model = done.model or spec.caller.model.name
        if model != self._priced_model or self._price is not FREE:
            self._charge(model, usage)
        stats.latest_input_tokens = (
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        )
        stats.context_tokens = stats.latest_input_tokens + usage.output_tokens
        if self._check_floor:
            self._settle_floor()
        message = done.message
        spec.messages.append(message)  # ``_append`` of an answer (its size is in the usage)
        if spec.log is not None:
            spec.log.append(message)
        if ctx.emit is not discard:  # nobody watching: skip building the event
            ctx.emit(
                AssistantEvent(
                    agent=ctx.agent,
                    message=message,
                    usage=usage,
                    model=model,
                    stop_reason=done.stop_reason,
                )
            )
        content = message["content"]
        calls: list[ToolUseBlock] = []
        if not isinstance(content, str):
            for block in content:  # a loop, not a comprehension: no function frame of its own
                if block["type"] == "tool_use":
                    calls.append(block)
        if calls:
            stats.tool_use_count += len(calls)
            recent = stats.recent_calls
            recent += calls
            if len(recent) > _ACTIVITIES_KEPT:
                del recent[:-_ACTIVITIES_KEPT]
        if spec.on_turn is not None:
            spec.on_turn(stats)
        return message, calls

    async def _continue_after_answer(self, message: Message) -> bool:
        """After a final answer: more input waiting, or a Stop hook objecting, means go on."""
        inbox = self.spec.inbox
        if inbox is not None and (inbox.pending() or await inbox.wait_for_delivery()):
            return True
        hooks = self.ctx.hooks
        if hooks is not None:
            verdict = await hooks.stop(assistant_text(message), self.ctx)
            if verdict.block:
                self._append(user_message([text_block(verdict.reason), *self._reminders()]))
                return True
        return False

    def _deliver_inbox(self) -> None:
        """After a final answer, waiting input becomes the next user message."""
        blocks = self._inbox_blocks()
        if blocks:
            self._append(user_message([*blocks, *self._reminders()]))

    def _inbox_blocks(self) -> list[ContentBlock]:
        inbox = self.spec.inbox
        if inbox is None or not inbox.queued():
            return []
        return [text_block(text) for text in inbox.drain()]

    def _reminders(self) -> list[ContentBlock]:
        reminders = self.spec.reminders
        return reminders() if reminders is not None else []

    def _record_tool_results(self, turn: TurnResults) -> None:
        """The turn's results as the next user message: appended, counted and logged (what
        ``_append`` does, inlined with ``message_chars``: a result's characters are counted as
        its block is taken, once per turn)."""
        blocks: list[ContentBlock] = []
        chars = 0
        stats = self.stats
        kept = stats.call_outputs
        for result in turn.results:  # ``turn.completed()``, inlined: once per turn
            if result is None:
                continue
            block = result.block
            blocks.append(block)
            inner = block["content"]
            chars += len(inner) if isinstance(inner, str) else parts_chars(inner)
            output = result.output
            if output is not None and output.metadata:
                kept.append(result)
        spec = self.spec
        inbox, reminders = spec.inbox, spec.reminders
        if inbox is not None and inbox.queued():
            # Input that arrived during the turn rides along with its tool results.
            extra = self._inbox_blocks()
            if reminders is not None:
                extra += reminders()
        elif reminders is not None:
            extra = reminders()
        else:
            extra = []
        if extra:
            chars += blocks_chars(extra)
            blocks += extra
        message: Message = {"role": "user", "content": blocks}
        spec.messages.append(message)
        stats.context_tokens += chars // CHARS_PER_TOKEN
        if spec.log is not None:
            spec.log.append(message)
        if self.ctx.emit is not discard:
            results = turn.completed()
            outputs = [r.output.metadata if r.output is not None else None for r in results]
            self.ctx.emit(ToolResultsEvent(agent=self.ctx.agent, message=message, outputs=outputs))

    def _settle_interrupted_turn(self) -> None:
        """Give every unanswered tool_use of the last turn a cancelled result."""
        if self.turn is not None and self.turn.calls:
            self.turn.fill_cancelled()
            self._record_tool_results(self.turn)
            self.turn = None

    def _append(self, message: Message) -> None:
        self.spec.messages.append(message)
        if message["role"] == "user":  # an answer's size is in the next call's usage
            self.stats.context_tokens += message_chars(message) // CHARS_PER_TOKEN
        if self.spec.log is not None:
            self.spec.log.append(message)

    async def _auto_compact(self) -> None:
        """Clear old results if that is enough, else summarise (docs/compaction.md §2)."""
        policy = self.spec.compaction
        assert policy is not None
        compactor = self._compactor or self._make_compactor(policy)
        stats = self.stats
        tokens = stats.context_tokens
        result = compactor.clear(
            tokens, target_tokens=int(policy.trigger_tokens * policy.clear_target)
        )
        if result is None:
            ordinal = stats.compactions + 1
            result = await compactor.compact("auto", ordinal=ordinal, tokens_before=tokens)
            stats.usage.add(result.usage)
            self._charge(result.model or self.spec.caller.model.name, result.usage)
            if result.method == "skipped":
                return  # a PreCompact hook said no: asked again before the next call
            stats.compactions = ordinal
        stats.context_tokens = result.tokens_after
        self._check_floor = True

    def _make_compactor(self, policy: CompactionPolicy) -> Compactor:
        spec = self.spec
        self._compactor = Compactor(
            policy=policy,
            caller=spec.caller,
            system=spec.system,
            schemas=self.schemas,
            messages=spec.messages,
            ctx=self.ctx,
            tools=self.tool_map,
            log=spec.log,
            thinking=spec.thinking,
            task_text=spec.task_text,
            restate=spec.restate,
            prompt=spec.prompt,
            max_output_tokens=spec.max_output_tokens,
        )
        return self._compactor

    def _charge(self, model: str, usage: Usage) -> None:
        """Add a call's cost to ``stats.cost_usd``; the price is looked up once per model name
        (a fallback switch changes it), and a free model costs one comparison."""
        if model != self._priced_model:
            self._priced_model, self._price = model, self.spec.caller.prices(model)
        if self._price is not FREE:
            self.stats.cost_usd += self._price.cost(usage)

    def _settle_floor(self) -> None:
        """The first call after a compaction measured what compaction left: if that is over the
        threshold already, the next one waits for half a threshold of growth (not every turn)."""
        self._check_floor = False
        policy = self.spec.compaction
        if policy is None or not policy.auto:
            return
        floor, trigger = self.stats.context_tokens, policy.trigger_tokens
        self.compact_at = trigger if floor < trigger else floor + trigger // 2

    def _arm_wall_timer(self) -> asyncio.TimerHandle | None:
        limit = self.spec.budget.max_wall_ms
        if limit is None:
            return None
        loop = asyncio.get_running_loop()
        return loop.call_later(limit / 1000, self.ctx.abort.abort, "max_wall_time")

    def _notice(self, subtype: str, data: dict[str, Any]) -> None:
        self.ctx.emit(SystemEvent(agent=self.ctx.agent, subtype=subtype, data=data))

    def _elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def _outcome(self, reason: TerminalReason, error: str | None) -> LoopOutcome:
        messages = self.spec.messages
        final = ""
        if messages and messages[-1]["role"] == "assistant":
            final = assistant_text(messages[-1])
        return new_outcome(
            reason=reason,
            messages=messages,
            final_text=final,
            stats=self.stats,
            error=error,
            duration_ms=self._elapsed_ms(),
        )


_TABLES_KEPT = 64
_ToolTables = tuple[Mapping[str, Tool[Any]], frozenset[str]]
_tables: dict[
    int, tuple[Sequence[Tool[Any]], tuple[int, ...], tuple[Tool[Any], ...], _ToolTables]
] = {}
"""Per tool list (by id, the list held so its id is not reused): its items' ids and its items
when the tables were made, and the tables."""


def _tool_tables(tools: Sequence[Tool[Any]]) -> _ToolTables:
    """``tool_lookup(tools)`` and its durable names, made once per tool list: the children of
    one definition share their list (``AgentRuntime.child_toolset``), and a thousand loops
    made the same two tables. Checked by the identity of every element, so a list changed in
    place gets tables of its own again; the tables are only read (never changed in place)."""
    ids = tuple(map(id, tools))  # (identity, whatever a program's tool says ``==`` is)
    found = _tables.get(id(tools))
    if found is not None and found[0] is tools and found[1] == ids:
        return found[3]
    lookup = tool_lookup(tools)
    made = lookup, frozenset(name for name, tool in lookup.items() if tool.durable_call_identity)
    if len(_tables) >= _TABLES_KEPT:
        _tables.clear()  # agents come and go: start again
    _tables[id(tools)] = (tools, ids, tuple(tools), made)  # the items held: ids not reused
    return made


def tool_lookup(tools: Sequence[Tool[Any]]) -> Mapping[str, Tool[Any]]:
    """Tools by name and by alias (``Task`` reaches ``Agent``)."""
    table: dict[str, Tool[Any]] = {}
    for tool in tools:
        table[tool.name] = tool
        for alias in tool.aliases:
            table.setdefault(alias, tool)
    return table


_ACTIVITY_KEYS = ("description", "command", "file_path", "pattern", "prompt", "path")


def describe_call(name: str, args: dict[str, Any]) -> str:
    """A tool call in a few words (an agent's "last activities"): ``Grep: TODO``."""
    for key in _ACTIVITY_KEYS:
        if key in args:  # a membership test, not ``get``: this runs for every tool call
            value = args[key]
            if isinstance(value, str) and value:
                return f"{name}: {value[:80]}"
    return name
