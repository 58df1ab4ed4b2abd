"""Shell words after quote removal, as the program receives them, and how sure we are of that.

A ``Word`` is built from the pieces of one word in the syntax tree (see ``bash_parse``): unquoted
text, ``'raw'`` strings, ``"double"`` strings, ``$'ansi-c'`` strings, and expansions. ``text`` is
the value bash passes to the program when nothing in the word is expanded at run time; a word
with an expansion or substitution is *dynamic* and its ``text`` is the source as written.

Unquoted glob characters (``*``, ``?``, ``[``) make a word a *pattern* and an unquoted ``{a,b}`` or
``{1..3}`` makes it a *brace* word: bash may turn either into other words, so a command name
that is one is not a name we can match. Whether a character was quoted is tracked in a
*skeleton* (the word with every quoted, escaped or expanded character replaced by ``_``) so that
``'*'``, ``\\*`` and ``"{a,b}"`` stay literal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "Word",
    "decode_ansi_c",
    "has_unparsed_code",
    "has_unparsed_expansion",
    "has_unparsed_syntax",
    "literal_word",
    "name_set",
    "short",
    "unescape_double_quoted",
    "unescape_unquoted",
    "word_from_parts",
]

_GLOB = re.compile(r"[*?\[]")
_BRACE = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_HIDDEN = "_"


@dataclass(frozen=True, slots=True)
class Word:
    """One word of a simple command."""

    text: str
    """The value after quote removal (the source as written when ``dynamic``)."""
    source: str
    """The word as written."""
    dynamic: bool = False
    """An expansion or substitution decides the value when the command runs."""
    pattern: bool = False
    """Unquoted glob characters: bash may replace the word by file names."""
    brace: bool = False
    """Unquoted brace expansion: bash turns the word into several words."""

    @property
    def literal(self) -> bool:
        """The program receives exactly ``text`` as one argument."""
        return not (self.dynamic or self.pattern or self.brace)


def short(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters for a message."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def name_set(text: str) -> frozenset[str]:
    """The space-separated names of ``text`` (tables of programs, options, variables)."""
    return frozenset(text.split())


def literal_word(text: str) -> Word:
    """A word known exactly (a placeholder built by the analysis, not parsed)."""
    return Word(text=text, source=text)


def word_from_parts(parts: list[tuple[str, str, bool]], source: str) -> Word:
    """Join ``(value, skeleton, dynamic)`` parts into one word."""
    text = "".join(part[0] for part in parts)
    skeleton = "".join(part[1] for part in parts)
    dynamic = any(part[2] for part in parts)
    return Word(
        text=source if dynamic else text,
        source=source,
        dynamic=dynamic,
        pattern=_GLOB.search(skeleton) is not None,
        brace=_BRACE.search(skeleton) is not None,
    )


def unescape_unquoted(text: str) -> tuple[str, str]:
    """Remove backslashes from unquoted text (``\\<newline>`` disappears): value, skeleton."""
    value: list[str] = []
    skeleton: list[str] = []
    index = 0
    while index < len(text):
        ch = text[index]
        if ch == "\\" and index + 1 < len(text):
            nxt = text[index + 1]
            if nxt != "\n":
                value.append(nxt)
                skeleton.append(_HIDDEN)
            index += 2
            continue
        value.append(ch)
        skeleton.append(ch)
        index += 1
    return "".join(value), "".join(skeleton)


_DOUBLE_ESCAPABLE = frozenset('$`"\\')


def unescape_double_quoted(text: str) -> str:
    """The value of the literal part of a ``"..."`` string (only ``$ ` " \\ newline`` escape)."""
    out: list[str] = []
    index = 0
    while index < len(text):
        ch = text[index]
        if ch == "\\" and index + 1 < len(text):
            nxt = text[index + 1]
            if nxt == "\n":
                index += 2
                continue
            if nxt in _DOUBLE_ESCAPABLE:
                out.append(nxt)
                index += 2
                continue
        out.append(ch)
        index += 1
    return "".join(out)


_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def decode_ansi_c(body: str) -> str:
    """The value of ``$'body'`` as bash computes it (a NUL ends the string, as in bash)."""
    out: list[str] = []
    index = 0
    while index < len(body):
        ch = body[index]
        if ch != "\\" or index + 1 >= len(body):
            out.append(ch)
            index += 1
            continue
        char, index = _ansi_c_escape(body, index + 1)
        if char == "\0":
            break
        out.append(char)
    return "".join(out)


def _ansi_c_escape(body: str, index: int) -> tuple[str, int]:
    """Decode the escape whose letter is at ``index``; return it and the index after it."""
    letter = body[index]
    if letter in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[letter], index + 1
    if letter in "01234567":
        digits = _take(body, index, 3, "01234567")
        return chr(int(digits, 8) & 0xFF), index + len(digits)
    widths = {"x": 2, "u": 4, "U": 8}
    if letter in widths:
        digits = _take(body, index + 1, widths[letter], _HEX_DIGITS)
        if not digits:
            return "\\" + letter, index + 1
        code = int(digits, 16)
        return (chr(code) if code <= 0x10FFFF else "\ufffd"), index + 1 + len(digits)
    if letter == "c" and index + 1 < len(body):
        return chr(ord(body[index + 1]) & 0x1F), index + 2
    return "\\" + letter, index + 1


def _take(text: str, start: int, limit: int, allowed: frozenset[str] | str) -> str:
    end = start
    while end < len(text) and end - start < limit and text[end] in allowed:
        end += 1
    return text[start:end]


def _unescaped(text: str) -> str:
    """``text`` with every backslash-escaped character (and the backslash) replaced by ``_``."""
    return re.sub(r"\\.", "__", text, flags=re.DOTALL)


_CODE = re.compile(r"\$\(|`")
_SYNTAX = re.compile(r"\$[({]|[`;&|<>()\s'\"]")


def has_unparsed_code(text: str) -> bool:
    """An unescaped ``$(`` or backtick in text the grammar called literal (it would run)."""
    return _CODE.search(_unescaped(text)) is not None


_EXPANSION = re.compile(r"\$[({\[]|`")


def has_unparsed_expansion(text: str) -> bool:
    """An unescaped substitution, ``${...}``, ``$((...))`` or ``$[...]`` in text the grammar
    left unparsed where bash expands it: what it runs or evaluates cannot be seen (a plain
    ``$NAME`` only puts a value in)."""
    return _EXPANSION.search(_unescaped(text)) is not None


def has_unparsed_syntax(text: str) -> bool:
    """An unquoted word leaf holding shell syntax the grammar should have split off."""
    return _SYNTAX.search(_unescaped(text)) is not None
