"""The tool contract: what a tool declares, what it receives when called, what it may reach.

A tool is a class with a pydantic input model (its JSON schema is what the model sees), two
scheduling flags (read-only, concurrency-safe), a permission check, and an async ``call``. The loop
validates raw input against ``input_model`` before calling, so a tool's ``call`` only ever sees
valid, typed arguments; a ``ToolError`` raised inside ``call`` becomes an ``is_error`` result with
the message as written, any other exception becomes an ``is_error`` result naming the exception.

The seams a tool reaches through its ``ToolContext`` are typed Protocols here, implemented by the
layers above (which ``tools/`` never imports):

* ``ToolServices`` — the session: background shells, SendMessage, the task service behind
  TaskOutput/TaskStop (implemented by ``agents.services.SessionServices``);
* ``RunningAgent`` — the agent a context belongs to (``agents.runtime.AgentFrame``);
* ``LoopHooks`` — the hook points the loop calls (``hooks.engine.HookEngine``).

They live in this one module because they and ``ToolContext`` refer to each other.
"""

from __future__ import annotations

import contextvars
import importlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict

from subagents.abort import AbortSignal
from subagents.events import AgentRef, EventSink, discard
from subagents.models.base import ToolSchema
from subagents.observe import RunObserver
from subagents.processes import ProcessTracker
from subagents.tools.input_schemas import prebuilt_input_schema, prebuilt_schema

InputT = TypeVar("InputT", bound=BaseModel)
ModelT = TypeVar("ModelT", bound=BaseModel)

HOOK_APPROVED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "subagents_hook_approved", default=False
)
"""Set while a call that a PreToolUse hook allowed is checked: its ``ask`` needs no prompt."""
CURRENT_TOOL_USE_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "subagents_tool_use_id", default=None
)
"""The model's id of the call being authorized (a permission prompt names the call it asks for)."""

TRUNCATION_MARKER = "\n\n[... output truncated: {omitted} more characters not shown ...]"


class ToolInput(BaseModel):
    """Base for tool input models: unknown fields are an error, as they are for the model."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class BuiltinToolInput(ToolInput):
    """Base of the built-in tools' input models: each is built at its first validation
    (``defer_build``), and its JSON schema comes from the generated table in
    ``tools/input_schemas.py`` (not building ~18 models and schemas is ~7 % of a ``-p``
    start-up). A library user's ``ToolInput`` is built when its class is, as before."""

    model_config = ConfigDict(defer_build=True)


class LazyInput(Generic[ModelT]):
    """A built-in tool's ``input_model``, imported from its own module at the first read.

    ``input_model = LazyInput["ReadInput"]("subagents.tools.inputs.read", "ReadInput")``: a
    start-up that only offers the tool never creates the class (its schema comes from the
    table, ``input_schemas.prebuilt_input_schema``); the first read imports the module and puts
    the class in the tool class's namespace, so later reads are plain attribute look-ups."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        self.attribute = "input_model"

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.attribute = attribute

    def __get__(self, instance: object, owner: type | None = None) -> type[ModelT]:
        model: type[ModelT] = getattr(importlib.import_module(self.module), self.name)
        for klass in (owner or type(instance)).__mro__:
            if vars(klass).get(self.attribute) is self:
                setattr(klass, self.attribute, model)
                break
        return model


class ToolError(Exception):
    """A tool's expected failure; its message goes to the model as an ``is_error`` result."""


class ToolInputError(ValueError):
    """Input a tool's ``parse_input`` rejected; the message names the fields (as the model needs
    to fix its call), in the same shape as a pydantic validation error's."""


@dataclass(kw_only=True, slots=True)
class ToolOutput:
    """What a call produced. ``metadata`` carries structured facts (exit codes, files changed)."""

    content: str
    is_error: bool = False
    metadata: dict[str, Any] | None = None


