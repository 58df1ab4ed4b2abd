"""Context compaction of one agent's history (docs/compaction.md).

``CompactionPolicy`` says when (the threshold for the agent's model) and how much (clearing,
files restored, attempts); ``Compactor`` does it to one history:

* ``clear`` — old, large results of re-runnable tools become stubs (``history_trim``);
* ``compact`` — PreCompact hooks, a summary from the agent's own model (retried, then the
  oldest turns dropped instead), the continuation message, the durable boundary, PostCompact
  hooks, the ``compaction`` event.

The loop owns the running token count and decides *when* (``query._Loop``); ``Session.compact``
drives a manual compaction with the same ``Compactor``. The history list is changed in place
(``messages[:] = ...``): the agent's frame, run and job hold the same list, and a fork made later
copies the compacted one. Messages are never mutated (a running fork shares the objects).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from subagents.events import AgentRef, CompactionEvent, discard
from subagents.loop import compaction_text
from subagents.loop.history_trim import (
    CHARS_PER_TOKEN,
    cut_before,
    history_tokens,
    keep_newest,
    plan_clearing,
)
from subagents.loop.log import MessageLog
from subagents.messages import (
    ContentBlock,
    Message,
    Usage,
    assistant_text,
    blocks_of,
    text_block,
    tool_uses,
    user_message,
)
from subagents.models.base import ModelError, ModelRequest, RequestMetadata, ToolSchema
from subagents.models.context_windows import window_for
from subagents.models.retry import ModelCaller
from subagents.store.transcript import CLEARED_TYPE, COMPACTION_TYPE, clear_results
from subagents.tools.base import CallInfo, CompactVerdict, Tool, ToolContext, truncate

Trigger = Literal["auto", "manual"]
Method = Literal["summary", "cleared", "truncated", "skipped"]

COMPACT_AGENT_TYPE = "compact"
"""The ``agent_type`` of a summary request's metadata (SPEC §20)."""

RESTORE_TOTAL_CHARS = 200_000
"""At most this many characters of re-read files, whatever the threshold (~50,000 tokens)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class CompactionPolicy:
    """When and how an agent's history is compacted."""

    trigger_tokens: int
    """Automatic compaction starts once the running count reaches this many tokens."""
    window: int
    auto: bool = True
    keep_recent_results: int = 5
    clear_min_chars: int = 1_000
    clear_target: float = 0.75
    """Clearing alone is enough when it brings the count under this share of the trigger."""
    summary_attempts: int = 3
    restore_files: int = 5
    restore_file_chars: int = 20_000


