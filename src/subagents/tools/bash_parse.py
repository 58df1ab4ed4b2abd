"""Reading shell commands without running them: splitting, redirections, read-only checks.

Used by the Bash tool (a read-only command may run concurrently with other read-only calls), by
read-only agents (Explore and Plan may not run a command that changes state) and by permission
rules (``Bash(git status:*)`` must hold for *every* simple command of a compound one, so
``git status && rm -rf x`` is not covered by it).

This is not a shell parser. It understands the parts of bash syntax that decide *which simple
commands run* (operators, quotes, escapes, subshells, groups, command and process substitution,
here-documents, comments) and *whether one writes a file* (redirections, ``tee``). Everything it
does not understand makes ``is_read_only_command`` answer False: it fails closed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from subagents.tools.bash_readonly import is_read_only_words, program_name

__all__ = [
    "has_output_redirection",
    "is_read_only_command",
    "looks_interactive",
    "split_commands",
]

# Words that open or close a compound command; they are not commands themselves.
_LEADING_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{"})
_CLOSING_WORDS = frozenset({"fi", "done", "esac", "}"})
_LOOP_HEADS = ("for ", "for\t", "select ")


def split_commands(command: str) -> list[str]:
    """Split a compound command into the simple commands it would run, in order.

    Operators (``&&`` ``||`` ``;`` ``|`` ``&``, newlines), subshells and ``{ ...; }`` groups
    separate commands; the commands inside ``$( ... )``, backticks and ``<( ... )`` are returned
    as items of their own (the command holding the substitution is kept as written). Quotes and
    backslash escapes are respected: ``echo "a && b"`` is one command.
    """
    splitter = _Splitter(command)
    splitter.parse(closer=None)
    return splitter.commands


class _Splitter:
    """A single left-to-right scan; nested constructs recurse with their closing character."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.commands: list[str] = []
        self._heredocs: list[tuple[str, bool]] = []

    def _peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.text[index] if index < len(self.text) else ""

    def parse(self, closer: str | None) -> None:
        """Collect commands until ``closer`` (consumed) or the end of the text."""
        buf: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if closer is not None and ch == closer:
                self.pos += 1
                self._flush(buf)
                return
            if ch in "\n;&|)":
                self._operator(ch, buf)
            elif ch == "(":
                self._open_paren(buf)
            elif ch == "#" and (not buf or buf[-1][-1:].isspace()):
                self._skip_comment()
            elif ch == "<" and self._peek(1) == "<" and self._peek(2) != "<":
                buf.append(self._heredoc_start())
            else:
                buf.append(self._word_part(ch))
        self._flush(buf)

    def _operator(self, ch: str, buf: list[str]) -> None:
        if ch == "&" and self._peek(1) == ">":  # `&>file` is a redirection, not `&`
            buf.append("&>")
            self.pos += 2
            return
        self._flush(buf)
        self.pos += 1
        if ch == "\n":
            self._skip_heredoc_bodies()
        elif ch != ")" and self._peek() in "&|;" and self._peek():
            self.pos += 1  # the second character of `&&`, `||`, `;;`, `|&`, `;&`

    def _open_paren(self, buf: list[str]) -> None:
        if buf and buf[-1].endswith("="):  # array assignment `a=(x y)`: a word, not a subshell
            buf.append(self._balanced("(", ")"))
            return
        self._flush(buf)
        self.pos += 1
        self.parse(closer=")")

    def _word_part(self, ch: str) -> str:
        """Consume one unit of a word (quoted string, escape, substitution, character)."""
        nxt = self._peek(1)
        if ch == "\\":
            self.pos += 2
            return "" if nxt == "\n" else ch + nxt  # backslash-newline continues the line
        if ch == "'":
            end = self.text.find("'", self.pos + 1)
            end = len(self.text) if end < 0 else end + 1
            part, self.pos = self.text[self.pos : end], end
            return part
        if ch == '"':
            return self._double_quoted()
        if ch in "$<>" and nxt == "(" and self._peek(2) != "(":
            return self._substitution(prefix=ch + "(", closer=")")
        if ch == "$" and nxt in "({":
            return self._balanced(ch + nxt, ")" if nxt == "(" else "}")
        if ch == "`":
            return self._substitution(prefix="`", closer="`")
        if (ch == ">" and nxt in "&|>") or (ch == "<" and nxt in "&>"):
            self.pos += 2
            return ch + nxt
        self.pos += 1
        return ch

    def _substitution(self, *, prefix: str, closer: str) -> str:
        """Parse the inner commands of ``$(...)``/`` `...` ``/``<(...)``; return its source."""
        start = self.pos
        self.pos += len(prefix)
        self.parse(closer=closer)
        return self.text[start : self.pos]

    def _double_quoted(self) -> str:
        start = self.pos
        self.pos += 1
        while self.pos < len(self.text) and self.text[self.pos] != '"':
            ch, nxt = self.text[self.pos], self._peek(1)
            if ch == "\\":
                self.pos += 2
            elif (ch == "$" and nxt == "(" and self._peek(2) != "(") or ch == "`":
                self._substitution(
                    prefix="`" if ch == "`" else "$(", closer=ch if ch == "`" else ")"
                )
            elif ch == "$" and nxt in "({":
                self._balanced(ch + nxt, ")" if nxt == "(" else "}")
            else:
                self.pos += 1
        self.pos = min(self.pos + 1, len(self.text))
        return self.text[start : self.pos]

    def _balanced(self, opener: str, closer: str) -> str:
        """A verbatim span (``$((..))``, ``${..}``, ``a=(..)``) closed at the matching closer."""
        start = self.pos
        self.pos += len(opener)
        depth = 1
        open_char = opener[-1]
        while self.pos < len(self.text) and depth:
            ch = self.text[self.pos]
            if ch == "\\":
                self.pos += 1
            elif ch in "'\"":
                end = self.text.find(ch, self.pos + 1)
                self.pos = len(self.text) - 1 if end < 0 else end
            elif ch == open_char:
                depth += 1
            elif ch == closer:
                depth -= 1
            self.pos += 1
        return self.text[start : self.pos]

    def _skip_comment(self) -> None:
        end = self.text.find("\n", self.pos)
        self.pos = len(self.text) if end < 0 else end

    def _heredoc_start(self) -> str:
        """Consume ``<<[-]WORD`` and remember WORD: its body lines are not commands."""
        start = self.pos
        self.pos += 2
        strip_tabs = self._peek() == "-"
        if strip_tabs:
            self.pos += 1
        while self._peek() in (" ", "\t") and self._peek():
            self.pos += 1
        word_start = self.pos
        while self.pos < len(self.text) and not (
            self.text[self.pos].isspace() or self.text[self.pos] in ";&|<>()"
        ):
            self.pos += 1
        delimiter = re.sub(r"[\"'\\]", "", self.text[word_start : self.pos])
        if delimiter:
            self._heredocs.append((delimiter, strip_tabs))
        return self.text[start : self.pos]

    def _skip_heredoc_bodies(self) -> None:
        while self._heredocs:
            delimiter, strip_tabs = self._heredocs.pop(0)
            while self.pos < len(self.text):
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end < 0 else end
                line = self.text[self.pos : end]
                self.pos = min(end + 1, len(self.text))
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break

    def _flush(self, buf: list[str]) -> None:
        text = _strip_keywords("".join(buf).strip())
        buf.clear()
        if text and not text.startswith(_LOOP_HEADS):
            self.commands.append(text)


