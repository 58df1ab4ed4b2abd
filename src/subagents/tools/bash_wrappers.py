"""Programs that run other commands, each with its own option grammar.

``unwrap(words)`` answers, for a simple command whose program is a wrapper, what it runs:

- ``inner``: the command it runs in its place (``nice -n 5 rm f`` → ``rm f``);
- ``scripts``: shell text it hands to a shell (``bash -c 'rm f'``, ``eval``, ``trap``,
  ``flock -c``, ``su -c``, ``sudo -s``, ``watch``, ``env -S``, ``mapfile -C``), parsed again;
- ``commands``: other commands it runs (``find -exec rm {} ;``, ``fd -x``);
- ``opaque``: why what it runs cannot be known (a shell reading a script or stdin, ``source``, a
  computed option, an option we do not know, a runner we do not unpack).

``None`` means the program is not a wrapper. Each grammar lists every option of the real program
(GNU coreutils, util-linux, sudo, bash builtins); an option outside the list makes the answer
opaque *and* still gives the best guess, so a deny rule can match the guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from subagents.tools.bash_parse import Assignment
from subagents.tools.bash_words import Word, literal_word, name_set, short

__all__ = [
    "ESCALATING",
    "OPAQUE_RUNNERS",
    "READ_ONLY_WRAPPERS",
    "SHELLS",
    "TRANSPARENT",
    "Unwrapped",
    "is_wrapper",
    "unwrap",
]

Words = tuple[Word, ...]


@dataclass(frozen=True, slots=True)
class Unwrapped:
    """What a wrapper runs (see the module docstring)."""

    inner: Words | None = None
    scripts: tuple[Word, ...] = ()
    commands: tuple[Words, ...] = ()
    opaque: str | None = None
    assignments: tuple[Assignment, ...] = ()
    """``env NAME=value``: assignments the inner command runs with."""


@dataclass(frozen=True, slots=True)
class _Grammar:
    """Options of a wrapper: which take a value, which mean 'run nothing', which run a shell."""

    flags: frozenset[str] = frozenset()
    values: frozenset[str] = frozenset()
    """Options followed by a value (``-n 5``, ``-n5``, ``--adjustment=5``)."""
    stops: frozenset[str] = frozenset()
    """Options after which no command runs (``command -v``, ``ionice -p``)."""
    shell: frozenset[str] = frozenset()
    """Options whose value is shell text (``flock -c``, ``su -c``)."""
    optional: frozenset[str] = frozenset()
    """Long options whose value is optional, so given only after ``=`` (``env
    --ignore-signal[=SIG]``): the next word is not theirs (``env --ignore-signal rm f`` runs
    ``rm f``)."""
    positionals: int = 0
    """Words between the options and the command (``timeout DURATION``, ``chrt PRIORITY``)."""
    numeric_flags: bool = False
    """``nice -5``: a dash and digits is an option."""


def _g(
    flags: str = "",
    values: str = "",
    *,
    stops: str = "",
    shell: str = "",
    optional: str = "",
    positionals: int = 0,
    numeric_flags: bool = False,
) -> _Grammar:
    """A grammar from space-separated option lists."""
    return _Grammar(
        flags=frozenset(flags.split()),
        values=frozenset(values.split()),
        stops=frozenset(stops.split()),
        shell=frozenset(shell.split()),
        optional=frozenset(optional.split()),
        positionals=positionals,
        numeric_flags=numeric_flags,
    )


@dataclass(slots=True)
class _Scan:
    """The result of reading a wrapper's options."""

    index: int
    seen: dict[str, Word | None] = field(default_factory=dict)
    unknown: str | None = None
    dynamic: bool = False


