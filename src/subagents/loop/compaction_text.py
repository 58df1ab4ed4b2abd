"""The words of compaction: what the summariser is asked, and what the agent reads afterwards.

Claude Code's own prompt is Anthropic's text; this carries the same information in our words:
the sections a summary must have so that an agent can go on working from it alone, and a
continuation message that puts the agent's task, the summary and the files it was reading back
in front of it (docs/compaction.md §2).
"""

from __future__ import annotations

from collections.abc import Sequence

from subagents.messages import ContentBlock, TextBlock, text_block

SUMMARY_INSTRUCTION = """\
The conversation so far is about to be replaced by a summary, because it no longer fits the \
context window. Write that summary now. It is all you will have to continue the work from, so \
it must be complete, precise and technical. Answer with text only: do not call any tool.

Use these sections, in this order:

1. Request and intent: everything the user (or the agent that delegated this work) asked for, \
and what they are trying to achieve.
2. Key technical concepts: technologies, frameworks, conventions and decisions that matter.
3. Files and code: every file read, created or changed; why it matters; the important \
snippets, signatures and changes, quoted exactly.
4. Errors and fixes: each problem met, how it was fixed, and any feedback received about it.
5. Problem solving: what was solved, and what is still being investigated.
6. All user messages: every message from the user that is not a tool result, in order, \
quoted or closely paraphrased.
7. Pending tasks: what was asked for and is not done yet.
8. Current work: precisely what was being worked on just before this summary, with file \
names and code.
9. Next step: the next action, only if it follows directly from the latest request; quote \
the latest instruction word for word so the task cannot drift."""

_INTRO = (
    "This conversation was compacted: its earlier part no longer fit the context window and "
    "was replaced by the summary below. The task you were given comes first, as it was given; "
    "then the summary of the work so far; then the files you were reading, as they are now."
)
_INTRO_NO_TASK = (
    "This conversation was compacted: its earlier part no longer fit the context window and "
    "was replaced by the summary below, followed by the files you were reading, as they are now."
)
_CONTINUE = (
    "Continue the work from where it stopped, with the next step, without asking for anything "
    "to be repeated. Do not mention that the conversation was compacted."
)
_LATEST = "The latest input, not yet answered:"


def instruction(extra: str | None) -> str:
    """The summary request's instruction, with a PreCompact hook's or the user's additions."""
    if not extra or not extra.strip():
        return SUMMARY_INSTRUCTION
    return f"{SUMMARY_INSTRUCTION}\n\nAlso follow these instructions for the summary:\n{extra}"


def continuation_blocks(
    summary: str,
    *,
    task_text: str,
    files: Sequence[tuple[str, str]],
    standing: Sequence[ContentBlock] = (),
    latest: Sequence[ContentBlock],
    continue_work: bool,
) -> list[ContentBlock]:
    """The blocks of the one user message a compacted history starts with.

    The task is a block of its own, verbatim (a fork's begins with its directive, which is how
    a fork is recognised), and the summary appears verbatim."""
    blocks: list[ContentBlock] = [text_block(_INTRO if task_text else _INTRO_NO_TASK)]
    if task_text:
        blocks.append(text_block(task_text))
    blocks.append(text_block(f"Summary of the conversation so far:\n\n{summary}"))
    blocks += file_blocks(files)
    blocks += standing
    if latest:
        blocks.append(text_block(_LATEST))
        blocks += latest
    if continue_work:
        blocks.append(text_block(_CONTINUE))
    return blocks


def file_blocks(files: Sequence[tuple[str, str]]) -> list[TextBlock]:
    return [
        text_block(f"Contents of {path}, read again after compaction:\n{content}")
        for path, content in files
    ]


def truncation_marker(dropped: int, reason: str, task_text: str) -> list[ContentBlock]:
    """The opening of a history whose oldest turns were dropped because no summary came."""
    note = (
        f"[{dropped} earlier message(s) of this conversation were removed to fit the context "
        f"window, because summarising them failed ({reason}). What follows is the most recent "
        "part. Check the current state of files before relying on what you remember.]"
    )
    blocks: list[ContentBlock] = [text_block(note)]
    if task_text:
        blocks.append(text_block(task_text))
    return blocks
