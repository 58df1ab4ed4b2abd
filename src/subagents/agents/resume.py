"""``resume_from``: continue a finished child in a new run, from its frozen snapshot (SPEC §9).

A resume never reuses an id and never re-reads a definition. Everything that shaped the source
run comes from its sidecar record — the system prompt bytes, the tool names, the model name, the
permission mode, max turns, thinking and isolation — and its conversation comes from its
transcript; the new run gets a fresh id linked to the source by its lineage (same root,
``resumedFrom`` = the source, ``resumeDepth`` + 1). Editing ``.claude/agents/x.md`` after a run
therefore changes new runs of ``x``, never an existing lineage.

Refused, with a message that says why: an unknown id, a run of another session or project (the
access rule of SPEC §9), a run still going, a run whose history could not be verified after a
restart (``restartRecovery: failed``) or that lacks a usable snapshot, and a ``subagent_type``
that differs from the source's. User-stopped (``killed``) and failed runs are resumable, also
from a later process of the same session.

Not covered here: a source that ran in a worktree resumes in that worktree when it was kept
(same folder, no new checkout); creating a fresh worktree for a resume is left to the worktree
integration. The source definition's frontmatter hooks are not part of the snapshot, so a resumed
run gets the session's hooks only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from subagents.agents.agent_run import AgentFrame
from subagents.agents.builtin import BUILTIN_AGENTS
from subagents.agents.runtime import AgentRuntime
from subagents.agents.schema import AgentDefinition, DefinitionSource, normalize_agent_type
from subagents.agents.spec import IN_PARENTS_FOLDER, ChildSpec, Workspace
from subagents.events import AgentRef, SystemEvent
from subagents.ids import new_id
from subagents.loop.query import budget_of
from subagents.messages import ContentBlock, Message, text_block, tool_result_block, tool_uses
from subagents.models.base import Model
from subagents.models.resolve import resolve_alias
from subagents.permissions.modes import PermissionMode, parse_mode
from subagents.store.durable import DurableRecords
from subagents.store.errors import StoreError
from subagents.store.protocol import Store
from subagents.store.records import Lineage, SidecarRecord, is_visible
from subagents.store.transcript import read_messages
from subagents.tools import core_tools
from subagents.tools.base import Tool, ToolContext, ToolError

INTERRUPTED_RESULT = "Interrupted: the run ended before this tool call finished."
_SOURCES: dict[str, DefinitionSource] = {s: s for s in get_args(DefinitionSource)}


@dataclass(kw_only=True, frozen=True)
class ResumeSource:
    """A resumable source run: its record and its verified history."""

    record: SidecarRecord
    history: list[Message]


def resume_spec(
    runtime: AgentRuntime,
    records: DurableRecords | None,
    parent_ctx: ToolContext,
    frame: AgentFrame,
    *,
    source_id: str,
    prompt: str,
    description: str,
    subagent_type: str | None = None,
    background: bool = False,
    tool_use_id: str | None = None,
) -> ChildSpec:
    """The spec of a new run continuing ``source_id``; ``ToolError`` when it may not resume.

    The nesting depth limit applies as to any child; the concurrent-children limit does not
    (SPEC §15: resumes are exempt)."""
    limit = runtime.config.max_spawn_depth
    if frame.depth + 1 > limit:
        raise ToolError(
            f"Sub-agent nesting depth limit reached: agents may nest at most {limit} levels "
            "below the main agent (SUBAGENTS_MAX_SPAWN_DEPTH); resume from a shallower agent."
        )
    source = load_source(records, source_id, subagent_type)
    record = source.record
    snapshot = record.config
    agent_id = new_id("local_agent")
    ref = AgentRef(
        agent_id=agent_id, agent_type=record.agent_type, parent_agent_id=parent_ctx.agent.agent_id
    )
    tools = snapshot_tools(runtime, frame, snapshot.tools, ref)
    definition = snapshot_definition(record, [tool.name for tool in tools])
    memory = None
    if definition is not None and definition.memory:
        # The frozen system prompt shows the index as it was; access comes back with the
        # folder (the snapshot's tool names already hold the memory tools).
        memory = runtime.open_memory(definition, load_index=False)
    if memory is None and snapshot.memory_only_tools:
        tools = [tool for tool in tools if tool.name not in snapshot.memory_only_tools]
    return ChildSpec(
        kind="resume",
        agent_type=record.agent_type,
        description=description,
        prompt=prompt,
        model=snapshot_model(runtime, frame, snapshot.model),
        system=snapshot.system_prompt,
        tools=tools,
        messages=resume_messages(source.history, prompt),
        thinking=snapshot.thinking,
        budget=budget_of(snapshot),
        definition=definition,
        permission_mode=snapshot.permission_mode,
        background=background,
        tool_use_id=tool_use_id,
        agent_id=agent_id,
        lineage=Lineage(
            root_agent_id=record.lineage.root_agent_id,
            resumed_from=record.agent_id,
            resume_depth=record.lineage.resume_depth + 1,
        ),
        workspace=_kept_worktree(record),
        memory=memory,
        memory_only=frozenset(snapshot.memory_only_tools) if memory is not None else frozenset(),
    )


def refuse_overrides(**fields: str | None) -> None:
    """A resume runs with the frozen configuration: refuse Agent fields that would change it."""
    given = [name for name, value in fields.items() if value is not None]
    if given:
        raise ToolError(
            f"resume_from runs with the source's frozen configuration: omit {', '.join(given)}"
        )


def session_store(records: DurableRecords | None) -> tuple[Store, str, str]:
    """The session's store and its access key (session id, canonical project path)."""
    if records is None:
        raise ToolError("resume_from needs durable records, and this session has no store")
    return records.store, records.session_id, records.project_path