@dataclass(kw_only=True, slots=True)
class PermissionResult:
    """A permission decision; ``updated_input`` replaces the call's arguments when set."""

    behavior: Literal["allow", "deny", "ask"]
    message: str = ""
    updated_input: dict[str, Any] | None = None


ALLOW = PermissionResult(behavior="allow")

CanUseTool = Callable[["Tool[Any]", BaseModel, "ToolContext"], Awaitable[PermissionResult]]


@runtime_checkable
class InstantPermission(Protocol):
    """A ``can_use_tool`` that can tell, without awaiting, that it would allow a call as it is.

    The loop asks ``allowed_at_once`` first (``permissions.checker.PermissionChecker`` answers
    it for a read-only call no rule can change); False sends the call to the awaited check as
    before. It answers True only where awaiting the check would allow the call with its input
    unchanged, nobody asked and nothing recorded but the allow itself; the loop still runs the
    PreToolUse hooks and the tool's own check around it."""

    def allowed_at_once(self, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> bool: ...


@runtime_checkable
class ReadGuard(Protocol):
    """The read permission rules, for each file a tool reads or lists (not just the call's path).

    A call's permission check sees one path; Grep and Glob then touch every file below it, and
    Edit shows the content it changed. Each such file is put to ``read_denial`` first."""

    def read_denial(self, path: Path | str, *, asks: bool) -> str | None:
        """Why reading the resolved ``path`` is refused (naming the rule), or None.

        ``asks``: an ``ask`` rule refuses too (a file met inside a search cannot be asked for
        one by one); False where the call's own check already asked about this path."""
        ...


@dataclass(kw_only=True, slots=True)
class CallInfo:
    """Per-call facts: the model's tool_use id and a way to report progress."""

    tool_use_id: str
    progress: Callable[[dict[str, Any]], None]


# -- the seams a context reaches --------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class PreToolVerdict:
    """What PreToolUse hooks decided. ``None`` decision = no opinion (normal permission flow)."""

    decision: Literal["allow", "deny", "ask"] | None = None
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    additional_context: str = ""


@dataclass(kw_only=True, slots=True)
class StopVerdict:
    """A Stop/SubagentStop hook may block the end of a run: the reason goes back to the model."""

    block: bool = False
    reason: str = ""


@dataclass(kw_only=True, slots=True)
class CompactVerdict:
    """What PreCompact hooks said: skip this compaction, or add to the summary instructions."""

    block: bool = False
    reason: str = ""
    instructions: str = ""


class LoopHooks(Protocol):
    """The hook points the loop calls; ``subagents.hooks`` implements them from settings.

    The loop knows nothing of settings files or shell commands: it calls these methods at the
    right moments and acts on what they return. ``None`` for ``ToolContext.hooks`` means no hooks
    at all, and costs nothing on the hot path."""

    async def pre_tool_use(
        self, tool_name: str, tool_input: dict[str, Any], tool_use_id: str, ctx: ToolContext
    ) -> PreToolVerdict: ...

    async def post_tool_use(
        self,
        tool_name: str,
        tool_input: dict[str, Any],
        tool_use_id: str,
        output: ToolOutput,
        ctx: ToolContext,
    ) -> str:
        """Runs after a call (PostToolUse, or PostToolUseFailure for an error result).

        Returns extra context to append to the tool result ("" for none)."""
        ...

    async def stop(self, final_text: str, ctx: ToolContext) -> StopVerdict: ...

    async def pre_compact(
        self, trigger: str, instructions: str, ctx: ToolContext
    ) -> CompactVerdict:
        """Before a compaction (``trigger``: auto|manual) of the agent ``ctx`` belongs to."""
        ...

    async def post_compact(self, trigger: str, summary: str, ctx: ToolContext) -> None:
        """After it, with the summary (empty when the oldest turns were dropped instead)."""
        ...


class TaskService(Protocol):
    """What TaskOutput and TaskStop need: every task of the session, by id or agent name."""

    async def output(self, target: str, *, block: bool, timeout_s: float) -> ToolOutput: ...

    async def stop(self, target: str) -> ToolOutput: ...


class ToolServices(Protocol):
    """What tools may ask of the session that runs them (``ToolContext.services``)."""

    @property
    def session_id(self) -> str: ...

    @property
    def tasks(self) -> TaskService | None:
        """The task service, or None where this session has none."""
        ...

    def transcript_for(self, agent_id: str) -> Path | None:
        """Where the transcript of ``agent_id`` goes (None: transcripts are off)."""
        ...

    async def start_background_shell(
        self, command: str, ctx: ToolContext, description: str | None
    ) -> ToolOutput:
        """``Bash(run_in_background=true)``: start ``command`` as a task; returns at once."""
        ...

    async def send_message(
        self, ctx: ToolContext, to: str, message: str, summary: str | None
    ) -> ToolOutput:
        """SendMessage: deliver to a running agent, or resume a finished one to receive it."""
        ...


class RunningAgent(Protocol):
    """The agent a context belongs to, as tools see it (``ToolContext.owner``)."""

    @property
    def is_background(self) -> bool:
        """Whether it runs in the background now (nobody waits for it)."""
        ...


@dataclass(kw_only=True)
class ToolContext:
    """What a tool may touch. Derived per child by a whitelist (see ``agents/context.py``).

    ``roots`` confine file tools: a path must resolve (symlinks followed) inside one of them.
    ``processes`` holds every process this agent started; the agent's cleanup kills what is left.
    ``read_files`` maps absolute paths to the mtime (ns) seen at the last read; children get a copy.
    """

    cwd: Path
    roots: tuple[Path, ...]
    abort: AbortSignal
    agent: AgentRef
    emit: EventSink = discard
    processes: ProcessTracker = field(default_factory=ProcessTracker)
    read_files: dict[str, int] = field(default_factory=dict)
    can_use_tool: CanUseTool | None = None
    read_guard: ReadGuard | None = None
    """Read rules applied to every file a tool reads or lists; None: no rules to apply."""
    hooks: LoopHooks | None = None
    env: dict[str, str] = field(default_factory=dict)
    services: ToolServices | None = None
    """The session's services (None: a tool run outside a session)."""
    owner: RunningAgent | None = None
    """The agent this context belongs to (``agents.runtime.AgentFrame`` in a session)."""
    observer: RunObserver | None = None
    """Told about each tool call and permission decision (telemetry; None: off, free)."""


def new_context(
    *,
    cwd: Path,
    roots: tuple[Path, ...],
    abort: AbortSignal,
    agent: AgentRef,
    emit: EventSink,
    processes: ProcessTracker,
    read_files: dict[str, int],
    can_use_tool: CanUseTool | None,
    read_guard: ReadGuard | None,
    hooks: LoopHooks | None,
    env: dict[str, str],
    services: ToolServices | None,
    owner: RunningAgent | None,
    observer: RunObserver | None,
) -> ToolContext:
    """``ToolContext(cwd=..., ...)`` with every field set directly: each child's context is
    one (``agents.context.create_subagent_context``), and a class called with fourteen keywords
    packs them into a dict and unpacks it for ``__init__`` (docs/performance.md, session 15).
    The fields in the class's order; a field added to the class fails
    ``tests/test_run_builders.py`` until it is set here too."""
    ctx: ToolContext = _new(ToolContext)
    ctx.cwd = cwd
    ctx.roots = roots
    ctx.abort = abort
    ctx.agent = agent
    ctx.emit = emit
    ctx.processes = processes
    ctx.read_files = read_files
    ctx.can_use_tool = can_use_tool
    ctx.read_guard = read_guard
    ctx.hooks = hooks
    ctx.env = env
    ctx.services = services
    ctx.owner = owner
    ctx.observer = observer
    return ctx


_new = object.__new__


class Tool(ABC, Generic[InputT]):
    """Base class of every tool. Subclasses set the class variables and implement ``call``."""

    name: str
    """Set by the class; a tool whose name is only known at run time (an MCP server's) sets it
    per instance."""
    description: str
    input_model: ClassVar[type[BaseModel]]
    aliases: ClassVar[tuple[str, ...]] = ()
    max_result_chars: int = 30_000
    durable_call_identity: ClassVar[bool] = False
    """True when the call must be in the transcript before it runs: it starts something (a
    child agent) whose result a restart may need to adopt into this conversation."""
    requires_permission: ClassVar[bool] = True
    """False for tools that only steer the runtime (TaskStop): rules and modes do not apply."""
    read_only_grants: ClassVar[bool] = True
    """Whether a read-only call is allowed without a rule. False where ``is_read_only`` is
    someone else's claim (an MCP server's ``readOnlyHint``): it still schedules the call as
    read-only, but the call is asked for like any other."""

    _schema_cache: ClassVar[dict[type[Any], ToolSchema]] = {}

    def parse_input(self, raw: dict[str, Any]) -> BaseModel:
        """Validate the model's raw input (``ValidationError`` or ``ToolInputError`` when it is
        not valid). Default: the input model; a tool with a run-time schema overrides it.
        The model's validator directly (what ``model_validate`` calls with no options): this
        runs for every tool call."""
        args: BaseModel = self.input_model.__pydantic_validator__.validate_python(raw)
        return args

    def is_read_only(self, args: InputT) -> bool:
        return False

    def is_concurrency_safe(self, args: InputT) -> bool:
        return False

    async def check_permissions(self, args: InputT, ctx: ToolContext) -> PermissionResult:
        """The tool's own verdict on these arguments, before any rule or mode is applied."""
        return ALLOW

    @abstractmethod
    async def call(self, args: InputT, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        """Do the work; raise ``ToolError`` for an expected failure."""

    def call_at_once(self, args: InputT, ctx: ToolContext, info: CallInfo) -> ToolOutput | None:
        """The call's output when the tool can give it without awaiting anything (raising as
        ``call`` would), else None — and then nothing has been done: ``call`` runs it. The
        leading calls of a concurrent group are asked (``scheduling._run_group``): each one
        answered here needs no task. Code run here runs in the calling agent's task and context,
        so it must not keep ``asyncio.current_task()`` or set a context variable. Default: None
        (only a tool that overrides it is asked)."""
        return None

    def schema(self) -> ToolSchema:
        """The schema the model sees; built once per tool class."""
        cls = type(self)
        cached = Tool._schema_cache.get(cls)
        if cached is None:
            cached = ToolSchema(
                name=self.name, description=self.description, input_schema=tool_input_schema(cls)
            )
            Tool._schema_cache[cls] = cached
        return cached


def tool_input_schema(tool: type[Tool[Any]]) -> dict[str, Any]:
    """A tool class's input schema; a ``LazyInput`` not read yet is served from the table
    without importing its model when the table vouches for it."""
    for klass in tool.__mro__:
        declared = vars(klass).get("input_model")
        if isinstance(declared, LazyInput):
            prebuilt = prebuilt_input_schema(declared.module, declared.name)
            if prebuilt is not None:
                return prebuilt
            break
        if declared is not None:
            break
    return input_json_schema(tool.input_model)


def input_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A compact JSON schema: no titles, no ``$defs`` indirection the model does not need.
    A built-in model's comes from the generated table when it is current (``input_schemas``)."""
    prebuilt = prebuilt_schema(model)
    return built_json_schema(model) if prebuilt is None else prebuilt


def built_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``input_json_schema`` as pydantic builds it."""
    schema: dict[str, Any] = _strip_titles(model.model_json_schema(by_alias=True))
    return schema


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        # Drop schema titles (strings); a *property* named "title" maps to a dict and stays.
        return {
            k: _strip_titles(v)
            for k, v in node.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def truncate(text: str, limit: int) -> str:
    """Cap ``text`` at ``limit`` characters, with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATION_MARKER.format(omitted=len(text) - limit)