def _scan(words: Words, grammar: _Grammar, start: int = 1) -> _Scan:
    """Read options from ``start`` until the first operand, ``--`` or the end."""
    scan = _Scan(index=start)
    while scan.index < len(words):
        word = words[scan.index]
        text = word.text
        if not word.literal:
            scan.dynamic = True  # a computed word may be an option or the command: cannot tell
            return scan
        if text == "--":
            scan.index += 1
            return scan
        if text.startswith("--"):
            _long_option(words, grammar, scan)
        elif text.startswith("-") and len(text) > 1:
            _short_options(words, grammar, scan)
        else:
            return scan
    return scan


def _long_option(words: Words, grammar: _Grammar, scan: _Scan) -> None:
    name, eq, value = words[scan.index].text.partition("=")
    scan.index += 1
    if name in grammar.values or name in grammar.shell or (name in grammar.stops and eq):
        if eq:
            scan.seen[name] = literal_word(value)
        else:
            scan.seen[name] = words[scan.index] if scan.index < len(words) else None
            scan.index += 1
    elif name in grammar.optional:
        scan.seen[name] = literal_word(value) if eq else None
    elif name in grammar.flags or name in grammar.stops:
        scan.seen[name] = None
    else:
        scan.unknown = scan.unknown or name


def _short_options(words: Words, grammar: _Grammar, scan: _Scan) -> None:
    text = words[scan.index].text
    scan.index += 1
    if grammar.numeric_flags and text[1:].isdigit():
        return
    for position in range(1, len(text)):
        option = "-" + text[position]
        if option in grammar.values or option in grammar.shell:
            rest = text[position + 1 :]
            if rest:
                scan.seen[option] = literal_word(rest)
            else:
                scan.seen[option] = words[scan.index] if scan.index < len(words) else None
                scan.index += 1
            return
        if option in grammar.flags or option in grammar.stops:
            scan.seen[option] = None
        else:
            scan.unknown = scan.unknown or option


def _generic(grammar: _Grammar) -> Callable[[Words], Unwrapped]:
    """The unwrapper for a wrapper described by its grammar alone."""

    def unwrap_words(words: Words) -> Unwrapped:
        scan = _scan(words, grammar)
        name = words[0].text
        if any(option in scan.seen for option in grammar.stops):
            return Unwrapped()
        scripts = tuple(
            value for option, value in scan.seen.items() if option in grammar.shell and value
        )
        rest = words[scan.index + grammar.positionals :]
        return Unwrapped(
            inner=rest or None if not scripts else None,
            scripts=scripts,
            opaque=_scan_problem(name, scan),
        )

    return unwrap_words


def _scan_problem(name: str, scan: _Scan) -> str | None:
    if scan.dynamic:
        return f"an argument of `{name}` is computed at run time, so what it runs is unknown"
    if scan.unknown:
        return f"`{name}` has an option this checker does not know ({scan.unknown})"
    return None


# --------------------------------------------------------------------------- grammars

_GRAMMARS: dict[str, _Grammar] = {
    "nice": _g("--help --version", "-n --adjustment", numeric_flags=True),
    "nohup": _g("--help --version"),
    "timeout": _g(
        "--foreground --preserve-status -v --verbose --help --version",
        "-s --signal -k --kill-after",
        positionals=1,
    ),
    "stdbuf": _g("--help --version", "-i -o -e --input --output --error"),
    "setsid": _g("-c --ctty -f --fork -w --wait --help --version"),
    "ionice": _g(
        "-t --ignore --help --version",
        "-c --class -n --classdata",
        stops="-p --pid -P --pgid -u --uid",
    ),
    "chrt": _g(
        "-a --all-tasks -b --batch -d --deadline -e --ext -f --fifo -i --idle -o --other "
        "-r --rr -R --reset-on-fork -v --verbose",
        "-T --sched-runtime -P --sched-period -D --sched-deadline",
        stops="-p --pid -m --max -h --help -V --version",
        positionals=1,
    ),
    "time": _g("-p -a --append -v --verbose -q --quiet", "-f --format -o --output"),
    "builtin": _g(),
    "coproc": _g(),
    "doas": _g("-n", "-u -C", stops="-s -L"),
    "runuser": _g(
        "-l --login -m -p --preserve-environment -f --fast",
        "-u --user -g --group -G --supp-group -s --shell -w --whitelist-environment",
        shell="-c --command --session-command",
    ),
}


