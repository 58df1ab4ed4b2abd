"""Shell command parsing: simple commands, words, redirections, read-only checks, prompts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subagents.tools.bash_parse import looks_interactive, parse_script
from subagents.tools.bash_readonly import is_read_only_command


def split_commands(command: str) -> list[str]:
    """The words (quotes removed) of every simple command found, one string each."""
    return [" ".join(w.text for w in c.words) for c in parse_script(command).commands]


def has_output_redirection(simple: str) -> bool:
    return any(command.writes for command in parse_script(simple).commands)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git status && rm -rf x", ["git status", "rm -rf x"]),
        ("a || b; c | d & e", ["a", "b", "c", "d", "e"]),
        ("a |& b", ["a", "b"]),
        ("one\ntwo\n\nthree", ["one", "two", "three"]),
        ('echo "a && b"', ["echo a && b"]),
        ("echo 'a; b | c'", ["echo a; b | c"]),
        ("echo a\\;b", ["echo a;b"]),
        ("echo a \\\n  b", ["echo a b"]),
        ("(cd sub; make) && ls", ["cd sub", "make", "ls"]),
        ("{ ls; pwd; }", ["ls", "pwd"]),
        ("ls 2>&1 | grep x", ["ls", "grep x"]),
        ("ls &> out.txt", ["ls"]),
        ("echo hi # ; rm -rf /", ["echo hi"]),
        ("echo a#b; ls", ["echo a#b", "ls"]),
        ("if [ -f x ]; then cat x; else ls; fi", ["cat x", "ls"]),  # `[ ]` is a test node
        ("for f in *.py; do wc -l $f; done", ["wc -l $f"]),
        ("while read l; do echo $l; done < in", ["", "read l", "echo $l"]),
        ("echo $((1 + 2)) ${HOME:-x}", ["echo $((1 + 2)) ${HOME:-x}"]),
        ("cat <<EOF\nrm -rf x\nEOF\nls", ["cat", "ls"]),
        ("cat <<-'END' | wc\n\trm y\n\tEND\npwd", ["cat", "wc", "pwd"]),
        ("rm 2>/dev/null -rf /", ["rm -rf /"]),
        ("X=1 2>/dev/null rm f", ["rm f"]),
        ("'r'm \\rm r''m $'\\x72m' \"r\"m $\"rm\"", ["rm rm rm rm rm rm"]),
        ("", []),
    ],
)
def test_split_commands(command: str, expected: list[str]) -> None:
    assert split_commands(command) == expected


@pytest.mark.parametrize(
    ("command", "inner"),
    [
        ("ls $(rm -rf /)", "rm -rf /"),
        ('echo "$(rm -rf /)"', "rm -rf /"),
        ("echo `rm -rf /`", "rm -rf /"),
        ('echo "`rm x`"', "rm x"),
        ("diff <(sort a) <(rm b)", "rm b"),
        ("echo $(echo $(rm nested))", "rm nested"),
        ("x=$(touch f)", "touch f"),
    ],
)
def test_substitutions_yield_their_inner_commands(command: str, inner: str) -> None:
    commands = split_commands(command)
    assert inner in commands
    assert any(c != inner for c in commands)  # the outer command is kept too


def test_quoted_substitution_markers_are_text() -> None:
    assert split_commands("echo '$(rm -rf /)'") == ["echo $(rm -rf /)"]
    assert split_commands('echo "\\$(rm x)"') == ["echo $(rm x)"]


@pytest.mark.parametrize(
    ("simple", "writes"),
    [
        ("echo hi > out.txt", True),
        ("echo hi >> out.txt", True),
        ("make &> build.log", True),
        ("make &>> build.log", True),
        ("cmd 2> err.txt", True),
        ("cmd >| forced.txt", True),
        ("cmd >&file.txt", True),
        ("echo hi>out", True),
        ('echo hi > "$OUT"', True),
        ("echo hi > /dev/null", False),
        ("cmd 2>/dev/null", False),
        ("cmd &>/dev/null", False),
        ("cmd 2>&1", False),
        ("cmd >&2", False),
        ("cat < in.txt", False),
        ('echo "a > b"', False),
        ("echo 'a >> b'", False),
        ("echo a\\>b", False),
        ("grep -c '>' file", False),
        ("diff <(ls a) <(ls b)", False),
    ],
)
def test_has_output_redirection(simple: str, writes: bool) -> None:
    assert has_output_redirection(simple) is writes


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "cat README.md | head -20",
        "grep -rn 'TODO' src | wc -l",
        "rg foo --type py",
        "find . -name '*.py' -type f",
        "git status",
        "git -C sub --no-pager log --oneline -5",
        "git diff HEAD~1 -- src",
        "git branch",
        "git branch -a",
        "git remote -v",
        "git rev-parse --show-toplevel && git ls-files | sort | uniq -c",
        "git blame -L 1,10 x.py",
        "git config --get user.name",
        "pwd; echo $HOME; which python",
        "cd src && ls",
        "stat x; du -sh .; df -h; tree -L 2; file a.bin",
        "cut -d: -f1 /etc/passwd | sort -u",
        "diff a b 2>&1",
        "ls > /dev/null 2>&1",
        "sed -n '10,20p' file.py",
        "find . -name '*.py' | xargs grep -n import",
        "for f in *.py; do wc -l $f; done",
        "echo $(git rev-parse HEAD)",
        "/usr/bin/ls",
        "LANG=C ls",
        "tee /dev/null",
        "echo x | tee",
        "find . -name '*.py' -exec grep -l x {} +",
        "timeout 5 git log -1",
        "bash -c 'ls && git status'",
        "",
    ],
)
def test_read_only_commands(command: str) -> None:
    assert is_read_only_command(command) is True


@pytest.mark.parametrize(
    "command",
    [
        "git status && rm -rf x",
        "rm -rf build",
        "echo hi > file",
        "ls | tee listing.txt",
        "ls $(rm -rf /)",
        'echo "`touch x`"',
        "find . -name '*.pyc' -delete",
        "find . -exec rm {} \\;",
        "sort -o out.txt in.txt",
        "sort -uo out.txt in.txt",
        "uniq in.txt out.txt",
        "git commit -m x",
        "git push",
        "git branch new-feature",
        "git branch -D old",
        "git remote add origin url",
        "git -c core.pager=evil log",
        "git diff --output=patch.diff",
        "git config user.name me",
        "git stash",
        "git",
        "sed -i 's/a/b/' f",
        "sed 's/a/b/w out' f",
        "awk '{print}' f",
        "rg --pre ./evil foo",
        "xargs rm",
        "./ls",
        "python script.py",
        "npm install",
        "date -s '2020-01-01'",
        "tree -o out.txt",
        "unknowncommand",
        "cd src && make",
        "(ls; rm x)",
        "cat <<EOF > out.txt\nhello\nEOF",
        "while read l; do echo $l; done < in > out",
        "tee out.txt",
        "tee -a log.txt",
        "exec 3<> rw.txt",
        "FOO=bar ls",
        "PAGER=evil git log",
        "LD_PRELOAD=./x.so ls",
        "PATH=.; ls",
        "X=-delete; find . $X",
        "find . -exec rm {} +",
        "echo $(( $(rm f) 0 ))",
        "cat <(rm f)",
        "echo ${x:-$(rm f)}",
        "y='a[$(rm f)]'; echo $((y))",
        "echo ls | bash",
        "nohup ls",
        "sudo ls",
    ],
)
def test_state_changing_or_unknown_commands_are_not_read_only(command: str) -> None:
    assert is_read_only_command(command) is False


@pytest.mark.parametrize(
    "tail",
    [
        "Do you want to continue? (y/n)",
        "Proceed with installation [Y/n] ",
        "Is this ok [y/N]: ",
        "Are you sure you want to continue connecting (yes/no/[fingerprint])? ",
        "Password:",
        "[sudo] password for alice: ",
        "Enter passphrase for key '/home/a/.ssh/id_ed25519': ",
        "Continue? ",
        "Press any key to continue...",
        "Press ENTER to continue",
        "? Project name: \u203a my-app",
        "Username: ",
        "some output\nmore output\nOverwrite existing file? \n\n",
    ],
)
def test_looks_interactive(tail: str) -> None:
    assert looks_interactive(tail) is True


@pytest.mark.parametrize(
    "tail",
    [
        "",
        "\n\n",
        "Compiling foo v0.1.0\nFinished release in 3.2s",
        "PASS tests/test_a.py\n42 passed in 1.0s",
        "Listening on http://localhost:3000",
        "Do you want to continue? (y/n) y\nInstalling...\nDone.",
        "ERROR: build failed: missing semicolon",
    ],
)
def test_does_not_look_interactive(tail: str) -> None:
    assert looks_interactive(tail) is False


_SHELL_ALPHABET = st.sampled_from(list("ab $()`'\"\\;&|<>{}#=\n-0123456789EOF\t"))


@settings(max_examples=400, deadline=None)
@given(st.lists(_SHELL_ALPHABET, max_size=60).map("".join))
def test_parsing_never_raises_and_always_ends(command: str) -> None:
    split_commands(command)
    has_output_redirection(command)
    assert isinstance(is_read_only_command(command), bool)
    assert isinstance(looks_interactive(command), bool)
