"""What a session is given and what it gives back: ``SessionOptions`` and ``SessionResult``.

``SessionOptions`` is the library's whole configuration of a run (the CLI builds one from its
flags, ``cli/session_plan.py``); ``SessionResult`` is the SPEC §19 ``json`` object of a turn
plus the live agent records. ``subagents.session`` re-exports both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.agents.agent_run import AgentRun
from subagents.agents.definitions import DefinitionSet
from subagents.agents.executor import Executor
from subagents.config import RuntimeConfig
from subagents.hooks.config import HookConfig
from subagents.loop.query import LoopOutcome
from subagents.models.base import Model
from subagents.models.retry import RetryPolicy
from subagents.observe import RunObserver
from subagents.permissions.checker import AskCallback
from subagents.store.protocol import Store
from subagents.tools.base import Tool
from subagents.tools.web_search import SearchBackend

if TYPE_CHECKING:
    from subagents.mcp.sdk_bridge import SdkMessenger

SUBTYPES = {
    "completed": "success",
    "max_turns": "error_max_turns",
    "max_tokens": "error_max_budget",
    "max_wall_time": "error_max_budget",
    "max_budget_usd": "error_max_budget_usd",
    "aborted": "error_during_execution",
    "model_error": "error_during_execution",
}


@dataclass(kw_only=True)
class SessionOptions:
    """How to run a session. ``model`` is a ``Model`` or a ``provider:name`` string."""

    model: Model | str
    cwd: Path = field(default_factory=Path.cwd)
    home: Path | None = None
    system_prompt: str | None = None
    """Replaces the main agent's guidance and environment block (``--system-prompt``); the
    project instructions and git snapshot are still added. Empty (``""``, the SDK's default):
    no system prompt, the project context goes in the first user message instead."""
    system_prompt_file: Path | None = None
    """Like ``system_prompt``, read from this file (``--system-prompt-file``); not both."""
    append_system_prompt: str | None = None
    """Added at the end of the main agent's system prompt (``--append-system-prompt``)."""
    tools: Sequence[Tool[Any]] | None = None
    """The main agent's whole tool list (default: the built-in tools)."""
    extra_tools: Sequence[Tool[Any]] = ()
    """Tools added to that list (e.g. ``@tool`` functions); children inherit them as any tool."""
    max_turns: int | None = None
    max_tokens: int | None = None
    max_wall_ms: int | None = None
    resume: str | None = None
    fallback_model: Model | str | None = None
    additional_dirs: Sequence[Path] = ()
    config: RuntimeConfig | None = None
    transcripts: bool = True
    sidecars: bool = True
    """Durable sidecar records of children (needed for recovery, resume, ``tasks``)."""
    retry: RetryPolicy | None = None
    agents_json: str | None = None
    """Extra definitions (the CLI's ``--agents``), strictly validated."""
    definitions: DefinitionSet | None = None
    """Use exactly these definitions instead of loading them from disk."""
    trusted: bool = True
    """Whether project-level definitions and settings are honoured (``-p`` trusts)."""
    permission_mode: str | None = None
    """Overrides the settings' ``defaultMode`` (the CLI's ``--permission-mode``)."""
    settings_file: Path | None = None
    """An extra settings file (the CLI's ``--settings``), merged last."""
    ask_callback: AskCallback | None = None
    """Answers permission ``ask``s; without one, asks are denied (headless behaviour)."""
    load_settings: bool = True
    """Read Claude Code / subagents settings files (permissions, hooks)."""
    store: Store | None = None
    """Where sidecar records go (default: the store ``SUBAGENTS_STORE`` names, else
    ``FileStore`` under ``SUBAGENTS_HOME``; ``store/select.py``)."""
    web_search: SearchBackend | None = None
    """The search engine behind ``WebSearch``; without one the tool says none is configured."""
    mcp_config: Sequence[str] = ()
    """``--mcp-config`` values: each a file or an inline JSON ``{"mcpServers": {...}}``."""
    strict_mcp_config: bool = False
    """Use only ``mcp_config`` and ``mcp_servers`` (``--strict-mcp-config``)."""
    mcp_servers: Mapping[str, Any] | None = None
    """More MCP servers by name: ``{command, args, env}`` or ``{type, url, headers}``."""
    mcp_sdk: SdkMessenger | None = None
    """Reaches the in-process MCP servers of a claude-agent-sdk program (headless protocol)."""
    background_wait_ms: int | None = None
    """How long the main agent waits for background children after its final answer
    (default ``SUBAGENTS_PRINT_BG_WAIT_MS``, 10 min; 0 = do not wait)."""
    executor: Executor | None = None
    """Where background children run (default: this process, ``agents.executor.LOCAL``; the
    CLI reads ``SUBAGENTS_EXECUTOR``, e.g. ``subagents.distributed`` for Ray)."""
    observer: RunObserver | None = None
    """Told about every agent, model call and tool call, e.g. ``subagents.telemetry.Telemetry``
    (default: OpenTelemetry from the environment when ``SUBAGENTS_TELEMETRY=1``, else none)."""
    session_id: str | None = None
    """The id of a new session (default: a fresh UUID); with ``resume`` only when forking."""
    fork_session: bool = False
    """With ``resume``: continue that history under a new session id instead of its own."""
    tool_names: Sequence[str] | None = None
    """The main agent's base tool set by name (Claude Code's ``--tools``); None = all."""
    allowed_tools: Sequence[str] = ()
    """Allow rules added for this session (``--allowedTools``)."""
    disallowed_tools: Sequence[str] = ()
    """Deny rules added for this session (``--disallowedTools``); a bare tool name also
    takes the tool away from the main agent."""
    max_budget_usd: float | None = None
    """Stop the turn once the session's cost (``models.pricing``) reaches this many dollars."""
    hooks: HookConfig | None = None
    """Hooks added to the settings' (e.g. an SDK's callbacks)."""
    json_schema: dict[str, Any] | None = None
    """Structured output: the main agent answers with a ``StructuredOutput`` call matching it."""
    partial_text: bool = False
    """Stream the main agent's answer: each piece of text is a ``ProgressEvent`` with subtype
    ``text_delta`` (``data["text"]``) as it arrives, before the whole ``AssistantEvent``."""


@dataclass(kw_only=True, repr=False)
class SessionResult:
    """The end of a session run: the SPEC §19 ``json`` object plus the live records.

    Its ``repr`` is a one-line summary, not every field: on Python 3.11 ``asyncio.run`` reprs
    the value its main coroutine returned twice (``Runner.run`` asks ``signal.getsignal`` for
    its SIGINT handler, a ``functools.partial`` over the main task; the enum look-up fails and
    formats the handler, the task and its result into a ``ValueError`` it drops), and the
    full repr of a 50-child fan-out's result is ~0.8 MB: ~7 ms each, 11 % of the run."""

    payload: dict[str, Any]
    agents: list[AgentRun]
    outcome: LoopOutcome

    def __repr__(self) -> str:
        payload = self.payload
        return (
            f"<SessionResult {payload.get('subtype')!r} session {payload.get('session_id')!r}"
            f" agents={len(self.agents)} turns={payload.get('num_turns')!r}>"
        )

    @property
    def subtype(self) -> str:
        return str(self.payload["subtype"])

    @property
    def is_error(self) -> bool:
        return bool(self.payload["is_error"])

    @property
    def result(self) -> str:
        return str(self.payload["result"])

    @property
    def session_id(self) -> str:
        return str(self.payload["session_id"])


def reason_text(reason: str) -> str:
    """What a result says when the run ended for ``reason`` without an error message."""
    return {
        "max_turns": "Reached the maximum number of turns",
        "max_tokens": "Reached the token budget",
        "max_wall_time": "Reached the wall-time budget",
        "max_budget_usd": "Reached the cost budget (USD)",
        "aborted": "The run was aborted",
        "model_error": "The model call failed",
    }.get(reason, reason)
