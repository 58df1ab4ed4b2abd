"""The scripted model's prompt-cache estimate: which prefix of a request was served before.

A scripted turn without ``usage`` reports what a provider's prompt cache would: the tokens of
the longest prefix (system prompt and tool schemas, then messages in order) that this request
shares with *any* earlier request to this model are ``cache_read_input_tokens``; the rest is
``cache_creation_input_tokens`` when it is at least ``scripted.CACHE_WRITE_MIN_TOKENS`` (a long
new part is what a provider writes to its cache) and plain ``input_tokens`` otherwise (a short
tail after the cached prefix). The three always add up to the plain estimate (characters / 4).
Every served request counts as written, as if the client put a cache breakpoint on its last
message. This module is the bookkeeping; ``ScriptedModel._usage`` turns it into tokens.

Prefixes are never serialised whole: every served prefix is a node of a tree whose roots
fingerprint the system prompt and the tool array (memoised by the list's identity). A node's
first child is known by identity alone; only when a second, different message follows the same
prefix (two agents, a fork) are its children fingerprinted and told apart by content, each
message once (memoised by its identity, keeping a reference so the id cannot be reused). An
agent keeps its place in the tree between calls (``AgentPrefix``), so a call costs O(new
messages) and an agent's own history, growing call after call, is never fingerprinted; a fork,
whose history is the parent's own message objects, walks the parent's nodes by identity. Past
``MEMO_LIMIT`` prefixes the tree starts afresh (as a provider's cache expires).
"""

from __future__ import annotations

import marshal
from typing import Any

import orjson

from subagents.messages import Message
from subagents.models.base import ModelRequest, ToolSchema

MEMO_LIMIT = 65_536
"""Prefixes the tree holds (and fingerprints it memoises) before it starts afresh."""


def json_chars(value: Any) -> int:
    """Characters of a JSON value, roughly as a tokenizer would see them (keys included)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        total = 0
        for key, item in value.items():
            # Strings inline: tool inputs are mostly flat dicts of strings.
            total += len(key) + (len(item) if isinstance(item, str) else json_chars(item))
        return total
    if isinstance(value, list):
        return sum(json_chars(v) for v in value)
    return len(str(value))


def message_chars(message: Message) -> int:
    """Characters of a message's texts, tool results, tool uses and thinking."""
    content = message["content"]
    if isinstance(content, str):
        return len(content)
    total = 0
    for block in content:
        kind = block["type"]
        if kind == "text":
            total += len(block["text"])  # type: ignore[typeddict-item]
        elif kind == "tool_result":
            inner = block["content"]  # type: ignore[typeddict-item]
            # A string result (the usual one) inline: ``json_chars`` of it is its length.
            total += len(inner) if type(inner) is str else json_chars(inner)
        elif kind == "tool_use":
            total += len(block["name"]) + json_chars(block["input"])  # type: ignore[typeddict-item]
        elif kind == "thinking":
            total += len(block["thinking"])  # type: ignore[typeddict-item]
    return total


def message_fingerprint(message: Message) -> int:
    """A hash of a message's content. Messages are JSON data, and what a provider's cache sees
    is their JSON: ``orjson``'s bytes (equal content, equal bytes, keys in order; ``1``, ``1.0``
    and ``true`` apart) at about a third of ``marshal``'s cost — this runs for every message
    that must be told apart. What orjson refuses (integers beyond 64 bits, non-string keys) is
    hashed by ``content_hash``."""
    try:
        return hash(orjson.dumps(message))
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return content_hash(message)


def schema_fingerprint(tool: ToolSchema) -> int:
    return content_hash((tool.name, tool.description, tool.input_schema))


def content_hash(value: Any) -> int:
    """A hash of plain data that equal content always gives. ``marshal`` format 2 writes no
    back-references (so equal values give equal bytes, whatever objects they share) and tells
    types apart like ``repr``, at two to five times its speed; anything it cannot encode falls
    back to ``repr``."""
    try:
        return hash(marshal.dumps(value, 2))
    except ValueError:
        return hash(repr(value))


def _remember(memo: dict[int, Any], key: int, value: Any) -> None:
    """Insert, dropping the oldest entry past the limit (a dropped id is simply recomputed)."""
    if len(memo) >= MEMO_LIMIT:
        del memo[next(iter(memo))]
    memo[key] = value


class Node:
    """One served prefix: the root (system + tools) or a prefix ending at ``message``.

    Its children are the messages that followed it in some request: while there is one, it is
    ``lone``, known by identity and never fingerprinted (an agent's own history grows that way,
    call after call); a second one turns them into ``children``, keyed by content."""

    __slots__ = ("children", "lone", "message", "size")

    def __init__(self, message: Message | None, size: int) -> None:
        self.message = message
        self.size = size
        """Characters of the prefix (the system prompt counts, tool schemas do not)."""
        self.lone: Node | None = None
        self.children: dict[int, Node] | None = None