def _strip_keywords(text: str) -> str:
    """Drop compound-command keywords (`if`, `do`, `{`, `fi`, ...) around a simple command."""
    while True:
        head, _, rest = text.partition(" ")
        if head in _LEADING_KEYWORDS or head in _CLOSING_WORDS:
            text = rest.strip()  # `done < file` keeps its redirection
        else:
            return text


# --------------------------------------------------------------------------- words, redirections


@dataclass(frozen=True, slots=True)
class _Redirect:
    op: str
    target: str


_REDIRECT = re.compile(r"\d*(&>>|&>|>>|>\||>&|<<<|<<-|<<|<>|<&|>|<)(?!\()")
_WRITE_OPS = frozenset({"&>>", "&>", ">>", ">|", ">&", "<>", ">"})
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})


def _tokenize(simple: str) -> tuple[list[str], list[_Redirect]]:
    """The words (quotes removed) and redirections of one simple command."""
    words: list[str] = []
    redirects: list[_Redirect] = []
    pos = 0
    while pos < len(simple):
        if simple[pos].isspace():
            pos += 1
            continue
        match = _REDIRECT.match(simple, pos)
        if match:
            pos = match.end()
            while pos < len(simple) and simple[pos] in " \t":
                pos += 1
            target, pos = _read_word(simple, pos)
            redirects.append(_Redirect(match.group(1), target))
            continue
        word, pos = _read_word(simple, pos)
        words.append(word)
    return words, redirects