_FLOCK = _g(
    "-s --shared -x -e --exclusive -u --unlock -n --nb --nonblock -o --close -F --no-fork "
    "--verbose",
    "-w --wait --timeout -E --conflict-exit-code",
    shell="-c --command",
    stops="-h --help -V --version",
)


def _flock(words: Words) -> Unwrapped:
    """``flock [options] FILE [-c CMD | command args]``; ``flock [options] FD`` runs nothing."""
    scan = _scan(words, _FLOCK)
    if any(option in scan.seen for option in _FLOCK.stops):
        return Unwrapped()
    after = _scan(words, _FLOCK, start=scan.index + 1)  # options may follow the lock file
    seen = {**scan.seen, **after.seen}
    problem = _scan_problem("flock", scan) or _scan_problem("flock", after)
    scripts = tuple(v for k, v in seen.items() if k in _FLOCK.shell and v is not None)
    if scripts:
        return Unwrapped(scripts=scripts, opaque=problem)
    return Unwrapped(inner=words[after.index :] or None, opaque=problem)


_EXEC = _g("-c -l", "-a")


def _exec(words: Words) -> Unwrapped:
    """``exec [-cl] [-a NAME] command``: ``-l``, or a NAME starting with ``-``, makes a shell
    it runs a login shell, which first runs its startup files (``~/.profile`` under whatever
    HOME the command sets): unseen."""
    unwrapped = _generic(_EXEC)(words)
    seen = _scan(words, _EXEC).seen
    name = seen.get("-a")
    login = "-l" in seen or (name is not None and name.text.startswith("-"))
    inner = unwrapped.inner
    if login and inner and inner[0].text.rsplit("/", 1)[-1] in SHELLS:
        return Unwrapped(
            opaque=f"`exec` starts `{inner[0].text}` as a login shell, which first runs "
            "startup files this checker cannot see"
        )
    return unwrapped


def _command_builtin(words: Words) -> Unwrapped:
    """``command [-pVv] cmd``: ``-v``/``-V`` only describe the command."""
    scan = _scan(words, _g("-p", stops="-v -V"))
    if "-v" in scan.seen or "-V" in scan.seen:
        return Unwrapped()
    return Unwrapped(inner=words[scan.index :] or None, opaque=_scan_problem("command", scan))


_ENV = _g(
    "-i --ignore-environment -0 --null -v --debug --list-signal-handling",
    "-u --unset -C --chdir",
    shell="-S --split-string",
    optional="--block-signal --default-signal --ignore-signal",
    stops="--help --version",
)


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _env(words: Words) -> Unwrapped:
    """``env [options] [NAME=value ...] [command]``: the assignments go with the command."""
    scan = _scan(words, _ENV)
    if "--help" in scan.seen or "--version" in scan.seen:
        return Unwrapped()
    index = scan.index
    assignments: list[Assignment] = []
    while index < len(words) and _ASSIGNMENT.match(words[index].text):
        name, _, value = words[index].text.partition("=")
        if not words[index].literal:
            return Unwrapped(opaque="`env` sets a variable to a value computed at run time")
        assignments.append(
            Assignment(name=name, value=literal_word(value), source=words[index].source)
        )
        index += 1
    split = scan.seen.get("-S") or scan.seen.get("--split-string")
    rest = words[index:]
    if split is not None:  # `env -S 'rm f' x`: the string is split into the command's words
        script = Word(text=" ".join(w.text for w in (split, *rest)), source=split.source)
        return Unwrapped(scripts=(script,), assignments=tuple(assignments))
    return Unwrapped(
        inner=rest or None, assignments=tuple(assignments), opaque=_scan_problem("env", scan)
    )