async def settle_writes(records: DurableRecords | None) -> None:
    """Wait for sidecar writes in flight, so a child that just ended reads as terminal."""
    if records is not None:
        await records.drain()


def load_source(
    records: DurableRecords | None, source_id: str, subagent_type: str | None
) -> ResumeSource:
    """The source record and history, or ``ToolError`` saying why it cannot be resumed."""
    store, session_id, project_path = session_store(records)
    try:
        record = store.get(source_id)
    except StoreError:
        record = None
    if record is None:
        raise ToolError(f"resume_from: no agent with id {source_id!r} was found")
    if not is_visible(record, session_id=session_id, project_path=project_path):
        raise ToolError(
            f"resume_from: agent {source_id} belongs to another session or project; an agent "
            "can be resumed only from the session and project that started it"
        )
    if not record.is_terminal:
        raise ToolError(
            f"resume_from: agent {source_id} is still running; send it a message with "
            "SendMessage, wait for its notification, or stop it with TaskStop first"
        )
    _check_type(record, subagent_type)
    _check_resumable(record)
    return ResumeSource(record=record, history=_history(record))


def _check_type(record: SidecarRecord, subagent_type: str | None) -> None:
    if subagent_type is None:
        return
    if normalize_agent_type(subagent_type) != normalize_agent_type(record.agent_type):
        raise ToolError(
            f"resume_from: agent {record.agent_id} is of type '{record.agent_type}', not "
            f"'{subagent_type}'; a resume continues the same type (omit subagent_type)"
        )


def _check_resumable(record: SidecarRecord) -> None:
    if record.restart_recovery == "failed":
        raise ToolError(
            f"resume_from: agent {record.agent_id} cannot be resumed: its history could not be "
            "verified after a restart (restartRecovery: failed)"
        )
    if not record.resumable or not record.config.system_prompt or not record.transcript_path:
        raise ToolError(
            f"resume_from: agent {record.agent_id} cannot be resumed: its record has no usable "
            "snapshot (system prompt and transcript)"
        )


def _history(record: SidecarRecord) -> list[Message]:
    path = Path(record.transcript_path or "")
    try:
        history = read_messages(path)
    except (OSError, ValueError) as exc:
        raise ToolError(
            f"resume_from: agent {record.agent_id} cannot be resumed: its transcript {path} "
            f"cannot be read ({exc})"
        ) from exc
    if not history:
        raise ToolError(
            f"resume_from: agent {record.agent_id} cannot be resumed: its transcript {path} "
            "holds no completed turn"
        )
    return history


