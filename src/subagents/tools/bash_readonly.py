"""The allow-list behind ``is_read_only_command``: which programs, with which options, only read.

Each entry maps a program name to a check of its arguments. A program missing from the table is
not read-only (fail closed); so is a program whose check finds an option known to write a file
or run another program (``find -exec``, ``sort -o``, ``rg --pre``, ``git branch NAME``).
``awk`` is absent on purpose: ``system()`` and ``print > file`` make it a general interpreter.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

__all__ = ["is_read_only_words", "program_name"]

_TRUSTED_DIRS = frozenset({"", "/", "/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"})

# Programs that never write files or run other programs, whatever their arguments.
_ALWAYS_READ_ONLY = (
    "ls cat head tail wc grep egrep fgrep pwd echo printf which type stat du df cut diff "
    "basename dirname realpath readlink true false test [ whoami id uname printenv nproc "
    "tac rev nl od hexdump md5sum sha1sum sha256sum sha512sum cksum cmp comm tr column "
    "fold paste expand unexpand strings seq sleep ps jq cd set ag locale read"
)


def program_name(word: str) -> str | None:
    """The program a command word names; None for a path outside the system directories.

    ``./ls`` or ``~/bin/git`` may be anything, so only bare names and system paths count.
    """
    directory, name = os.path.split(word)
    return name if directory.rstrip("/") in _TRUSTED_DIRS else None


def is_read_only_words(words: list[str]) -> bool:
    """Whether a simple command (its words, assignments removed) is on the allow-list."""
    if not words:
        return True  # a bare assignment or redirection-only command changes no files
    program = program_name(words[0])
    check = _READ_ONLY.get(program or "")
    return check is not None and check(words[1:])


def _always(args: list[str]) -> bool:
    return True


def _forbid(*options: str) -> Callable[[list[str]], bool]:
    """A check that rejects the given options (also as ``--opt=value``)."""

    def check(args: list[str]) -> bool:
        return not any(arg.split("=", 1)[0] in options for arg in args)

    return check


def _no_positional(args: list[str]) -> bool:
    return all(arg.startswith("-") for arg in args)


def _sort(args: list[str]) -> bool:
    """``sort -o FILE`` writes; any short-option cluster holding ``o`` is refused."""
    for arg in args:
        if arg.startswith("--output"):
            return False
        if arg.startswith("-") and not arg.startswith("--") and "o" in arg:
            return False
    return True


def _uniq(args: list[str]) -> bool:
    return len([a for a in args if not a.startswith("-") or a == "-"]) <= 1  # 2nd = output


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


XARGS_VALUE_OPTIONS = frozenset({"-I", "-n", "-P", "-d", "-L", "-s", "-a", "-E"})
_XARGS_FLAGS = frozenset({"-0", "-r", "-t", "--null", "--no-run-if-empty", "--verbose"})


def _xargs(args: list[str]) -> bool:
    """``xargs CMD ...`` is read-only when CMD is (its options are skipped first)."""
    index = 0
    while index < len(args) and args[index].startswith("-"):
        if args[index] in XARGS_VALUE_OPTIONS:
            index += 2
        elif args[index] in _XARGS_FLAGS or args[index][:2] in XARGS_VALUE_OPTIONS:
            index += 1
        else:
            return False
    return is_read_only_words(args[index:]) if index < len(args) else True


def _timeout(args: list[str]) -> bool:
    rest = [a for a in args if not a.startswith("-")]
    return len(rest) >= 2 and is_read_only_words(rest[1:])


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
        elif arg in _GIT_GLOBAL_FLAGS or arg.startswith(("--git-dir=", "--work-tree=")):
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


def _git_only(*allowed_first: str) -> Callable[[list[str]], bool]:
    """A subcommand that is read-only with no arguments or with one of ``allowed_first``."""

    def check(args: list[str]) -> bool:
        return not args or args[0] in allowed_first

    return check


def _git_config(args: list[str]) -> bool:
    return bool(args) and any(a in _GIT_CONFIG_READS for a in args)


def _git_tag(args: list[str]) -> bool:
    return not args or any(a in ("-l", "--list") for a in args)


_NO_OUTPUT_FILE = _forbid("--output")

_GIT_SUBCOMMANDS: dict[str, Callable[[list[str]], bool]] = {
    "status": _always,
    "log": _NO_OUTPUT_FILE,
    "diff": _NO_OUTPUT_FILE,
    "show": _NO_OUTPUT_FILE,
    "branch": _git_branch,
    "rev-parse": _always,
    "ls-files": _always,
    "ls-tree": _always,
    "blame": _always,
    "remote": _git_only("-v", "--verbose", "get-url"),
    "grep": _forbid("-O", "--open-files-in-pager"),
    "shortlog": _always,
    "describe": _always,
    "cat-file": _always,
    "rev-list": _always,
    "merge-base": _always,
    "name-rev": _always,
    "for-each-ref": _always,
    "count-objects": _always,
    "check-ignore": _always,
    "tag": _git_tag,
    "config": _git_config,
    "stash": lambda args: bool(args) and args[0] in ("list", "show"),
    "worktree": lambda args: bool(args) and args[0] == "list",
    "reflog": _git_only("show"),
    "version": _always,
}

_READ_ONLY: dict[str, Callable[[list[str]], bool]] = {
    **dict.fromkeys(_ALWAYS_READ_ONLY.split(), _always),
    "rg": _forbid("--pre"),
    "find": _forbid(
        "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"
    ),
    "fd": _forbid("-x", "--exec", "-X", "--exec-batch"),
    "file": _forbid("-C", "--compile"),
    "tree": _forbid("-o"),
    "date": _forbid("-s", "--set"),
    "hostname": _no_positional,
    "sort": _sort,
    "uniq": _uniq,
    "sed": _sed,
    "xargs": _xargs,
    "timeout": _timeout,
    "tee": _always,  # writes are caught by has_output_redirection
    "git": _git,
}
