"""subagents: a runtime for Claude-Code-style sub-agents.

The public API is what this package exports (``__all__``, pinned by tests/test_public_api.py):

* running — ``Session``, ``SessionOptions``, ``RuntimeConfig``; what a run returns
  (``SessionResult``, with an ``AgentRun`` per agent and ``Usage``);
* models — the ``Model`` protocol, ``ModelError``, and ``ScriptedModel`` (no network, no key:
  scripted turns or a function per turn);
* tools — the ``Tool`` base with ``ToolInput``, ``ToolContext``, ``ToolOutput``, ``ToolError``,
  ``CallInfo``, ``PermissionResult``; the ``tool`` decorator (a typed async function as a tool,
  a ``FunctionTool``); ``core_tools`` (the built-in file and shell tools);
* events — ``Event`` and each kind (``InitEvent``, ``AssistantEvent``, ``ToolResultsEvent``,
  ``ProgressEvent``, ``SystemEvent``, ``NotificationEvent``, ``ResultEvent``), ``AgentRef``;
* definitions — ``AgentDefinition``, ``DefinitionSet``, ``load_definitions``;
* durable records — the ``Store`` protocol, ``MemoryStore``, ``FileStore``.

Everything else (``subagents.agents``, ``loop``, ``store``, ...) is the implementation: usable, but
not a promise. Importing this package does nothing but define names — no I/O, no directories,
no optional imports: each name is imported when it is first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AgentDefinition": "subagents.agents.schema",
    "AgentRef": "subagents.events",
    "AgentRun": "subagents.agents.agent_run",
    "AssistantEvent": "subagents.events",
    "CallInfo": "subagents.tools.base",
    "DefinitionSet": "subagents.agents.definitions",
    "Event": "subagents.events",
    "FileStore": "subagents.store.files",
    "FunctionTool": "subagents.tools.function_tool",
    "InitEvent": "subagents.events",
    "MemoryStore": "subagents.store.memory",
    "Message": "subagents.messages",
    "Model": "subagents.models.base",
    "ModelError": "subagents.models.base",
    "NotificationEvent": "subagents.events",
    "PermissionResult": "subagents.tools.base",
    "ProgressEvent": "subagents.events",
    "ResultEvent": "subagents.events",
    "RuntimeConfig": "subagents.config",
    "ScriptedModel": "subagents.models.scripted",
    "Session": "subagents.session",
    "SessionOptions": "subagents.session",
    "SessionResult": "subagents.session",
    "Store": "subagents.store.protocol",
    "SystemEvent": "subagents.events",
    "Tool": "subagents.tools.base",
    "ToolContext": "subagents.tools.base",
    "ToolError": "subagents.tools.base",
    "ToolInput": "subagents.tools.base",
    "ToolOutput": "subagents.tools.base",
    "ToolResultsEvent": "subagents.events",
    "Usage": "subagents.messages",
    "core_tools": "subagents.tools",
    "load_definitions": "subagents.agents.definitions",
    "tool": "subagents.tools.function_tool",
}

__all__ = [
    "AgentDefinition",
    "AgentRef",
    "AgentRun",
    "AssistantEvent",
    "CallInfo",
    "DefinitionSet",
    "Event",
    "FileStore",
    "FunctionTool",
    "InitEvent",
    "MemoryStore",
    "Message",
    "Model",
    "ModelError",
    "NotificationEvent",
    "PermissionResult",
    "ProgressEvent",
    "ResultEvent",
    "RuntimeConfig",
    "ScriptedModel",
    "Session",
    "SessionOptions",
    "SessionResult",
    "Store",
    "SystemEvent",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolInput",
    "ToolOutput",
    "ToolResultsEvent",
    "Usage",
    "__version__",
    "core_tools",
    "load_definitions",
    "tool",
]


def __getattr__(name: str) -> object:
    """Import an exported name on first use (PEP 562), then keep it."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'subagents' has no attribute {name!r}")
    value: object = vars(import_module(module))[name]
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from subagents.agents.agent_run import AgentRun
    from subagents.agents.definitions import DefinitionSet, load_definitions
    from subagents.agents.schema import AgentDefinition
    from subagents.config import RuntimeConfig
    from subagents.events import (
        AgentRef,
        AssistantEvent,
        Event,
        InitEvent,
        NotificationEvent,
        ProgressEvent,
        ResultEvent,
        SystemEvent,
        ToolResultsEvent,
    )
    from subagents.messages import Message, Usage
    from subagents.models.base import Model, ModelError
    from subagents.models.scripted import ScriptedModel
    from subagents.session import Session, SessionOptions, SessionResult
    from subagents.store.files import FileStore
    from subagents.store.memory import MemoryStore
    from subagents.store.protocol import Store
    from subagents.tools import core_tools
    from subagents.tools.base import (
        CallInfo,
        PermissionResult,
        Tool,
        ToolContext,
        ToolError,
        ToolInput,
        ToolOutput,
    )
    from subagents.tools.function_tool import FunctionTool, tool