_SUDO = _g(
    "-A --askpass -b --background -B --bell -E --preserve-env -H --set-home -n "
    "--non-interactive -P --preserve-groups -S --stdin -k --reset-timestamp -N --no-update "
    "-s --shell -i --login -e --edit",
    "-C --close-from -D --chdir -g --group -h --host -p --prompt -R --chroot -r --role "
    "-t --type -T --command-timeout -U --other-user -u --user",
    stops="-K --remove-timestamp -V --version -v --validate -l --list --help",
)


def _sudo(words: Words) -> Unwrapped:
    """``sudo [options] command``; ``-s``/``-i`` run it through a shell; ``-e`` edits files."""
    scan = _scan(words, _SUDO)
    name = words[0].text
    if any(option in scan.seen for option in ("-e", "--edit")):
        return Unwrapped(opaque=f"`{name} -e` edits files as another user")
    if any(option in scan.seen for option in _SUDO.stops):
        return Unwrapped()
    rest = words[scan.index :]
    if rest and any(option in scan.seen for option in ("-s", "--shell", "-i", "--login")):
        script = Word(text=" ".join(w.text for w in rest), source=" ".join(w.source for w in rest))
        return Unwrapped(scripts=(script,), opaque=_scan_problem(name, scan))
    return Unwrapped(inner=rest or None, opaque=_scan_problem(name, scan))


_SU = _g(
    "-l --login -m -p --preserve-environment -f --fast -P --pty -",
    "-g --group -G --supp-group -s --shell -w --whitelist-environment",
    shell="-c --command --session-command",
)


def _su(words: Words) -> Unwrapped:
    """``su [options] [user] -c CMD``; without ``-c`` it starts an interactive shell."""
    index = 1
    seen: dict[str, Word | None] = {}
    while index < len(words):  # su takes options anywhere (the user name is an operand)
        scan = _scan(words, _SU, start=index)
        seen.update(scan.seen)
        if scan.unknown or scan.dynamic:
            return Unwrapped(opaque=_scan_problem(words[0].text, scan))
        index = scan.index + 1
    scripts = tuple(v for k, v in seen.items() if k in _SU.shell and v is not None)
    if scripts:
        return Unwrapped(scripts=scripts)
    return Unwrapped(opaque=f"`{words[0].text}` without -c starts a shell that reads stdin")


_SHELL_VALUES = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def _shell(words: Words) -> Unwrapped:
    """``bash [options] -c TEXT`` runs TEXT; anything else reads a script or stdin."""
    name = words[0].text
    index, runs_text, startup = 1, False, None
    while index < len(words):
        word = words[index]
        text = word.text
        if not word.literal:
            return Unwrapped(opaque=f"an argument of `{name}` is computed at run time")
        if text in ("--", "-"):
            index += 1
            break
        option = text.partition("=")[0]
        if option in ("--rcfile", "--init-file", "--login"):
            startup = startup or option
        elif text[:1] == "-" and not text.startswith("--") and ("i" in text or "l" in text):
            startup = startup or text
        if text in _SHELL_VALUES:
            index += 2
        elif text.startswith("--"):
            index += 1
        elif text[:1] in "-+" and len(text) > 1:
            runs_text = runs_text or "c" in text[1:]
            index += 1
        else:
            break
    if startup is not None:
        # An interactive or login shell first runs its startup files (~/.bashrc, --rcfile
        # FILE, ~/.profile; under whatever HOME the command sets), unseen.
        return Unwrapped(
            opaque=f"`{name} {startup}` first runs startup files, which this checker cannot see"
        )
    rest = words[index:]
    if not runs_text:
        what = f"the script `{short(rest[0].source)}`" if rest else "standard input"
        return Unwrapped(
            opaque=f"`{name}` runs commands from {what}, which this checker cannot see"
        )
    if not rest:
        return Unwrapped()
    if not rest[0].literal:
        return Unwrapped(opaque=f"`{name} -c` runs text computed at run time")
    return Unwrapped(scripts=(rest[0],))


