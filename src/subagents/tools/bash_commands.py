"""What a Bash command runs: every program as an invocation with the forms rules match against.

``analyze(command)`` parses the command (``bash_parse``) and turns each simple command into an
``Invocation``: its chain of ``Form``s (as written, then one wrapper removed at a time, see
``bash_wrappers``), how the chain ends (a program, a container that runs shell text, nothing, or
something opaque), and the assignments it runs with. Shell text run by ``bash -c``, ``eval`` and
the like is parsed again and its invocations are added (up to ``MAX_NESTING`` levels); so are the
commands of ``find -exec``. ``Analysis.opaque`` lists every reason the structure cannot be fully
seen; callers fail closed on it. See ``docs/bash-permissions.md``.
"""

from __future__ import annotations

import gc
import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from subagents.tools.bash_parse import RESERVED_WORDS, Assignment, SimpleCommand, parse_script
from subagents.tools.bash_words import Word, literal_word, name_set, short
from subagents.tools.bash_wrappers import Unwrapped, unwrap

__all__ = [
    "MAX_NESTING",
    "Analysis",
    "Form",
    "Invocation",
    "analyze",
    "harmless_assignment",
    "program_name",
]

MAX_NESTING = 8
_CACHE_MAX_CHARS = 32 * 1024

End = Literal["program", "container", "none", "opaque"]


@dataclass(frozen=True, slots=True)
class Form:
    """One spelling of an invocation: its words, and the wrapper removed to reach the next one."""

    words: tuple[Word, ...]
    via: str | None = None

    @property
    def text(self) -> str:
        """The words joined by spaces (a dynamic word as written)."""
        return " ".join(word.text for word in self.words)

    @property
    def program(self) -> str | None:
        """The program name (basename), or None when it is computed or absent."""
        if not self.words or not self.words[0].literal:
            return None
        return self.words[0].text.rsplit("/", 1)[-1]

    @property
    def literal_prefix(self) -> str | None:
        """The words before the first computed one, or None when every word is literal."""
        for index, word in enumerate(self.words):
            if not word.literal:
                return " ".join(w.text for w in self.words[:index])
        return None


@dataclass(frozen=True, slots=True)
class Invocation:
    """One program the command runs (or one simple command that runs none)."""

    command: SimpleCommand
    """The simple command it comes from (for messages and redirections)."""
    forms: tuple[Form, ...]
    end: End
    """``program``: the last form is a program; ``container``: it runs shell text whose
    invocations are listed separately; ``none``: nothing runs; ``opaque``: unknown."""
    assignments: tuple[Assignment, ...] = ()
    opaque: str | None = None
    depth: int = 0
    """0 for the command itself; 1 inside ``bash -c '...'``, ``eval``, ``find -exec``, ..."""

    @property
    def last(self) -> Form:
        return self.forms[-1]


@dataclass(frozen=True, slots=True)
class Analysis:
    """Every invocation of one command string, and why any of it cannot be seen."""

    command: str
    invocations: tuple[Invocation, ...]
    opaque: tuple[str, ...] = ()


def analyze(command: str) -> Analysis:
    """The invocations of ``command``; linear in its length, never raises."""
    if len(command) <= _CACHE_MAX_CHARS:
        return _analyze_cached(command)
    with _GC_PAUSE:
        return _analyze(command)


