"""Read-only commands: which programs, with which options, only read, and whole-command checks.

``is_read_only_command`` (plan mode, the read-only agents, concurrency) is true only when the
analysis (``bash_commands.analyze``) sees the whole structure and every invocation, nested ones
included, is read-only: no redirection that writes, only harmless assignments, read-only
wrappers, and a program on the allow-list below with arguments its check accepts.

Each entry maps a program name to a check of its arguments. A program missing from the table is
not read-only (fail closed); so is a program whose check finds an option known to write a file
or run another program (``sort -o``, ``rg --pre``, ``git branch NAME``), and a program with a
check given an argument computed at run time (``find . $X``: X may be ``-delete``). ``find
-exec CMD`` is read-only when CMD is: the analysis lists CMD as an invocation of its own.
``awk`` is absent on purpose: ``system()`` and ``print > file`` make it a general interpreter.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence

from subagents.tools.bash_commands import (
    Analysis,
    Form,
    Invocation,
    analyze,
    harmless_assignment,
    program_name,
)
from subagents.tools.bash_words import Word
from subagents.tools.bash_wrappers import READ_ONLY_WRAPPERS

__all__ = [
    "READ_ONLY_MAX_CHARS",
    "analysis_read_only",
    "invocation_read_only",
    "is_read_only_command",
    "is_read_only_words",
    "known_program",
]

READ_ONLY_MAX_CHARS = 32 * 1024
"""Longer commands are not read-only, unparsed: the check runs on the event loop."""

# Programs that never write files or run other programs, whatever their arguments.
_ALWAYS_READ_ONLY = (
    "ls cat head tail wc grep egrep fgrep pwd echo printf which type stat du df cut diff "
    "basename dirname realpath readlink true false test [ whoami id uname printenv nproc "
    "tac rev nl od hexdump md5sum sha1sum sha256sum sha512sum cksum cmp comm tr column "
    "fold paste expand unexpand strings seq sleep ps jq cd set locale read :"
)


def is_read_only_command(command: str) -> bool:
    """True only when every part of ``command`` is known to change nothing (see the module)."""
    if len(command) > READ_ONLY_MAX_CHARS:
        return False
    return analysis_read_only(analyze(command))


def analysis_read_only(analysis: Analysis) -> bool:
    return not analysis.opaque and all(invocation_read_only(i) for i in analysis.invocations)


def invocation_read_only(invocation: Invocation) -> bool:
    """Whether one invocation reads only (its nested invocations are checked on their own)."""
    if invocation.opaque is not None or invocation.end == "opaque" or invocation.command.writes:
        return False
    bare = not invocation.command.words
    if not all(harmless_assignment(a, bare=bare) for a in invocation.assignments):
        return False
    forms = invocation.forms
    if any(form.via not in READ_ONLY_WRAPPERS for form in forms[:-1]):
        return False
    if any(form.via == "git" and _git_elsewhere(form.words) for form in forms[:-1]):
        return False
    for form, inner in itertools.pairwise(forms):
        check = _WRAPPER_OPTIONS.get(form.via or "")
        if check is not None and not _wrapper_options_read_only(form, inner, check):
            return False
    alone = _WRAPPER_OPTIONS.get(forms[-1].program or "")  # ``chrt -p 0 1``: nothing wrapped
    if alone is not None and not _wrapper_options_read_only(forms[-1], Form(()), alone):
        return False
    if invocation.end in ("none", "container"):
        return True
    return is_read_only_words(invocation.last.words)


def _wrapper_options_read_only(form: Form, inner: Form, check: Callable[[list[str]], bool]) -> bool:
    """``check`` of a wrapper's own options: its words before the command it wraps (all its
    words after its name when that command is not their tail)."""
    words, rest = form.words, inner.words
    cut = len(words) - len(rest)
    own = words[1:cut] if cut >= 1 and words[cut:] == rest else words[1:]
    return all(word.literal for word in own) and check([word.text for word in own])


_WRAPPER_OPTIONS: dict[str, Callable[[list[str]], bool]] = {}
"""Read-only wrappers with options that write or change another process: ``time -o FILE``
(GNU time's report), ``ionice -p PID`` and ``chrt -p PID`` (set a running process's
priority). Filled below, once ``_forbid`` is defined."""


_GIT_ELSEWHERE = ("--git-dir", "--exec-path")


def _git_elsewhere(words: Sequence[Word]) -> bool:
    """Whether ``git``'s global options take its config or its programs from a folder named
    here (``--git-dir=evil``: ``evil/config``'s ``core.fsmonitor`` runs on ``git status``;
    ``--exec-path``: git's helpers and PATH). The options end at the subcommand."""
    iterator = iter(words[1:])
    for word in iterator:
        if not word.text.startswith("-"):
            return False
        name = word.text.split("=", 1)[0]
        if name in _GIT_ELSEWHERE:
            return True
        if name in _GIT_VALUED and "=" not in word.text:
            next(iterator, None)  # its value
    return False


_GIT_VALUED = frozenset({"-C", "--work-tree", "--namespace", "--super-prefix", "--config-env"})


def known_program(name: str) -> bool:
    """Whether the allow-list knows ``name`` (so it is known not to run its arguments)."""
    return name in _READ_ONLY


def is_read_only_words(words: Sequence[Word]) -> bool:
    """Whether a simple command (its words, assignments removed) is on the allow-list."""
    if not words:
        return True  # a bare assignment or redirection-only command changes no files
    if not words[0].literal:
        return False
    program = program_name(words[0].text)
    check = _READ_ONLY.get(program or "")
    if check is None:
        return False
    if check is _always:
        return True
    args = words[1:]
    if any(not word.literal for word in args):
        return False  # a computed argument may be any option
    return check([word.text for word in args])


def _always(args: list[str]) -> bool:
    return True


def _forbid(*options: str) -> Callable[[list[str]], bool]:
    """A check that rejects the given options however they are spelled: as ``--opt=value``; a
    long one abbreviated (getopt_long and git's parse-options take any unambiguous prefix:
    ``git grep --open-files=CMD`` is ``--open-files-in-pager``; any prefix is refused, fail
    closed); a one-letter one in a cluster or with its value attached (``git grep -iO'CMD'``,
    ``fd -xrm``: a letter anywhere in a single-dash word is refused, an attached value of
    another option included). Single-dash words of more than one letter (``find -delete``) are
    matched whole."""
    longs = tuple(option for option in options if option.startswith("--"))
    letters = "".join(option[1] for option in options if len(option) == 2 and option[0] == "-")

    def check(args: list[str]) -> bool:
        return not any(_spells(arg, options, longs, letters) for arg in args)

    return check


def _spells(arg: str, options: Sequence[str], longs: Sequence[str], letters: str) -> bool:
    """Whether ``arg`` may be one of ``options`` (see ``_forbid``)."""
    name = arg.split("=", 1)[0]
    if name in options:
        return True
    if name.startswith("--"):
        return len(name) > 2 and any(option.startswith(name) for option in longs)
    return name[:1] == "-" and any(letter in arg[1:] for letter in letters)


_HOSTNAME_SHOWS = frozenset(
    [
        "-a",
        "--alias",
        "-A",
        "--all-fqdns",
        "-d",
        "--domain",
        "-f",
        "--fqdn",
        "--long",
        "-i",
        "--ip-address",
        "-I",
        "--all-ip-addresses",
        "-s",
        "--short",
        "-y",
        "--yp",
        "--nis",
        "-h",
        "--help",
        "-V",
        "--version",
    ]
)
"""``hostname``'s options that only show something: ``-F FILE``/``--file=FILE`` (attached too)
and ``-b`` set the name, and so does any positional."""


_sort = _forbid("-o", "--output", "--compress-program")
"""``sort -o FILE`` (``--outp=FILE`` too) writes; ``--compress-program=PROG`` runs PROG on its
temporary files."""


def _uniq(args: list[str]) -> bool:
    """One file at most: a second is the output. After ``--`` every argument is a file
    (``uniq -- -in out`` writes ``out``)."""
    files = 0
    ended = False
    for arg in args:
        if ended or not arg.startswith("-") or arg == "-":
            files += 1
        elif arg == "--":
            ended = True
    return files <= 1


_SED_SAFE_SCRIPT = re.compile(r"(\d+|\$)(,(\d+|\$))?[pdq]|\d+q|[pd]|/[^/]*/[pd]")


def _sed(args: list[str]) -> bool:
    """Only printing scripts (``sed -n '10,20p' f``); anything else might write or execute."""
    scripts: list[str] = []
    positional: list[str] = []
    iterator = iter(args)
    for arg in iterator:
        if arg in ("-n", "-E", "-r", "--quiet", "--silent"):
            continue
        if arg == "-e":
            scripts.append(next(iterator, ""))
        elif arg.startswith("-"):
            return False
        else:
            positional.append(arg)
    if not scripts and positional:
        scripts.append(positional.pop(0))
    return bool(scripts) and all(
        all(_SED_SAFE_SCRIPT.fullmatch(part.strip()) for part in s.split(";")) for s in scripts
    )


_WRAPPER_OPTIONS.update(
    {
        "time": _forbid("-o", "--output", "-a", "--append"),
        "ionice": _forbid("-p", "--pid", "-P", "--pgid", "-u", "--uid"),
        "chrt": _forbid("-p", "--pid", "-a", "--all-tasks"),
    }
)

_GIT_GLOBAL_VALUE = frozenset({"-C"})
_GIT_GLOBAL_FLAGS = frozenset(
    {"--no-pager", "-P", "--no-optional-locks", "--bare", "--no-replace-objects"}
)
_GIT_BRANCH_FLAGS = frozenset(
    {"-a", "-r", "-v", "-vv", "--all", "--remotes", "--list", "-l", "--show-current", "--verbose"}
)
_GIT_CONFIG_READS = frozenset({"--get", "--get-all", "--get-regexp", "--list", "-l"})


def _git(args: list[str]) -> bool:
    index = 0
    while index < len(args) and args[index].startswith("-"):
        arg = args[index]
        if arg in _GIT_GLOBAL_VALUE:
            index += 2
        elif arg in _GIT_GLOBAL_FLAGS or arg.startswith("--work-tree="):
            index += 1
        else:
            return arg in ("--version", "--help") and index == len(args) - 1
    if index >= len(args):
        return False
    check = _GIT_SUBCOMMANDS.get(args[index])
    return check is not None and check(args[index + 1 :])


def _git_branch(args: list[str]) -> bool:
    return all(
        a in _GIT_BRANCH_FLAGS
        or a.startswith(("--contains", "--merged", "--no-merged", "--sort", "--format"))
        for a in args
    )


def _git_config(args: list[str]) -> bool:
    """A read action (``--get``, ``--list``…) among options that only choose what is read, all
    before the first name: git stops reading options there, so ``git config x.y z --get``
    *sets* x.y (``--get`` is then a value pattern), and any other action writes."""
    reads = False
    index = 0
    while index < len(args):
        arg = args[index]
        if not arg.startswith("-"):
            names = args[index:]
            return reads and len(names) <= 2 and not any(n.startswith("-") for n in names)
        name = arg.split("=", 1)[0]
        if name in _GIT_CONFIG_READS:
            reads = True
        elif name in _GIT_CONFIG_VALUED and "=" not in arg:
            index += 1  # its value: a file, a blob, a type
        elif name not in _GIT_CONFIG_CHOICES:
            return False
        index += 1
    return reads


_GIT_CONFIG_VALUED = frozenset({"-f", "--file", "--blob", "--type", "--default"})
_GIT_CONFIG_CHOICES = _GIT_CONFIG_VALUED | frozenset(
    {"--global", "--system", "--local", "--worktree", "--show-origin", "--show-scope", "--null",
     "-z", "--name-only", "--includes", "--no-includes", "--bool", "--int", "--bool-or-int",
     "--path", "--expiry-date", "--fixed-value"}
)  # fmt: skip


def _git_tag(args: list[str]) -> bool:
    return not args or any(a in ("-l", "--list") for a in args)


_NO_OUTPUT_FILE = _forbid("--output")
_HARMLESS_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})

