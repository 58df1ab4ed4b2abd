"""Which agent types an agent may spawn, and the catalog that tells its model (SPEC §20).

The spawnable types of an agent are the live definition set, minus every type an ``Agent(X)``
deny rule names, restricted to the caller's own allow-list when its definition lists
``Agent(a, b)`` (or ``Task(a, b)``) in its ``tools``. The same rules decide at spawn time
(``spawn_refusal``) and in the catalog, so the model is never offered a type the Agent tool
would refuse.

The catalog reaches the model as a ``<system-reminder>`` in the conversation, not in the Agent
tool's description: the tool array stays byte-identical whatever definitions exist (prompt
caching, forks, children with different allow-lists share one schema object), and a change of
definitions during a session is one more reminder in the next user message instead of a new
tool array that would invalidate the whole cached prefix. See ``docs/model-surface.md``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.agents.definitions import (
    AGENT_TOOL_NAMES,
    DefinitionSet,
    resolve_tool_names,
    tool_base_name,
)
from subagents.agents.schema import AgentDefinition, normalize_agent_type

if TYPE_CHECKING:
    from subagents.permissions.checker import PermissionChecker

MAX_LISTED_TOOLS = 12
"""Past this many tools a catalog entry says "+N more" (MCP servers can bring dozens)."""
MAX_DESCRIPTION_CHARS = 600
"""A definition's description is cut here in the catalog: it is a hint, not a manual."""
_TYPE_NAMES = re.compile(r"[\s,]+")

CATALOG_OPEN = "<system-reminder>"
CATALOG_CLOSE = "</system-reminder>"
CATALOG_HEADING = (
    "Agent types you can launch with the Agent tool. Set subagent_type to the name of the type "
    "whose description fits the task best:"
)
CATALOG_CHANGED_HEADING = (
    "The agent types available to you have changed; this list replaces the earlier one. Set "
    "subagent_type to the name of the type whose description fits the task best:"
)
FORK_NOTE = (
    "Omit subagent_type to fork yourself instead: the fork inherits this whole conversation and "
    "shares its prompt cache, so use it when the intermediate output is not worth keeping here."
)
NO_TYPES_NOTE = "No agent types are available to you: do the work yourself."


def agent_allow_list(definition: AgentDefinition | None) -> tuple[str, ...] | None:
    """The types named by ``Agent(a, b)`` entries of the definition's tools; None = any type.

    A bare ``Agent`` entry alone allows any type. When any entry names types, only those are
    allowed, even beside a bare ``Agent`` (the narrower reading: a restriction is never lost
    because a broader entry is also there).
    """
    if definition is None or definition.tools is None:
        return None
    names: list[str] = []
    restricted = False
    for entry in definition.tools:
        base = tool_base_name(entry)
        if base not in AGENT_TOOL_NAMES:
            continue
        inner = entry.strip()[len(base) :].strip()
        if inner.startswith("(") and inner.endswith(")"):
            restricted = True
            names.extend(n for n in _TYPE_NAMES.split(inner[1:-1]) if n)
    return tuple(names) if restricted else None


def allow_rule_text(allowed: Sequence[str]) -> str:
    return f"Agent({', '.join(allowed)})"


def spawn_refusal(
    caller: AgentDefinition | None, agent_type: str, permissions: PermissionChecker | None
) -> str | None:
    """Why the caller may not spawn ``agent_type`` (deny rule or its own allow-list), or None."""
    if permissions is not None:
        denial = permissions.agent_type_denial(agent_type)
        if denial:
            return denial
    allowed = agent_allow_list(caller)
    if allowed is None or caller is None:
        return None
    key = normalize_agent_type(agent_type)
    if any(normalize_agent_type(name) == key for name in allowed):
        return None
    where = f" ({caller.path})" if caller.path else f" ({caller.source})"
    return (
        f"Agent type '{agent_type}' has been denied by rule '{allow_rule_text(allowed)}' in the "
        f"tools of agent '{caller.name}'{where}: this agent may only spawn "
        f"{', '.join(allowed) or 'no agent types'}."
    )


def spawnable(
    definitions: DefinitionSet,
    caller: AgentDefinition | None,
    permissions: PermissionChecker | None,
) -> list[AgentDefinition]:
    """The definitions the caller may spawn, in load order (built-ins first)."""
    return [
        definition
        for definition in definitions.definitions.values()
        if spawn_refusal(caller, definition.name, permissions) is None
    ]


def render_catalog(
    types: Sequence[AgentDefinition],
    caller_tools: Sequence[str],
    *,
    fork_enabled: bool,
    changed: bool = False,
) -> str:
    """The reminder text: one line per type (name, when to use it, the tools it gets)."""
    lines = [CATALOG_OPEN, CATALOG_CHANGED_HEADING if changed else CATALOG_HEADING]
    for definition in types:
        lines.append(
            f"- {definition.name}: {_description(definition)} {_tools(definition, caller_tools)}"
        )
    if not types:
        lines.append(NO_TYPES_NOTE)
    if fork_enabled:
        lines.append(FORK_NOTE)
    lines.append(CATALOG_CLOSE)
    return "\n".join(lines)