def resume_messages(history: list[Message], prompt: str) -> list[Message]:
    """The source's history plus the new prompt, kept a valid conversation.

    A history cut after an assistant turn that called tools (the run was stopped mid-turn) gets
    an "interrupted" result for each call; a history ending with a user message gets the prompt
    appended to that message, since two user messages in a row are not allowed.
    """
    messages = list(history)
    blocks: list[ContentBlock] = []
    last = history[-1] if history else None
    if last is not None and last["role"] == "assistant":
        blocks = [
            tool_result_block(call["id"], INTERRUPTED_RESULT, is_error=True)
            for call in tool_uses(last)
        ]
    elif last is not None and last["role"] == "user":
        messages.pop()
        content = last["content"]
        blocks = [text_block(content)] if isinstance(content, str) else list(content)
    blocks.append(text_block(prompt))
    messages.append({"role": "user", "content": blocks})
    return messages


def snapshot_model(runtime: AgentRuntime, frame: AgentFrame, name: str) -> Model:
    """The snapshot's model: the session's own model objects when the names match."""
    for model in (runtime.provider_model, frame.model):
        if model.name == name:
            return model
    return resolve_alias(runtime.provider_model, name or None)


def snapshot_tools(
    runtime: AgentRuntime, frame: AgentFrame, names: tuple[str, ...] | None, ref: AgentRef
) -> list[Tool[Any]]:
    """The tools the snapshot names, as instances of this session; gone ones are dropped."""
    if names is None:
        return list(frame.tools)
    pool: dict[str, Tool[Any]] = {tool.name: tool for tool in core_tools()}
    pool.update({tool.name: tool for tool in frame.tools})
    missing = [name for name in names if name not in pool]
    if missing:
        message = (
            f"resume of {ref.agent_type}: tool(s) {', '.join(missing)} of the source run no "
            "longer exist in this session and were dropped"
        )
        runtime.emit(SystemEvent(agent=ref, subtype="warning", data={"message": message}))
    return [pool[name] for name in names if name in pool]


def snapshot_definition(record: SidecarRecord, tool_names: list[str]) -> AgentDefinition | None:
    """A definition made of the snapshot alone: what the new run's own record freezes again.

    Only built-in types are read-only (no file can make an agent read-only), so the read-only
    guard comes from the built-in of that name, never from a definition file.
    """
    snapshot = record.config
    source = _SOURCES.get(snapshot.definition_source)
    if source is None:
        return None
    read_only = snapshot.definition_source == "built-in" and any(
        d.read_only and d.name == record.agent_type for d in BUILTIN_AGENTS
    )
    return AgentDefinition(
        name=record.agent_type,
        description=record.description,
        tools=tuple(tool_names),
        model=snapshot.model or None,
        permission_mode=_mode(snapshot.permission_mode),
        max_turns=snapshot.max_turns,
        max_tokens=snapshot.max_tokens,
        max_wall_ms=snapshot.max_wall_ms,
        max_cost_usd=snapshot.max_cost_usd,
        isolation="worktree" if snapshot.isolation == "worktree" else None,
        system_prompt=snapshot.system_prompt,
        source=source,
        path=snapshot.definition_path,
        read_only=read_only,
        memory=snapshot.memory,
    )


def _mode(value: str) -> PermissionMode | None:
    try:
        return parse_mode(value)
    except ValueError:
        return None


def _kept_worktree(record: SidecarRecord) -> Workspace:
    """A source that kept its worktree resumes there (nothing to settle: it stays kept);
    otherwise the parent's folder."""
    worktree = record.worktree
    if worktree is None or worktree.outcome != "kept" or not Path(worktree.path).is_dir():
        return IN_PARENTS_FOLDER
    path = Path(worktree.path)
    return Workspace(cwd=path, roots=(path,))