_GIT_SUBCOMMANDS: dict[str, Callable[[list[str]], bool]] = {
    "status": _always,
    "log": _NO_OUTPUT_FILE,
    "diff": _NO_OUTPUT_FILE,
    "show": _NO_OUTPUT_FILE,
    "branch": _git_branch,
    "rev-parse": _always,
    "ls-files": _always,
    "ls-tree": _always,
    "blame": _NO_OUTPUT_FILE,  # (the revision options: --output=FILE writes)
    "remote": lambda args: (
        all(a in ("-v", "--verbose") for a in args) or args[0] == "get-url"
    ),  # (``git remote -v add NAME URL`` adds one)
    "grep": _forbid("-O", "--open-files-in-pager"),
    "shortlog": _NO_OUTPUT_FILE,
    "describe": _always,
    "cat-file": _always,
    "rev-list": _NO_OUTPUT_FILE,
    "merge-base": _always,
    "name-rev": _always,
    "for-each-ref": _always,
    "count-objects": _always,
    "check-ignore": _always,
    "tag": _git_tag,
    "config": _git_config,
    "stash": lambda args: bool(args) and args[0] in ("list", "show") and _NO_OUTPUT_FILE(args),
    "worktree": lambda args: bool(args) and args[0] == "list",
    "reflog": lambda args: (not args or args[0] == "show") and _NO_OUTPUT_FILE(args),
    "version": _always,
}

_READ_ONLY: dict[str, Callable[[list[str]], bool]] = {
    **dict.fromkeys(_ALWAYS_READ_ONLY.split(), _always),
    "rg": _forbid("--pre"),
    "find": _forbid("-delete", "-fprint", "-fprint0", "-fprintf", "-fls"),
    "fd": _forbid("-x", "--exec", "-X", "--exec-batch"),  # a computed word may be -x
    "file": _forbid("-C", "--compile"),
    "tree": _forbid("-o", "-R"),  # -R: tree again at each level with -o 00Tree.html
    "ag": _forbid("--pager"),  # runs the pager command it names
    "date": _forbid("-s", "--set"),
    "hostname": lambda args: all(a in _HOSTNAME_SHOWS for a in args),
    "sort": _sort,
    "uniq": _uniq,
    "sed": _sed,
    "tee": lambda args: all(a.startswith("-") or a in _HARMLESS_FILES for a in args),
    "git": _git,
}