def _eval(words: Words) -> Unwrapped:
    rest = words[1:]
    if rest and rest[0].text == "--":
        rest = rest[1:]
    if any(not word.literal for word in rest):
        return Unwrapped(opaque="`eval` runs text computed at run time")
    if not rest:
        return Unwrapped()
    text = " ".join(word.text for word in rest)
    return Unwrapped(scripts=(Word(text=text, source=" ".join(w.source for w in rest)),))


def _source(words: Words) -> Unwrapped:
    target = f"`{short(words[1].source)}`" if len(words) > 1 else "a file"
    return Unwrapped(
        opaque=f"`{words[0].text}` runs the commands in {target}, which this checker cannot see"
    )


def _trap(words: Words) -> Unwrapped:
    """``trap ACTION SIGNAL...``: ACTION is shell text run later."""
    rest = [w for w in words[1:] if w.text not in ("--",)]
    if not rest or rest[0].text in ("-l", "-p", "-P", "-"):
        return Unwrapped()
    action = rest[0]
    if not action.literal:
        return Unwrapped(opaque="`trap` runs text computed at run time")
    if len(rest) == 1 or action.text.isdigit():
        return Unwrapped()  # `trap SIGNAL`: resets the signal
    return Unwrapped(scripts=(action,))


def _mapfile(words: Words) -> Unwrapped:
    scan = _scan(words, _g("-t", "-d -n -O -s -u -c", shell="-C"))
    callback = scan.seen.get("-C")
    if callback is None:
        return Unwrapped(opaque=_scan_problem(words[0].text, scan))
    if not callback.literal:
        return Unwrapped(opaque="`mapfile -C` runs text computed at run time")
    return Unwrapped(scripts=(callback,))


_XARGS = _g(
    "-0 --null -r --no-run-if-empty -t --verbose -p --interactive -x --exit -o --open-tty "
    "--show-limits",
    "-a --arg-file -d --delimiter -E -I -L -n --max-args -P --max-procs -s --max-chars "
    "--process-slot-var",
    stops="--help --version",
)
STDIN_WORDS = Word(text="<words from stdin>", source="<words from stdin>", dynamic=True)


def _xargs(words: Words) -> Unwrapped:
    """``xargs [options] [command [args]]`` runs command (default ``echo``) with words from stdin.

    ``-i``, ``-e`` and ``-l`` take an *optional* value glued to them (``-i{}``), which a grammar
    cannot read, so the options are read here. With ``-I R`` / ``-i`` the input replaces R in the
    command, its name included (``xargs -I{} {} f`` runs whatever the input names).
    """
    index, replace, unknown = 1, None, None
    while index < len(words):
        word, text = words[index], words[index].text
        if not word.literal:
            return Unwrapped(opaque="an argument of `xargs` is computed at run time")
        if text == "--":
            index += 1
            break
        if not text.startswith("-") or text == "-":
            break
        name, eq, value = text.partition("=")
        if text[:2] == "-i" or name == "--replace":
            replace = (text[2:] if text[:2] == "-i" else value) or "{}"
        elif text[:2] == "-I":
            replace = text[2:] or (words[index + 1].text if index + 1 < len(words) else "")
            index += 0 if text[2:] else 1
        elif text[:2] in ("-e", "-l") or name in ("--eof", "--max-lines"):
            pass
        elif name in _XARGS.values:
            index += 0 if eq or (len(text) > 2 and not text.startswith("--")) else 1
        elif text[:2] in _XARGS.values and not text.startswith("--"):
            pass  # `-n1`: the value is glued on
        elif name in _XARGS.stops:
            return Unwrapped()
        elif name not in _XARGS.flags:
            unknown = unknown or name
        index += 1
    rest = words[index:] or (literal_word("echo"),)
    if replace and replace in rest[0].text:
        return Unwrapped(opaque="`xargs` builds the command name from its input")
    if replace:  # `xargs -I{} sh -c '{} f'`: the input becomes part of these words
        rest = tuple(_computed(w) if replace in w.text else w for w in rest)
    problem = f"`xargs` has an option this checker does not know ({unknown})" if unknown else None
    return Unwrapped(inner=(*rest, STDIN_WORDS), opaque=problem)