class PrefixCache:
    """Every prefix a model has served, as a tree from each root, and the memoised
    fingerprints of the messages that had to be told apart by content."""

    __slots__ = ("_messages", "_schemas", "_tools", "nodes", "roots")

    def __init__(self) -> None:
        self.roots: dict[int, Node] = {}
        self.nodes = 0
        """Prefixes in the tree: past ``MEMO_LIMIT`` it starts afresh (as a provider's cache
        expires), so the messages of long-finished agents are not kept forever."""
        self._tools: dict[int, tuple[list[ToolSchema], int]] = {}
        self._schemas: dict[int, tuple[ToolSchema, int]] = {}
        """Each tool schema's fingerprint by identity: every child of a type gets a tool list
        of its own made of the same schema objects (one per tool class), ~17 KB of schemas for
        a general-purpose child, so a list is fingerprinted from its schemas' memoised ones."""
        self._messages: dict[int, tuple[Message, int]] = {}

    def root(self, system: str, tools: list[ToolSchema]) -> tuple[Node, bool]:
        """The root node of (system, tools), and whether it was served before."""
        entry = self._tools.get(id(tools))
        if entry is None or entry[0] is not tools:
            entry = (tools, hash(tuple([self._schema(tool) for tool in tools])))
            _remember(self._tools, id(tools), entry)
        key = hash((system, entry[1]))
        node = self.roots.get(key)
        if node is not None:
            return node, True
        node = self.roots[key] = Node(None, len(system))
        self.count()
        return node, False

    def _schema(self, tool: ToolSchema) -> int:
        entry = self._schemas.get(id(tool))
        if entry is None or entry[0] is not tool:
            entry = (tool, schema_fingerprint(tool))
            _remember(self._schemas, id(tool), entry)
        return entry[1]

    def fingerprint(self, message: Message) -> int:
        """The message's fingerprint, computed once per message object."""
        memo = self._messages
        key = id(message)
        entry = memo.get(key)
        if entry is None or entry[0] is not message:
            entry = (message, message_fingerprint(message))
            _remember(memo, key, entry)
        return entry[1]

    def child(self, parent: Node, message: Message) -> Node | None:
        """The prefix ``parent`` + ``message`` if it was served before, else None."""
        lone = parent.lone
        if lone is not None:
            if lone.message is message:  # the same object: a fork's copy of its parent's history
                return lone
            # A second message after this prefix: from now on its children are told by content.
            assert lone.message is not None
            parent.children = {self.fingerprint(lone.message): lone}
            parent.lone = None
        elif parent.children is None:
            return None
        return parent.children.get(self.fingerprint(message))

    def add(self, parent: Node, message: Message, size: int) -> Node:
        """A new prefix after ``child`` found none."""
        node = Node(message, size)
        children = parent.children
        if children is None:
            parent.lone = node
        else:
            children[self.fingerprint(message)] = node  # memoised by ``child`` already
        self.count()
        return node

    def count(self) -> None:
        self.nodes += 1
        if self.nodes > MEMO_LIMIT:
            self.start_afresh()

    def start_afresh(self) -> None:
        """Forget every prefix: agents holding nodes of the old tree go on from them (their
        own prefixes stay cached), new requests find none."""
        self.roots = {}
        self.nodes = 0


class AgentPrefix:
    """One agent's place in the tree between its calls, and its last answer's characters."""

    __slots__ = ("answer", "answer_chars", "base", "counted_messages", "root_of", "tip")

    def __init__(self) -> None:
        self.counted_messages = 0
        self.tip: Node | None = None
        """The prefix of the last request (its ``message`` is the last counted one)."""
        self.base: Node | None = None
        """The root ``tip`` grows from."""
        self.root_of: tuple[str, list[ToolSchema], Node] | None = None
        """(system, tools, root) of the last call: an agent sends the same objects each time."""
        self.answer: Message | None = None
        self.answer_chars = 0
        """The last answer the model built for the agent, with the characters counted as it
        was built (``message_chars`` of it, without walking its tool inputs again): the loop
        sends the same object back in the agent's next request."""

    def input_chars(self, request: ModelRequest, cache: PrefixCache) -> tuple[int, int]:
        """(system + message characters, characters of the longest already-served prefix).

        Only messages not seen on earlier calls are looked at. The walk restarts from the root
        when the root changed, the history shrank or its last counted message was replaced
        (compaction, a resumed agent reusing the id). Once a prefix is new, every longer one
        is: the tree only grows from there (nothing is fingerprinted on an agent's own path).
        """
        messages = request.messages
        size = len(messages)
        root_of = self.root_of
        shared = -1  # none missed yet
        if root_of is not None and root_of[0] is request.system and root_of[1] is request.tools:
            root = root_of[2]
        else:
            root, known = cache.root(request.system, request.tools)
            self.root_of = (request.system, request.tools, root)
            if not known:
                shared = 0
        seen, node = self.counted_messages, self.tip
        if (
            node is None
            or self.base is not root
            or seen > size
            or (seen and messages[seen - 1] is not node.message)
        ):
            node, seen, self.base = root, 0, root
        answer = self.answer
        if shared < 0 and node.lone is None and node.children is None:
            # Nothing followed this prefix yet (an agent's own history, call after call): the
            # next message is new, and ``child`` would only say so. Served up to here.
            shared = node.size
        for index in range(seen, size):
            message = messages[index]
            if shared < 0:
                found = cache.child(node, message)
                if found is not None:
                    node = found
                    continue
                shared = node.size
                chars = self.answer_chars if message is answer else message_chars(message)
                node = cache.add(node, message, node.size + chars)
                continue
            # Below a new prefix: its only child, nothing to look up (``add``, inlined).
            chars = self.answer_chars if message is answer else message_chars(message)
            new = node.lone = Node(message, node.size + chars)
            node = new
            cache.nodes += 1
            if cache.nodes > MEMO_LIMIT:
                cache.start_afresh()
        self.tip, self.counted_messages = node, size
        return node.size, node.size if shared < 0 else shared
