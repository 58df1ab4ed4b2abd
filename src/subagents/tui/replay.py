"""A resumed session's earlier conversation, shown again in the chat.

The session's transcript is read (``store.transcript.read_messages``, read-only) and every
message rendered as it was: the person's prompts, the answers and tool calls with their
results. Runtime blocks in user messages (the agent catalog, reminders, notifications) are
left out: they were never typed.
"""

from __future__ import annotations

from subagents.messages import Message
from subagents.session import Session
from subagents.store.transcript import read_messages
from subagents.tui.chat import ChatLog

RUNTIME_PREFIXES = ("<system-reminder>", "<task-notification>", "<teammate-message")
MAX_REPLAYED = 200


def replay_history(chat: ChatLog, session: Session) -> None:
    path = session.state.session_transcript(session.session_id)
    try:
        messages = read_messages(path)
    except (OSError, ValueError) as exc:
        chat.notice(f"(the earlier conversation could not be read: {exc})")
        return
    for message in messages[-MAX_REPLAYED:]:
        _replay(chat, message)
    chat.notice(f"— resumed session `{session.session_id}` —")


def _replay(chat: ChatLog, message: Message) -> None:
    if message["role"] == "assistant":
        chat.assistant(message)
        return
    content = message["content"]
    if isinstance(content, str):
        typed = [content]
    else:
        chat.tool_results(message)
        typed = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
    for text in typed:
        if text.strip() and not text.lstrip().startswith(RUNTIME_PREFIXES):
            chat.user(text)