def _description(definition: AgentDefinition) -> str:
    text = " ".join(definition.description.split())
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    return text


def _tools(definition: AgentDefinition, caller_tools: Sequence[str]) -> str:
    names = resolve_tool_names(definition, caller_tools)
    prefix = "(read-only; tools: " if definition.read_only else "(tools: "
    if not names:
        return f"{prefix}none)"
    shown = names[:MAX_LISTED_TOOLS]
    more = f", +{len(names) - len(shown)} more" if len(names) > len(shown) else ""
    return f"{prefix}{', '.join(shown)}{more})"


@dataclass(kw_only=True)
class CatalogFeed:
    """One agent's view of the catalog: the first text, then a new text only on a change.

    ``definitions`` is read on every call (the session may swap in a reloaded set), so the
    set it returns is always the live one; nothing is re-rendered unless the set, the
    permission rules or the caller's tools changed.
    """

    definitions: Callable[[], DefinitionSet]
    caller: AgentDefinition | None
    caller_tools: tuple[str, ...]
    permissions: Callable[[], PermissionChecker | None]
    fork_enabled: bool
    _key: tuple[int, int] | None = field(default=None, init=False)
    _text: str | None = field(default=None, init=False)
    _body: str | None = field(default=None, init=False)

    def initial(self) -> str:
        """The catalog for the agent's first message."""
        self._text = self._render(changed=False)
        self._body = self._render_body()
        return self._text

    def update(self) -> str | None:
        """A replacement catalog when what the agent may spawn changed since the last one."""
        key = self._current_key()
        if key == self._key:
            return None
        self._key = key
        body = self._render_body()
        if body == self._body:
            return None
        self._body = body
        self._text = self._render(changed=True)
        return self._text

    def _current_key(self) -> tuple[int, int]:
        # Identity of the live set and of the rule context: both are replaced, never mutated.
        permissions = self.permissions()
        context = permissions.context if permissions is not None else None
        return (id(self.definitions()), id(context))

    def _types(self) -> list[AgentDefinition]:
        return spawnable(self.definitions(), self.caller, self.permissions())

    def _render_body(self) -> str:
        return "\n".join(
            f"{d.name}\0{d.description}\0{_tools(d, self.caller_tools)}" for d in self._types()
        )

    def _render(self, *, changed: bool) -> str:
        self._key = self._current_key()
        return render_catalog(
            self._types(), self.caller_tools, fork_enabled=self.fork_enabled, changed=changed
        )


# --- live definitions ----------------------------------------------------------------------------


@dataclass(kw_only=True)
class DefinitionWatch:
    """Reloads the definition set when a definition file changed, at most once per interval.

    The fingerprint is the (path, mtime, size) of every definition folder and ``*.md`` file
    that could contribute; a change makes ``load`` run again and ``on_reload`` receive the new
    set. A reload that fails keeps the old set (a half-written file must not empty the list).
    """

    folders: Callable[[], list[Path]]
    load: Callable[[], DefinitionSet]
    on_reload: Callable[[DefinitionSet], None]
    interval_s: float = 1.0
    _fingerprint: tuple[tuple[str, int, int], ...] | None = field(default=None, init=False)
    _checked: float = field(default=0.0, init=False)

    def prime(self) -> None:
        self._fingerprint = self._scan()
        self._checked = time.monotonic()

    def check(self) -> bool:
        """Reload if the files changed; True when a new set was installed."""
        now = time.monotonic()
        if now - self._checked < self.interval_s:
            return False
        self._checked = now
        fingerprint = self._scan()
        if fingerprint == self._fingerprint:
            return False
        self._fingerprint = fingerprint
        try:
            definitions = self.load()
        except (OSError, ValueError):
            return False
        self.on_reload(definitions)
        return True

    def _scan(self) -> tuple[tuple[str, int, int], ...]:
        entries: list[tuple[str, int, int]] = []
        for folder in self.folders():
            try:
                stat = folder.stat()
            except OSError:
                continue
            entries.append((str(folder), stat.st_mtime_ns, 0))
            for path in sorted(folder.rglob("*.md")):
                try:
                    info = path.stat()
                except OSError:
                    continue
                entries.append((str(path), info.st_mtime_ns, info.st_size))
        return tuple(entries)


def definition_folders(cwd: Path, home: Path, subagents_home: Path, trusted: bool) -> list[Path]:
    """Every folder ``load_definitions`` may read, whether it exists yet or not."""
    folders = [home / ".claude" / "agents", subagents_home / "agents"]
    if not trusted:
        return folders
    start = cwd.resolve()
    chain = [start, *start.parents]
    git_root = next((p for p in chain if (p / ".git").exists()), None)
    chain = chain[: chain.index(git_root) + 1] if git_root is not None else [start]
    for folder in chain:
        folders += [folder / ".claude" / "agents", folder / ".subagents" / "agents"]
    return folders