def _computed(word: Word) -> Word:
    return Word(text=word.source, source=word.source, dynamic=True)


_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _find(words: Words) -> Unwrapped:
    """``find ... -exec CMD ... ;`` (or ``+``): each CMD is a command of its own."""
    commands: list[Words] = []
    index = 1
    while index < len(words):
        if words[index].text in _FIND_EXEC and words[index].literal:
            end = index + 1
            while end < len(words) and words[end].text not in (";", "+"):
                end += 1
            if end > index + 1:
                if "{}" in words[index + 1].text:
                    return Unwrapped(opaque="`find -exec` runs the files it finds as programs")
                commands.append(words[index + 1 : end])
            index = end
        elif not words[index].literal and words[index].text.lstrip("\"'").startswith("-"):
            return Unwrapped(commands=tuple(commands), opaque="`find` has a computed option")
        index += 1
    return Unwrapped(commands=tuple(commands))


def _fd(words: Words) -> Unwrapped:
    """``fd ... -x CMD ...`` / ``-X``: the rest of the words are the command."""
    for index, word in enumerate(words[1:], start=1):
        if word.text in ("-x", "--exec", "-X", "--exec-batch"):
            rest = words[index + 1 :]
            if rest and "{" in rest[0].text:
                return Unwrapped(opaque="`fd -x` runs the files it finds as programs")
            return Unwrapped(commands=(rest,) if rest else ())
    return Unwrapped()


_WATCH = _g(
    "-b --beep -c --color -C --no-color -e --errexit -g --chgexit -p --precise -t --no-title "
    "-w --no-wrap -r --no-rerun -f --follow",
    "-n --interval -q --equexit",
    stops="-h --help -v --version",
)


def _watch(words: Words) -> Unwrapped:
    """``watch [options] command``: the words are joined and given to ``sh -c`` (unless -x)."""
    cleaned = tuple(
        w for w in words if not (w.literal and w.text.startswith(("-d", "--differences")))
    )
    exec_mode = any(w.text in ("-x", "--exec") for w in cleaned[1:])
    cleaned = tuple(w for w in cleaned if w.text not in ("-x", "--exec"))
    scan = _scan(cleaned, _WATCH)
    if any(option in scan.seen for option in _WATCH.stops):
        return Unwrapped()
    rest = cleaned[scan.index :]
    problem = _scan_problem("watch", scan)
    if not rest:
        return Unwrapped(opaque=problem)
    if exec_mode:
        return Unwrapped(inner=rest, opaque=problem)
    script = Word(text=" ".join(w.text for w in rest), source=" ".join(w.source for w in rest))
    return Unwrapped(scripts=(script,), opaque=problem or _dynamic_problem("watch", rest))


def _dynamic_problem(name: str, words: Sequence[Word]) -> str | None:
    if any(not w.literal for w in words):
        return f"`{name}` runs text computed at run time"
    return None


def _script(words: Words) -> Unwrapped:
    grammar = _g(
        "-a --append -e --return -f --flush -q --quiet --force",
        "-E --echo -I --log-in -O --log-out -B --log-io -T --log-timing -m --logging-format "
        "-t --timing",
        shell="-c --command",
        stops="-h --help -V --version",
    )
    scan = _scan(words, grammar)
    command = scan.seen.get("-c") or scan.seen.get("--command")
    if command is not None:
        return Unwrapped(scripts=(command,), opaque=_scan_problem("script", scan))
    if any(option in scan.seen for option in grammar.stops):
        return Unwrapped()
    return Unwrapped(opaque="`script` without -c starts an interactive shell")


def _busybox(words: Words) -> Unwrapped:
    """``busybox APPLET args``: the applet is the program."""
    rest = words[1:]
    if rest and rest[0].text.startswith("-"):
        return Unwrapped()
    return Unwrapped(inner=rest or None)