class _GcPause:
    """Pause the cyclic garbage collector while a long command is analysed.

    The analysis allocates one small object per word and command and frees them all at the
    end; none form cycles. With the collector on, its full passes over the growing heap cost
    40-70 % more and make the time grow faster than the text (measured: 0.63 s instead of
    0.47 s for 250 KB). Nested or concurrent pauses (two agents in worker threads) are
    counted, and the collector is switched back on only if it was on before the first.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._was_enabled:
                gc.enable()


_GC_PAUSE = _GcPause()


@lru_cache(maxsize=64)
def _analyze_cached(command: str) -> Analysis:
    return _analyze(command)


def _analyze(command: str) -> Analysis:
    builder = _Builder()
    builder.script(command, depth=0)
    if builder.literal_code and builder.evaluates:
        builder.opaque.append(
            "text that looks like a command substitution reaches a place where bash evaluates "
            "text (arithmetic, a subscript, declare, let, read, printf -v, test)"
        )
    return Analysis(
        command=command,
        invocations=tuple(builder.invocations),
        opaque=tuple(dict.fromkeys(builder.opaque)),
    )


# Builtins that evaluate their arguments as arithmetic or array subscripts.
_EVALUATING_PROGRAMS = name_set(
    "let declare typeset local readonly export printf read test [ unset wait getopts "
    "mapfile readarray"
)
# Variables that make a shell (or every program, through the dynamic loader) run code.
# ZDOTDIR: zsh runs $ZDOTDIR/.zshenv at every start, `zsh -c` included.
_CODE_VARIABLES = name_set(
    "BASH_ENV ENV ZDOTDIR PS4 PROMPT_COMMAND SHELLOPTS BASHOPTS LD_PRELOAD LD_AUDIT "
    "LD_LIBRARY_PATH DYLD_INSERT_LIBRARIES DYLD_LIBRARY_PATH"
)
_GIT_VALUE_OPTIONS = frozenset({"-C", "--git-dir", "--work-tree", "--namespace", "--exec-path"})
_GIT_FLAGS = name_set(
    "--no-pager -P -p --paginate --bare --no-replace-objects --literal-pathspecs "
    "--glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks "
    "--no-lazy-fetch --no-advice"
)
_DECLARED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?\+?=")


@dataclass
class _Builder:
    invocations: list[Invocation] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    literal_code: bool = False
    evaluates: bool = False

    def script(self, text: str, depth: int) -> None:
        if depth > MAX_NESTING:
            self.opaque.append(f"shells are nested more than {MAX_NESTING} levels deep")
            return
        script = parse_script(text)
        self.opaque.extend(script.opaque)
        self.literal_code = self.literal_code or script.literal_code
        self.evaluates = self.evaluates or script.evaluates
        for command in script.commands:
            self.command(command, depth)

    def command(self, command: SimpleCommand, depth: int) -> None:
        assignments = list(command.assignments)
        self.check_assignments(assignments, command)
        words = command.words
        forms: list[Form] = []
        end: End = "none"
        problem: str | None = None
        for _ in range(2 * len(words) + 2):  # every two steps remove at least one word
            if not words:
                break
            head = words[0]
            if not head.literal:
                problem = f"the command name `{short(head.source)}` is decided only when it runs"
                end = "opaque"
                break
            name = head.text
            if forms and head.source in RESERVED_WORDS:  # `time ! rm f`: `!` is syntax there
                problem, end = f"a wrapper is followed by the shell keyword `{name}`", "opaque"
                break
            if name.startswith(("/proc/", "/dev/")):  # /proc/self/exe is the shell itself
                problem, end = f"`{short(name)}` names a running program or a device", "opaque"
                break
            if "/" in name:  # a system directory only changes how it is found; `./x` is anything
                forms.append(Form(words, via="path" if program_name(name) else "other-path"))
                words = (literal_word(name.rsplit("/", 1)[-1]), *words[1:])
                continue
            if name == "git" and (stripped := self.git_globals(words, command)) is not None:
                forms.append(Form(words, via="git"))
                words = stripped
            if name in _EVALUATING_PROGRAMS:
                self.evaluates = True
            result = unwrap(name, words)
            if result is None:
                end = "program"
                break
            problem = problem or result.opaque
            assignments += result.assignments
            self.check_assignments(list(result.assignments), command)
            self.nested(result, depth)
            if result.inner is not None:  # the loop bound guarantees an end
                forms.append(Form(words, via=name))
                words = result.inner
                continue
            end = _end_of(name, result)
            break
        else:
            problem, end = "the command has more wrappers than this checker follows", "opaque"
        forms.append(Form(words))
        if problem is not None:
            self.opaque.append(problem)
        self.invocations.append(
            Invocation(
                command=command,
                forms=tuple(forms),
                end="opaque" if problem is not None and end != "program" else end,
                assignments=tuple(assignments),
                opaque=problem,
                depth=depth,
            )
        )

    def nested(self, result: Unwrapped, depth: int) -> None:
        for script in result.scripts:
            if script.literal:
                self.script(script.text, depth + 1)
            else:
                self.opaque.append("shell text computed at run time is run")
        for words in result.commands:
            source = " ".join(word.source for word in words)
            self.command(SimpleCommand(source=source, words=words), depth + 1)

    def check_assignments(self, assignments: list[Assignment], command: SimpleCommand) -> None:
        names = [a.name for a in assignments]
        if command.words and command.words[0].text in _EVALUATING_PROGRAMS:
            names += [m.group(1) for w in command.words[1:] if (m := _DECLARED.match(w.text))]
        for name in names:
            if name in _CODE_VARIABLES or name.startswith("BASH_FUNC_"):
                self.opaque.append(
                    f"setting {name} makes programs run code this checker cannot see"
                )

    def git_globals(
        self, words: tuple[Word, ...], command: SimpleCommand
    ) -> tuple[Word, ...] | None:
        """``git`` without its global options (``git -C d --no-pager push`` → ``git push``)."""
        index = 1
        while index < len(words) and words[index].text.startswith("-"):
            option = words[index]
            name = option.text.split("=", 1)[0]
            if not option.literal or name in ("-c", "--config-env"):
                what = short(option.source)
                self.opaque.append(
                    f"`git {what}` sets configuration that can make git run commands"
                )
                return None
            if name in _GIT_VALUE_OPTIONS:
                index += 1 if "=" in option.text else 2
            elif name in _GIT_FLAGS:
                index += 1
            else:
                return None  # `git --version` and the like: nothing to remove
        return None if index == 1 else (words[0], *words[index:])


_TRUSTED_DIRS = frozenset({"", "/", "/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"})


def program_name(word: str) -> str | None:
    """The program a command word names; None for a path outside the system directories.

    ``./ls`` or ``~/bin/git`` may be anything, so only bare names and system paths count.
    """
    directory, _, name = word.rpartition("/")
    return name if directory.rstrip("/") in _TRUSTED_DIRS else None


def _end_of(name: str, result: Unwrapped) -> End:
    if name in ("find", "fd", "fdfind"):
        return "program"  # runs its -exec commands (listed separately) and is a program itself
    if result.scripts or result.commands:
        return "container"
    return "opaque" if result.opaque else "none"


# Assignments in front of a command that cannot change what it does (locale, colour, CI).
_HARMLESS_NAMES = name_set(
    "CI DEBUG NO_COLOR FORCE_COLOR CLICOLOR CLICOLOR_FORCE TERM COLUMNS LINES LANG LANGUAGE TZ "
    "NODE_ENV RUST_BACKTRACE RUST_LOG RUST_LOG_STYLE GOOS GOARCH CGO_ENABLED PYTHONUNBUFFERED "
    "PYTHONDONTWRITEBYTECODE PYTHONHASHSEED PYTHONIOENCODING TMPDIR SOURCE_DATE_EPOCH"
)


def harmless_assignment(assignment: Assignment, *, bare: bool) -> bool:
    """Whether an assignment cannot change what a read-only or allowed command does.

    In front of a command only a short list of variables (locale, colour, CI) qualifies: others
    can redirect it to other code (``PAGER``, ``GIT_*``, ``PATH``, ``LD_PRELOAD``). A bare
    ``x=1`` is a shell variable, harmless unless its name is upper case (it may be exported
    already, so a later program sees it).
    """
    if assignment.value is not None and not assignment.value.literal:
        return False
    name = assignment.name
    if name in _HARMLESS_NAMES or name.startswith("LC_"):
        return True
    return bare and not assignment.subscript and not name.isupper()