def policy_for(
    model_name: str,
    *,
    max_output_tokens: int,
    absolute_tokens: int | None = None,
    auto: bool = True,
    env: Mapping[str, str] | None = None,
) -> CompactionPolicy:
    """The policy of an agent on ``model_name``: ``absolute_tokens`` when set
    (``SUBAGENTS_AUTOCOMPACT_TOKENS``), else the window minus the answer's reserve and a margin."""
    window = window_for(model_name, os.environ if env is None else env)
    if absolute_tokens is not None and absolute_tokens > 0:
        trigger = absolute_tokens
    else:
        reserve = min(max_output_tokens, 20_000, window // 4)
        trigger = window - reserve - min(13_000, window // 10)
    return CompactionPolicy(trigger_tokens=max(1, trigger), window=window, auto=auto)


@dataclass(kw_only=True)
class CompactionResult:
    """What one compaction did."""

    trigger: Trigger
    method: Method
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    summary: str = ""
    error: str | None = None
    """Why the summary failed (``truncated``) or was skipped (a PreCompact hook's reason)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens of the summary calls (the agent pays for them)."""
    model: str = ""
    """The model that answered the summary calls."""


@dataclass(kw_only=True)
class Compactor:
    """Compacts one agent's history in place (see the module docstring)."""

    policy: CompactionPolicy
    caller: ModelCaller
    system: str
    schemas: list[ToolSchema]
    messages: list[Message]
    ctx: ToolContext
    tools: Mapping[str, Tool[Any]] = field(default_factory=dict)
    log: MessageLog | None = None
    thinking: dict[str, Any] | None = None
    task_text: str = ""
    """The agent's task, kept verbatim through every compaction."""
    restate: Callable[[], list[ContentBlock]] | None = None
    """Standing context the new history repeats (the agent catalog, a critical reminder)."""
    prompt: str = ""
    """The agent's task prompt (the summary request's metadata)."""
    max_output_tokens: int = 8192

    # -- clearing ------------------------------------------------------------------------------

    def clear(self, tokens_before: int, *, target_tokens: int) -> CompactionResult | None:
        """Clear old, large results if that brings the count to ``target_tokens``; else None
        (and nothing changes)."""
        policy = self.policy
        plan = plan_clearing(
            self.messages,
            keep_recent=policy.keep_recent_results,
            min_chars=policy.clear_min_chars,
        )
        saved = plan.saved_chars // CHARS_PER_TOKEN
        if not plan.stubs or tokens_before - saved > target_tokens:
            return None
        count = len(self.messages)
        self.messages[:] = clear_results(self.messages, plan.stubs)
        self._write({"type": CLEARED_TYPE, "results": plan.stubs}, [])
        result = CompactionResult(
            trigger="auto",
            method="cleared",
            tokens_before=tokens_before,
            tokens_after=max(0, tokens_before - saved),
            messages_before=count,
            messages_after=count,
        )
        self._emit(result)
        return result

    # -- summary -------------------------------------------------------------------------------

    async def compact(
        self,
        trigger: Trigger,
        *,
        ordinal: int,
        tokens_before: int,
        instructions: str | None = None,
        continue_work: bool = True,
    ) -> CompactionResult:
        """Replace the history by a summary (or, failing that, by its newest part)."""
        if self.log is not None:
            self.log.flush()  # what came before is durable before the (long) summary call
        count = len(self.messages)
        verdict = await self._pre_compact(trigger, instructions or "")
        if verdict is not None and verdict.block:
            return CompactionResult(
                trigger=trigger,
                method="skipped",
                tokens_before=tokens_before,
                tokens_after=tokens_before,
                messages_before=count,
                messages_after=count,
                error=verdict.reason or "blocked by a PreCompact hook",
            )
        extra = "\n\n".join(
            part for part in (instructions, verdict.instructions if verdict else "") if part
        )
        result = CompactionResult(
            trigger=trigger,
            method="summary",
            tokens_before=tokens_before,
            tokens_after=0,
            messages_before=count,
            messages_after=0,
        )
        summary = await self._summarize(ordinal, compaction_text.instruction(extra), result)
        if summary is not None:
            result.summary = summary
            new = await self._continuation(summary, continue_work)
        else:
            result.method = "truncated"
            new = self._truncated(result.error or "no summary")
        self.messages[:] = new
        self._write(self._boundary(result), new)
        result.tokens_after = history_tokens(self.system, new)
        result.messages_after = len(new)
        await self._post_compact(trigger, result.summary)
        self._emit(result)
        return result

    async def _summarize(
        self, ordinal: int, instruction: str, result: CompactionResult
    ) -> str | None:
        """The summary text, or None once every attempt failed (the reason in ``result``)."""
        attempts = max(1, self.policy.summary_attempts)
        for attempt in range(attempts):
            history = self.messages
            if attempt:  # a too-long request is the usual failure: drop the oldest quarter
                history = cut_before(history, len(history) * attempt // 4)
            try:
                done = await self.caller.call(self._request(history, instruction, ordinal))
            except ModelError as error:
                result.error = f"{error.kind}: {error}"
                continue
            result.usage.add(done.usage)
            result.model = done.model or self.caller.model.name
            text = assistant_text(done.message)
            if text.strip():
                return text
            result.error = "the summary came back empty"
        return None

    def _request(self, history: list[Message], instruction: str, ordinal: int) -> ModelRequest:
        """The agent's own request bytes (prefix-cache friendly) plus the instruction."""
        return ModelRequest(
            model="",
            system=self.system,
            messages=with_instruction(history, instruction),
            tools=self.schemas,
            metadata=RequestMetadata(
                agent_id=self.ctx.agent.agent_id,
                agent_type=COMPACT_AGENT_TYPE,
                prompt=self.prompt,
                compaction=ordinal,
            ),
            max_tokens=self.max_output_tokens,
            thinking=self.thinking,
            abort=self.ctx.abort,
        )

    async def _continuation(self, summary: str, continue_work: bool) -> list[Message]:
        files = await self._restore_files()
        blocks = compaction_text.continuation_blocks(
            summary,
            task_text=self.task_text,
            files=files,
            standing=self.restate() if self.restate is not None else [],
            latest=self._latest_input(),
            continue_work=continue_work,
        )
        return [user_message(blocks)]

    def _latest_input(self) -> list[ContentBlock]:
        """New input the model has not answered (a prompt, a notification), kept as written —
        bounded to a quarter of the threshold. Tool results are left to the summary."""
        messages = self.messages
        if not messages or messages[-1]["role"] != "user":
            return []
        blocks = blocks_of(messages[-1])
        if any(block["type"] == "tool_result" for block in blocks):
            return []
        if len(messages) == 1 and self.task_text:
            return []  # the task itself, already kept
        limit = self.policy.trigger_tokens * CHARS_PER_TOKEN // 4
        return [
            text_block(truncate(block["text"], limit)) if block["type"] == "text" else block
            for block in blocks
        ]

    def _truncated(self, reason: str) -> list[Message]:
        budget = self.policy.trigger_tokens * CHARS_PER_TOKEN // 2
        kept = keep_newest(self.messages, budget)
        dropped = len(self.messages) - len(kept)
        marker = compaction_text.truncation_marker(dropped, reason, self.task_text)
        marker += self.restate() if self.restate is not None else []
        if not kept:
            return [user_message(marker)]
        first = kept[0]
        kept[0] = user_message([*marker, *blocks_of(first)])
        return kept

    async def _restore_files(self) -> list[tuple[str, str]]:
        """The files the agent read last, read again now through its own Read tool."""
        read = self.tools.get("Read")
        policy = self.policy
        if read is None or policy.restore_files <= 0:
            return []
        budget = min(RESTORE_TOTAL_CHARS, policy.trigger_tokens * CHARS_PER_TOKEN // 4)
        paths = recent_read_paths(self.messages, policy.restore_files)
        share = min(policy.restore_file_chars, budget // max(1, len(paths)))
        files: list[tuple[str, str]] = []
        for path in paths:
            content = await _read_again(read, path, self.ctx)
            if content is not None:
                files.append((path, truncate(content, share)))
        return files

    # -- hooks, durability, events -------------------------------------------------------------

    async def _pre_compact(self, trigger: Trigger, instructions: str) -> CompactVerdict | None:
        hooks = self.ctx.hooks
        if hooks is None:
            return None
        return await hooks.pre_compact(trigger, instructions, self.ctx)

    async def _post_compact(self, trigger: Trigger, summary: str) -> None:
        hooks = self.ctx.hooks
        if hooks is not None:
            await hooks.post_compact(trigger, summary, self.ctx)

    def _boundary(self, result: CompactionResult) -> dict[str, Any]:
        return {
            "type": COMPACTION_TYPE,
            "trigger": result.trigger,
            "method": result.method,
            "tokens_before": result.tokens_before,
            "messages_before": result.messages_before,
            "summary": result.summary,
            "error": result.error,
        }

    def _write(self, entry: dict[str, Any], messages: Sequence[Message]) -> None:
        """The boundary (or clearing) and the new messages, with one write ending the turn."""
        log = self.log
        if log is None:
            return
        log.record(entry)
        for message in messages:
            log.append(message)
        log.flush()

    def _emit(self, result: CompactionResult) -> None:
        ctx = self.ctx
        if ctx.emit is discard or result.method == "skipped":
            return
        ctx.emit(
            CompactionEvent(
                agent=AgentRef(
                    agent_id=ctx.agent.agent_id,
                    agent_type=ctx.agent.agent_type,
                    parent_agent_id=ctx.agent.parent_agent_id,
                ),
                trigger=result.trigger,
                method=result.method,
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                messages_before=result.messages_before,
                messages_after=result.messages_after,
            )
        )


def with_instruction(history: list[Message], instruction: str) -> list[Message]:
    """The history with the summary instruction at the end: appended to the last user message
    (two user messages in a row are not a valid conversation), or as a new one."""
    if history and history[-1]["role"] == "user":
        last = history[-1]
        return [*history[:-1], user_message([*blocks_of(last), text_block(instruction)])]
    return [*history, user_message([text_block(instruction)])]


def recent_read_paths(messages: Sequence[Message], limit: int) -> list[str]:
    """Distinct ``file_path``s of the agent's Read calls, most recent first."""
    paths: list[str] = []
    for message in reversed(messages):
        if message["role"] != "assistant":
            continue
        for call in reversed(tool_uses(message)):
            path = call["input"].get("file_path")
            if call["name"] == "Read" and isinstance(path, str) and path not in paths:
                paths.append(path)
                if len(paths) >= limit:
                    return paths
    return paths


async def _read_again(read: Tool[Any], path: str, ctx: ToolContext) -> str | None:
    """The file's content now, as the Read tool shows it; None when it cannot be read."""
    try:
        args = read.input_model.model_validate({"file_path": path})
        output = await read.call(args, ctx, CallInfo(tool_use_id="compaction", progress=_ignore))
    except Exception:  # a file gone or unreadable is simply not restored: never a crash
        return None
    return None if output.is_error else output.content


def _ignore(_data: dict[str, Any]) -> None:
    """Progress of a file read during compaction is not reported."""