def _alias(words: Words) -> Unwrapped:
    if any("=" in w.text for w in words[1:]):
        return Unwrapped(opaque="`alias` redefines what a later command name runs")
    return Unwrapped()


def _hash(words: Words) -> Unwrapped:
    if any(w.text.startswith("-") and "p" in w.text for w in words[1:]):
        return Unwrapped(opaque="`hash -p` makes a command name run another program")
    return Unwrapped()


def _enable(words: Words) -> Unwrapped:
    if any(w.text.startswith("-") and "f" in w.text for w in words[1:]):
        return Unwrapped(opaque="`enable -f` loads a builtin from a shared library")
    return Unwrapped()


SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "fish", "rbash", "yash"})

_SPECIAL: dict[str, Callable[[Words], Unwrapped]] = {
    **dict.fromkeys(SHELLS, _shell),
    "command": _command_builtin,
    "exec": _exec,
    "flock": _flock,
    "env": _env,
    "sudo": _sudo,
    "su": _su,
    "eval": _eval,
    "source": _source,
    ".": _source,
    "trap": _trap,
    "mapfile": _mapfile,
    "readarray": _mapfile,
    "xargs": _xargs,
    "find": _find,
    "fd": _fd,
    "fdfind": _fd,
    "watch": _watch,
    "script": _script,
    "busybox": _busybox,
    "toybox": _busybox,
    "alias": _alias,
    "hash": _hash,
    "enable": _enable,
}

OPAQUE_RUNNERS = name_set(
    "ssh parallel nsenter unshare chroot taskset numactl prlimit strace ltrace valgrind gdb "
    "fakeroot faketime firejail bwrap systemd-run unbuffer setpriv runcon sg newgrp pkexec "
    "run0 eatmydata nocache proxychains proxychains4 torsocks catchsegv chpst xvfb-run "
    "dbus-run-session dbus-launch entr expect cgexec daemonize start-stop-daemon caffeinate "
    "with-lock-ex lckdo sem nsjail bubblewrap schroot machinectl apptainer singularity"
)
"""Programs whose arguments are a command we do not unpack: what they run is unknown."""

_UNWRAPPERS: dict[str, Callable[[Words], Unwrapped]] = {
    **{name: _generic(grammar) for name, grammar in _GRAMMARS.items()},
    **_SPECIAL,
}

TRANSPARENT = frozenset(
    {"timeout", "time", "nice", "nohup", "stdbuf", "setsid", "ionice", "chrt", "flock",
     "command", "builtin", "exec", "coproc", "xargs", "busybox", "toybox", "env", "path",
     "git"}
)  # fmt: skip
"""Wrappers that change how a command runs, not who runs it: allow rules see through them."""
ESCALATING = frozenset({"sudo", "doas", "su", "runuser", "pkexec", "run0"})
"""Wrappers that run the command as another user: an allow rule must name them."""
READ_ONLY_WRAPPERS = frozenset(
    {"timeout", "time", "nice", "stdbuf", "setsid", "ionice", "chrt", "command", "builtin",
     "exec", "xargs", "env", "path", "git"}
)  # fmt: skip
"""Wrappers that write nothing themselves (``nohup`` may write nohup.out; ``flock`` a lock)."""


def is_wrapper(name: str) -> bool:
    """Whether ``name`` runs other commands (a wrapper, a shell, ``find``, a known runner)."""
    return name in _UNWRAPPERS or name in OPAQUE_RUNNERS


def unwrap(name: str, words: Words) -> Unwrapped | None:
    """What the wrapper ``name`` (``words[0]``, already a bare program name) runs; None if none."""
    if name in OPAQUE_RUNNERS:
        return Unwrapped(opaque=f"`{name}` runs a command this checker does not unpack")
    unwrapper = _UNWRAPPERS.get(name)
    return None if unwrapper is None else unwrapper(words)
