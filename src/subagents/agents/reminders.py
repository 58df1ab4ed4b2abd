"""What rides along with an agent's user messages: the agent catalog and the critical reminder.

Both go into the conversation as ``<system-reminder>`` text blocks, never into the system
prompt or the tool array, so those stay byte-identical for the whole run (and for forks):

* the **catalog** (``catalog.CatalogFeed``) of the agent types the agent may spawn, given to
  agents that hold the Agent tool: in full in the first message, and again only when what the
  agent may spawn changed (a definition file edited, added or removed during the session);
* a definition's **critical reminder**, repeated in every user message the agent receives
  (its task, each turn's tool results, delivered notifications), so it stays close to the end
  of the context however long the run gets.

Reminders are appended to messages as they are built, so the history is only ever extended:
a prefix once sent is never rewritten, and the transcript holds exactly what the model saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from subagents.agents.catalog import CatalogFeed, DefinitionWatch, spawn_refusal
from subagents.agents.runtime import AgentRuntime
from subagents.agents.schema import AgentDefinition
from subagents.messages import ContentBlock, Message, text_block, user_message

AGENT_TOOL_NAMES = ("Agent", "Task")
_AGENT_TOOL_SET = frozenset(AGENT_TOOL_NAMES)


def system_reminder(text: str) -> str:
    return f"<system-reminder>\n{text.strip()}\n</system-reminder>"


@dataclass(kw_only=True)
class TurnReminders:
    """The reminders of one agent; ``next_blocks`` is the loop's per-message hook."""

    catalog: CatalogFeed | None = None
    critical: str | None = None
    watch: DefinitionWatch | None = None
    context: str = ""
    """Project context (instructions, git status) carried in the first message instead of the
    system prompt: set when the system prompt is given as empty (``--system-prompt ""``)."""

    def first_message(self, prompt: str) -> Message:
        """The agent's task message: the catalog, the task, then the critical reminder."""
        blocks = self.first_blocks(prompt)
        return user_message(blocks) if len(blocks) > 1 else user_message(prompt)

    def first_blocks(self, prompt: str) -> list[ContentBlock]:
        blocks: list[ContentBlock] = []
        if self.catalog is not None:
            if self.watch is not None:
                self.watch.check()
            blocks.append(text_block(self.catalog.initial()))
        if self.context:
            blocks.append(text_block(system_reminder(self.context)))
        blocks.append(text_block(prompt))
        if self.critical:
            blocks.append(text_block(system_reminder(self.critical)))
        return blocks

    def restated_blocks(self) -> list[ContentBlock]:
        """Standing context again in full, for a history compaction replaced: the catalog (its
        first sending is gone with the summarised part) and the critical reminder."""
        blocks: list[ContentBlock] = []
        if self.catalog is not None:
            blocks.append(text_block(self.catalog.initial()))
        if self.context:
            blocks.append(text_block(system_reminder(self.context)))
        if self.critical:
            blocks.append(text_block(system_reminder(self.critical)))
        return blocks

    def next_blocks(self) -> list[ContentBlock]:
        """Blocks to append to the next user message the loop builds."""
        blocks: list[ContentBlock] = []
        if self.catalog is not None:
            if self.watch is not None:
                self.watch.check()
            changed = self.catalog.update()
            if changed is not None:
                blocks.append(text_block(changed))
        if self.critical:
            blocks.append(text_block(system_reminder(self.critical)))
        return blocks


def reminders_for(
    runtime: AgentRuntime, definition: AgentDefinition | None, tool_names: Sequence[str]
) -> TurnReminders | None:
    """The reminders an agent with this definition and these tools gets (None: nothing)."""
    # (one set operation, not a generator resumed per tool name: once per child)
    holds_agent = not _AGENT_TOOL_SET.isdisjoint(tool_names)
    critical = definition.critical_reminder if definition is not None else None
    if not holds_agent and not critical:
        return None
    feed = None
    if holds_agent:
        feed = CatalogFeed(
            definitions=lambda: runtime.definitions,
            caller=definition,
            caller_tools=tuple(tool_names),
            permissions=lambda: runtime.permissions,
            fork_enabled=runtime.config.fork_enabled
            and spawn_refusal(definition, "fork", runtime.permissions) is None,
        )
    return TurnReminders(catalog=feed, critical=critical, watch=runtime.definitions_watch)
