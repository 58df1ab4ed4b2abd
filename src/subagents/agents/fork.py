"""Forks: a child that continues the parent's own conversation, sharing its prompt cache.

A fork's request repeats the parent's request byte for byte — the parent's already-rendered
system prompt (never re-rendered), the parent's exact tool array (the same schema objects, so
the same serialisation), the parent's thinking config and the parent's whole history, passed
through as it is — and only then adds one user message: a tool result for each tool call of the
parent's last turn (all with the same placeholder text, so sibling forks stay identical up to
their directive) and the fork directive with the task. Everything before the directive is a
prefix the provider has already cached for the parent.

The directive makes the fork a worker: no sub-agents, no questions, no commentary, stay in
scope, commit changes, report in a fixed shape. Forking inside a fork is refused; the marker in
the history is what tells a fork apart, so the rule survives a resumed session.
"""

from __future__ import annotations

from subagents.agents.agent_run import AgentFrame
from subagents.agents.spec import ChildSpec
from subagents.loop.query import Budget
from subagents.messages import ContentBlock, Message, text_block, tool_result_block, tool_uses
from subagents.tools.base import ToolError

FORK_AGENT_TYPE = "fork"
FORK_MAX_TURNS = 200
"""A fork has no definition to carry ``maxTurns``; this bounds it like Claude Code's forks."""
DIRECTIVE_OPEN = "<fork_directive>"
DIRECTIVE_CLOSE = "</fork_directive>"
PLACEHOLDER_RESULT = "Fork started: this work continues in a forked worker."
FORK_IN_FORK_ERROR = (
    "Fork is not available inside a forked worker: you are the fork. "
    "Do the work directly with your own tools."
)

DIRECTIVE = f"""{DIRECTIVE_OPEN}
You are now a forked worker, not the main agent. You share the conversation above, but from
here on you do one job and report back.

Rules:
1. Do not start sub-agents or forks; do the work yourself with your tools.
2. Do not ask questions, chat, or suggest next steps.
3. No commentary between tool calls; no meta-remarks.
4. Stay strictly inside the scope of your task.
5. If you change files, commit them before you report.
6. Keep the report under 500 words.
7. Begin the report with "Scope:" and use exactly this shape:
   Scope: <your assigned scope, restated>
   Result: <what you found or did>
   Key files: <the relevant paths>
   Files changed: <paths, with the commit hash>
   Issues: <problems, if any>
{DIRECTIVE_CLOSE}

Your task:
"""


def is_inside_fork(messages: list[Message]) -> bool:
    """True when the history carries a fork directive (this agent is a fork)."""
    for message in messages:
        if message["role"] != "user" or isinstance(message["content"], str):
            continue
        for block in message["content"]:
            if block["type"] == "text" and block["text"].startswith(DIRECTIVE_OPEN):
                return True
    return False


def fork_messages(parent_messages: list[Message], prompt: str) -> list[Message]:
    """The parent's history as it is, plus one user message: placeholders and the directive."""
    blocks: list[ContentBlock] = []
    if parent_messages and parent_messages[-1]["role"] == "assistant":
        blocks = [
            tool_result_block(call["id"], PLACEHOLDER_RESULT)
            for call in tool_uses(parent_messages[-1])
        ]
    blocks.append(text_block(DIRECTIVE + prompt))
    return [*parent_messages, {"role": "user", "content": blocks}]


def fork_spec(
    parent: AgentFrame, *, prompt: str, description: str, background: bool = False
) -> ChildSpec:
    """The spec of a fork of ``parent``; ``ToolError`` inside a fork (fork-in-fork)."""
    if parent.is_fork or is_inside_fork(parent.messages):
        raise ToolError(FORK_IN_FORK_ERROR)
    return ChildSpec(
        kind="fork",
        agent_type=FORK_AGENT_TYPE,
        description=description,
        prompt=prompt,
        model=parent.model,
        system=parent.system,
        tools=parent.tools,
        tool_schemas=parent.tool_schemas,
        messages=fork_messages(parent.messages, prompt),
        thinking=parent.thinking,
        budget=Budget(max_turns=FORK_MAX_TURNS),
        permission_mode=parent.permission_mode,
        inherit_permissions=True,
        background=background,
        task_text=DIRECTIVE + prompt,
    )