def _read_word(text: str, pos: int) -> tuple[str, int]:
    """Read one word from ``pos``; quotes and escapes are removed, substitutions kept."""
    out: list[str] = []
    while pos < len(text):
        ch = text[pos]
        if ch.isspace() or (ch in "<>" and text[pos + 1 : pos + 2] != "("):
            break
        if ch == "&" and text[pos + 1 : pos + 2] == ">":
            break
        if ch == "\\":
            out.append(text[pos + 1 : pos + 2])
            pos += 2
        elif ch == "'":
            end = text.find("'", pos + 1)
            end = len(text) if end < 0 else end
            out.append(text[pos + 1 : end])
            pos = end + 1
        elif ch == '"':
            pos = _read_double_quoted(text, pos + 1, out)
        elif (ch in "$<>`" and text[pos + 1 : pos + 2] in ("(", "{")) or ch == "`":
            end = _span_end(text, pos)
            out.append(text[pos:end])
            pos = end
        elif ch == "(" and out and out[-1].endswith("="):  # array assignment `a=(x y)`
            end = _span_end(text, pos - 1)
            out.append(text[pos:end])
            pos = end
        else:
            out.append(ch)
            pos += 1
    return "".join(out), pos


def _read_double_quoted(text: str, pos: int, out: list[str]) -> int:
    while pos < len(text) and text[pos] != '"':
        if text[pos] == "\\" and text[pos + 1 : pos + 2] in ('"', "\\", "$", "`"):
            out.append(text[pos + 1])
            pos += 2
        elif text[pos] in "$`" and (text[pos] == "`" or text[pos + 1 : pos + 2] in ("(", "{")):
            end = _span_end(text, pos)
            out.append(text[pos:end])
            pos = end
        else:
            out.append(text[pos])
            pos += 1
    return pos + 1


def _span_end(text: str, pos: int) -> int:
    """End of a ``$(..)``, ``${..}``, ``<(..)`` or backtick span starting at ``pos``."""
    if text[pos] == "`":
        end = text.find("`", pos + 1)
        return len(text) if end < 0 else end + 1
    opener, closer = ("{", "}") if text[pos + 1] == "{" else ("(", ")")
    depth, pos = 0, pos + 1
    while pos < len(text):
        ch = text[pos]
        if ch == "\\":
            pos += 1
        elif ch in "'\"":
            end = text.find(ch, pos + 1)
            pos = len(text) - 1 if end < 0 else end
        elif ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return pos + 1
        pos += 1
    return len(text)


def has_output_redirection(simple: str) -> bool:
    """True when one simple command writes a file: ``>``, ``>>``, ``&>``, ``<>`` or ``tee``.

    Redirections to ``/dev/null`` (and stdout/stderr) and fd duplications like ``2>&1`` write
    nothing and do not count.
    """
    words, redirects = _tokenize(simple)
    for redirect in redirects:
        if redirect.op not in _WRITE_OPS or redirect.target in _HARMLESS_TARGETS:
            continue
        if redirect.op == ">&" and (redirect.target.isdigit() or redirect.target == "-"):
            continue
        return True
    command = _command_words(words)
    if command and program_name(command[0]) == "tee":
        return any(not a.startswith("-") and a not in _HARMLESS_TARGETS for a in command[1:])
    return False


ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
"""A leading ``NAME=value`` (or ``NAME+=value``) word: an assignment, not the command."""


def _command_words(words: list[str]) -> list[str]:
    """The words after leading ``NAME=value`` assignments."""
    index = 0
    while index < len(words) and ASSIGNMENT.match(words[index]):
        index += 1
    return words[index:]


def is_read_only_command(command: str) -> bool:
    """True only when every simple command is a known read-only one and none writes a file.

    Unknown programs, paths to scripts, and options known to write or execute (``find -exec``,
    ``sort -o``, ``git branch NAME``) make it False; see ``bash_readonly`` for the allow-list.
    """
    return all(_is_read_only_simple(simple) for simple in split_commands(command))


def _is_read_only_simple(simple: str) -> bool:
    if has_output_redirection(simple):
        return False
    return is_read_only_words(_command_words(_tokenize(simple)[0]))


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
