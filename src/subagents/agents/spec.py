"""``ChildSpec``: what one child is to be — the only thing that differs between kinds of child.

A fresh child of a definition (``fresh.definition_spec``), a fork (``fork.fork_spec``) and a
resume (``resume.resume_spec``) differ in *where their parts come from* — a definition, the
parent's own request bytes, a frozen snapshot — never in how a child is put together from them.
So each kind only fills in a ``ChildSpec``, and one function (``assembly.assemble``) builds every
child from one: identity and record, frame, permission checker, hooks, context and job.

What each kind puts in the spec:

===================  ==========================  ========================  =======================
field                fresh (a definition)        fork                      resume (a snapshot)
===================  ==========================  ========================  =======================
``agent_type``       the definition's name       ``fork``                  the source's type
``model``            input > definition > parent the parent's              the snapshot's
``system``           rendered for the child      the parent's bytes        the snapshot's bytes
``tools``            definition ∩ parent         the parent's (same        the snapshot's names,
                                                 objects and schemas)      this session's tools
``messages``         the prompt                  parent history + marker   source history + prompt
``thinking``         none                        the parent's              the snapshot's
``budget``           the definition's            ``FORK_MAX_TURNS``        the snapshot's
``definition``       the definition              none                      rebuilt from the record
``permissions``      derived (mode capped)       the parent's context      derived from the record
``lineage``          a new one                   a new one                 the source's, depth + 1
``workspace``        cwd or its own worktree     the parent's              the kept worktree
===================  ==========================  ========================  =======================

A teammate (``kind="teammate"``, docs/teams.md) is a fresh child of its definition whose spec
also names its ``team`` (team and member name); ``teams.spawn.teammate_job`` gives its job the
team inbox. Next: agent-scoped resources (MCP servers of the
definition, issue 17) are opened with the child and closed in its ``finally`` by
``child_run.run_child``, as its worktree is settled there now. Neither needs a fourth copy of the
assembly: see docs/agents.md, "One child, from spec to record".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from subagents.agents.memory import AgentMemory
from subagents.agents.schema import AgentDefinition
from subagents.loop.query import Budget
from subagents.messages import ContentBlock, Message
from subagents.models.base import Model, ToolSchema
from subagents.permissions.modes import PermissionMode
from subagents.store.records import Lineage
from subagents.tools.base import Tool

if TYPE_CHECKING:
    from subagents.agents.teams.membership import TeamMembership
    from subagents.mcp.servers import McpScope
    from subagents.worktrees.git import Worktree

ChildKind = Literal["fresh", "fork", "resume", "teammate"]


@dataclass(kw_only=True, frozen=True)
class Workspace:
    """Where a child works. ``cwd`` None: its parent's folder and roots; a ``cwd`` without
    ``roots`` makes it the only root."""

    cwd: Path | None = None
    roots: tuple[Path, ...] | None = None
    worktree: Worktree | None = None
    """The child's own worktree, settled when it ends (kept or removed)."""


IN_PARENTS_FOLDER = Workspace()
"""The workspace of a child placed nowhere of its own (most): one shared value (it is frozen),
not a frozen three-field build per child."""


_NO_NAMES: frozenset[str] = frozenset()


@dataclass(kw_only=True)
class ChildSpec:
    """Everything that makes one child what it is (see the module docstring)."""

    kind: ChildKind
    agent_type: str
    description: str
    prompt: str
    model: Model
    system: str
    tools: list[Tool[Any]]
    messages: list[Message]
    tool_schemas: list[ToolSchema] | None = None
    """The exact schema objects to send (a fork's are its parent's); None: the tools' own."""
    thinking: dict[str, Any] | None = None
    budget: Budget = field(default_factory=Budget)
    """Turns, tokens, wall time and cost; each ends the child with its own reason."""
    definition: AgentDefinition | None = None
    """What the child's record freezes (isolation, source) and the source of its read-only
    guard; None for a fork."""
    permission_mode: str = "default"
    """The mode shown when no permission rules are in force (else the derived checker's)."""
    requested_mode: PermissionMode | None = None
    """The Agent call's ``mode``: capped by the parent's, like the definition's."""
    inherit_permissions: bool = False
    """A fork keeps its parent's permission context as it is (no derivation)."""
    frontmatter_hooks: Mapping[str, Any] | None = None
    """The definition's own hooks, scoped to this child."""
    background: bool = False
    """Where it starts; ``AgentRun.is_background`` holds where it is."""
    tool_use_id: str | None = None
    agent_id: str | None = None
    """Drawn by the caller when something (a worktree) must be named after the child first."""
    lineage: Lineage | None = None
    """None: a new lineage rooted at the child itself."""
    workspace: Workspace = IN_PARENTS_FOLDER
    reminders: Callable[[], list[ContentBlock]] | None = None
    """Blocks for every later user message: catalog changes, critical reminder
    (``agents.reminders``)."""
    restate: Callable[[], list[ContentBlock]] | None = None
    """Blocks a compacted history starts with again (the full catalog, the critical
    reminder)."""
    task_text: str = ""
    """The task kept verbatim through compaction; "" = the prompt (a fork: its directive)."""
    memory: AgentMemory | None = None
    """The agent's memory folder (``memory:`` of its definition): a confinement root it may
    use whatever its mode; the index is already in ``system`` for a fresh child."""
    memory_only: frozenset[str] = _NO_NAMES
    """Tools the child holds only for its memory: they work only inside that folder."""
    mcp: McpScope | None = None
    """The definition's own MCP servers, started for this child (``agents.mcp_scope``); the
    job owns them and ``child_run.run_child`` closes them."""
    team: TeamMembership | None = None
    """A teammate's team and member name (``kind="teammate"``)."""

    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]


def new_spec(
    *,
    kind: ChildKind,
    agent_type: str,
    description: str,
    prompt: str,
    model: Model,
    system: str,
    tools: list[Tool[Any]],
    messages: list[Message],
    tool_schemas: list[ToolSchema] | None,
    budget: Budget,
    definition: AgentDefinition | None,
    permission_mode: str,
    background: bool,
    tool_use_id: str | None,
    workspace: Workspace,
) -> ChildSpec:
    """``ChildSpec(kind=..., ...)`` of these fields, the others at their defaults (the caller
    sets those it has), with every field set directly: each fresh child's spec is one
    (``fresh.definition_spec``), and a class called with keywords packs them into a dict and
    unpacks it for ``__init__``. Fifteen parameters, no more: Python 3.11 compiles a call with
    more than fifteen keywords into a dict and ``CALL_FUNCTION_EX`` (16 keywords cost 11.3 k
    instructions, 15 cost 3.8 k; docs/performance.md, session 15). The fields in the class's
    order; a field added to the class fails ``tests/test_run_builders.py`` until it is set
    here too."""
    spec: ChildSpec = _new(ChildSpec)
    spec.kind = kind
    spec.agent_type = agent_type
    spec.description = description
    spec.prompt = prompt
    spec.model = model
    spec.system = system
    spec.tools = tools
    spec.messages = messages
    spec.tool_schemas = tool_schemas
    spec.thinking = None
    spec.budget = budget
    spec.definition = definition
    spec.permission_mode = permission_mode
    spec.requested_mode = None
    spec.inherit_permissions = False
    spec.frontmatter_hooks = None
    spec.background = background
    spec.tool_use_id = tool_use_id
    spec.agent_id = None
    spec.lineage = None
    spec.workspace = workspace
    spec.reminders = None
    spec.restate = None
    spec.task_text = ""
    spec.memory = None
    spec.memory_only = _NO_NAMES
    spec.mcp = None
    spec.team = None
    return spec


_new = object.__new__
