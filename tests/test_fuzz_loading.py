"""Seeded, bounded fuzzing of what the runtime loads from disk: agent definitions, settings and
hook output. Goal: 0 crashes, 0 hangs, every failure a clear error naming the file and field.

Inputs start from the fixture set (``tests/fixtures/claude_code``) and are mutated at three
levels — characters, lines and YAML/JSON values (anchors, tags, huge/deep/odd values, wrong
types) — plus generated bombs (deep nesting, alias expansion, huge flow sequences) and special
files (FIFO, devices, loops). The seed is fixed (``SUBAGENTS_FUZZ_SEED`` to change it); a
failing case prints its seed, index and text. ``SUBAGENTS_FUZZ_SOAK=1`` runs 40x the cases with
a seed from the clock (printed), for a long soak outside CI.
"""

from __future__ import annotations

import copy
import json
import os
import random
import string
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from subagents.agents.agent_file import KNOWN_FIELDS, parse_agent_markdown
from subagents.agents.definitions import load_folder
from subagents.cli.agents_cmd import details
from subagents.hooks.config import HookCommand, HookConfigError, config_from_settings, parse_hooks
from subagents.hooks.matchers import ToolCall
from subagents.hooks.output import HookOutcome, interpret
from subagents.hooks.runner import HookRun
from subagents.permissions import context_from_settings
from subagents.permissions.hook_conditions import PermissionRuleConditions
from subagents.settings import SettingsError, load_settings

SOAK = os.environ.get("SUBAGENTS_FUZZ_SOAK") == "1"
SEED = int(os.environ.get("SUBAGENTS_FUZZ_SEED", str(time.time_ns() if SOAK else 1315)))
SCALE = 40 if SOAK else 1
CASE_LIMIT_S = 3.0
"""A case taking longer than this is a hang (real cases take well under 10 ms)."""

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
DEFINITION_TEXTS = [
    path.read_bytes().decode("utf-8", "replace") for path in sorted((FIXTURES / "agents").iterdir())
]
SETTINGS_DATA: list[Any] = []
for _path in sorted((FIXTURES / "settings").iterdir()):
    try:
        SETTINGS_DATA.append(json.loads(_path.read_text()))
    except (ValueError, RecursionError):
        continue

YAML_ODDITIES = [
    "*",
    "*a",
    "&a x",
    "&a [1, 2]",
    "!!python/object/apply:os.system ['echo pwned']",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!timestamp 2001-12-14",
    "!!float nan",
    "!mytag x",
    "[",
    "]",
    "{",
    "{a: [b, {c: d}]}",
    "[[[[[[]]]]]]",
    "? complex\n: key",
    "123456789012345678901234567890",
    "1e400",
    "-0",
    ".nan",
    ".inf",
    "0x1F",
    "0o17",
    "012",
    "~",
    "null",
    "''",
    '""',
    "'x' y",
    '"x" y',
    "|",
    ">-",
    "|+\n  kept\n\n",
    "yes",
    "no",
    "on",
    "2024-01-01",
    "12:30:00",
    "1_000",
    "<<: *a",
    "- a\n- b",
    "\t",
    "a\tb",
    "\x00",
    "\x7f",
    "ünïcödé 代码 🙂",
    "a: b: c",
    "a, b c(d, e) f",
    "Bash(rm -rf /)",
    "x" * 5000,
    "#comment",
    "@at",
    "`tick`",
    "%percent",
    "!bang",
    "a\\nb\\nc",
    "---",
    "...",
]
JSON_ODDITIES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**70,
    1e308,
    "",
    "x",
    "Bash(rm:*)",
    "Bash(",
    "auto",
    "yolo",
    [],
    {},
    [1, "a", None],
    {"matcher": 3},
    {"hooks": "x"},
    {"type": "command"},
    {"type": "command", "command": "true", "if": "Bash(git *)"},
    {"type": "agent"},
    [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}],
    "x" * 10_000,
    "\u0000",
    "\ud800",
    {"a": [[[[[[[[[[]]]]]]]]]]},
]
FIELDS = [*sorted(KNOWN_FIELDS), "unknownKey"]
ALPHABET = string.printable + ":-[]{}*&!|>'\"#%@`\n\t ,?\x00\x7f\u2028é"


def _deep(rng: random.Random) -> str:
    depth = rng.choice([10, 63, 64, 65, 70, 500, 5000])
    opener, closer = rng.choice([("[", "]"), ("{a: ", "}")])
    return opener * depth + closer * depth


def _bomb(rng: random.Random) -> str:
    width, levels = rng.randint(2, 12), rng.randint(2, 10)
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines)


def _wide(rng: random.Random) -> str:
    return "[" + ", ".join(str(i) for i in range(rng.choice([10, 1000, 5000]))) + "]"


def _frontmatter(fields: dict[str, str]) -> str:
    return "---\n" + "".join(f"{key}: {value}\n" for key, value in fields.items()) + "---\nbody\n"


def mutate_definition(rng: random.Random) -> str:
    """One fuzzed definition text."""
    kind = rng.random()
    if kind < 0.25:  # a known-good shape with odd values in random fields
        fields = {"name": "fuzz", "description": "d"}
        for _ in range(rng.randint(1, 4)):
            fields[rng.choice(FIELDS)] = rng.choice(YAML_ODDITIES)
        return _frontmatter(fields)
    if kind < 0.35:  # generated bombs in a field
        maker: Callable[[random.Random], str] = rng.choice([_deep, _bomb, _wide])
        if maker is _bomb:
            return f"---\nname: b\ndescription: d\n{_bomb(rng)}\n---\nbody\n"
        return _frontmatter({"name": "b", "description": "d", rng.choice(FIELDS): maker(rng)})
    text = rng.choice(DEFINITION_TEXTS)
    for _ in range(rng.randint(1, 6)):
        text = _mutate_text(rng, text)
    return text


def _mutate_text(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    op = rng.randrange(8)
    if op == 0 and text:  # replace a character
        i = rng.randrange(len(text))
        return text[:i] + rng.choice(ALPHABET) + text[i + 1 :]
    if op == 1 and text:  # delete a span
        i = rng.randrange(len(text))
        return text[:i] + text[i + rng.randint(1, 20) :]
    if op == 2 and text:  # duplicate a span
        i = rng.randrange(len(text))
        return text[:i] + text[i : i + rng.randint(1, 40)] * rng.randint(2, 5) + text[i:]
    if op == 3:  # drop or duplicate a line
        i = rng.randrange(len(lines))
        lines[i : i + 1] = [] if rng.random() < 0.5 else [lines[i], lines[i]]
    elif op == 4:  # indent or dedent a line
        i = rng.randrange(len(lines))
        lines[i] = rng.choice(["  ", "\t", " - ", ""]) + lines[i].lstrip()
    elif op == 5:  # replace a value
        i = rng.randrange(len(lines))
        key = lines[i].split(":", 1)[0] if ":" in lines[i] else rng.choice(FIELDS)
        lines[i] = f"{key}: {rng.choice(YAML_ODDITIES)}"
    elif op == 6:  # insert a field line
        lines.insert(
            rng.randrange(len(lines) + 1), f"{rng.choice(FIELDS)}: {rng.choice(YAML_ODDITIES)}"
        )
    else:  # swap two lines
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def _timed(case: str, call: Callable[[], Any]) -> Any:
    started = time.monotonic()
    result = call()
    elapsed = time.monotonic() - started
    assert elapsed < CASE_LIMIT_S, f"{case}: took {elapsed:.1f}s (a hang)"
    return result


def _check_definition_outcome(label: str, parsed: Any) -> None:
    outcomes = [parsed.definition is not None, parsed.error is not None, parsed.skipped]
    assert outcomes.count(True) == 1, (label, parsed)
    for warning in parsed.warnings:
        assert warning.startswith(f"{label}: "), warning
    if parsed.error is not None:
        assert parsed.error.file == label and parsed.error.field and parsed.error.message
        assert str(parsed.error).startswith(f"{label}: {parsed.error.field}: ")
        return
    definition = parsed.definition
    if definition is None:
        return
    assert isinstance(definition.name, str) and definition.name.strip()
    assert not any(ord(ch) < 32 or ord(ch) == 127 for ch in definition.name)
    assert isinstance(definition.description, str) and definition.description.strip()
    assert definition.tools is None or all(isinstance(t, str) and t for t in definition.tools)
    assert definition.max_turns is None or (
        isinstance(definition.max_turns, int) and definition.max_turns > 0
    )
    assert definition.permission_mode in (
        None,
        "acceptEdits",
        "bypassPermissions",
        "default",
        "dontAsk",
        "plan",
    )
    assert definition.isolation in (None, "worktree")
    # What `agents show --json` prints stays small: no alias expansion slipped through.
    assert len(json.dumps(details(definition), default=str)) < 5_000_000


def _cases(
    rng: random.Random, count: int, make: Callable[[random.Random], Any]
) -> Iterator[tuple[int, Any]]:
    for index in range(count):
        yield index, make(rng)


def test_fuzz_definitions_in_memory() -> None:
    rng = random.Random(SEED)
    count = 2500 * SCALE
    refused = loaded = 0
    for index, text in _cases(rng, count, mutate_definition):
        label = f"fuzz/{index}.md"
        try:
            parsed = _timed(
                label,
                lambda text=text, label=label: parse_agent_markdown(
                    text, path=label, source="project"
                ),
            )
            _check_definition_outcome(label, parsed)
        except Exception as exc:  # report the case, then fail
            raise AssertionError(f"seed {SEED} case {index}: {exc!r}\n{text[:2000]!r}") from exc
        refused += parsed.error is not None
        loaded += parsed.definition is not None
    assert refused and loaded, "the fuzzer produced only one kind of case"


def test_fuzz_definition_files_and_special_files(tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    folder = tmp_path / "agents"
    folder.mkdir()
    count = 300 * SCALE
    for index in range(count):
        data = mutate_definition(rng).encode("utf-8", "surrogatepass")
        if rng.random() < 0.1:  # not UTF-8
            data = data.replace(b"e", b"\xe9", 1)
        (folder / f"case-{index}.md").write_bytes(data)
    os.mkfifo(folder / "fifo.md")
    (folder / "loop.md").symlink_to(folder / "loop.md")
    (folder / "zero.md").symlink_to("/dev/zero")
    (folder / "null.md").symlink_to("/dev/null")
    (folder / "dir.md").mkdir()
    (folder / "dir.md" / "up").symlink_to(folder)
    loaded = _timed("load_folder", lambda: load_folder(folder, source="project"))
    named = {error.file for error in loaded.errors}
    assert all(Path(file).parent == folder for file in named)
    for error in loaded.errors:
        assert str(error).startswith(f"{error.file}: {error.field}: ")
    for warning in loaded.warnings:
        assert warning.startswith(str(folder)), warning
    for special in ("fifo.md", "loop.md", "zero.md", "null.md"):
        assert any(w.startswith(str(folder / special)) for w in loaded.warnings), special


def mutate_settings(rng: random.Random) -> str:
    """One fuzzed settings file text."""
    data = json.loads(json.dumps(rng.choice(SETTINGS_DATA) if SETTINGS_DATA else {}))
    for _ in range(rng.randint(1, 5)):
        data = _replace_somewhere(rng, data)
    text = json.dumps(data, ensure_ascii=rng.random() < 0.5)
    if rng.random() < 0.2:
        text = _mutate_text(rng, text)
    if rng.random() < 0.05:
        text = '{"x": ' + "[" * rng.choice([63, 65, 2000, 200_000]) + "]" * 3 + "}"
    return text


def _replace_somewhere(rng: random.Random, data: Any) -> Any:
    """Replace one random node (or add a key) with an odd value."""
    if not isinstance(data, dict | list) or rng.random() < 0.15:
        return copy.deepcopy(rng.choice(JSON_ODDITIES))
    if isinstance(data, dict):
        keys = [*data, "permissions", "hooks", "PreToolUse", "deny", "defaultMode", "if"]
        key = rng.choice(keys)
        data[key] = _replace_somewhere(rng, data.get(key, {}))
        return data
    if not data:
        return [copy.deepcopy(rng.choice(JSON_ODDITIES))]
    i = rng.randrange(len(data))
    data[i] = _replace_somewhere(rng, data[i])
    return data


def test_fuzz_settings_files(tmp_path: Path) -> None:
    rng = random.Random(SEED + 2)
    count = 1200 * SCALE
    nowhere = tmp_path / "nowhere"
    outcomes = {"loaded": 0, "refused": 0}
    for index in range(count):
        text = mutate_settings(rng)
        path = tmp_path / f"settings-{index}.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            settings = _timed(
                path.name,
                lambda path=path: load_settings(
                    cwd=nowhere, home=nowhere, subagents_home=nowhere, extra_file=path
                ),
            )
        except SettingsError as exc:
            assert str(exc).startswith(f"{path}"), exc
            outcomes["refused"] += 1
            continue
        except Exception as exc:
            raise AssertionError(f"seed {SEED} case {index}: {exc!r}\n{text[:2000]!r}") from exc
        outcomes["loaded"] += 1
        for warning in settings.warnings:
            assert warning.startswith(f"{path}: "), warning
        _use(settings, tmp_path, rng)
        path.unlink()
    assert all(outcomes.values()), outcomes


def _use(settings: Any, root: Path, rng: random.Random) -> None:
    """What a session does with loaded settings must not raise either (a rule that does not
    parse is a ``SettingsError`` naming its file)."""
    try:
        context_from_settings(settings, cwd=root)
    except SettingsError as exc:
        assert str(exc).startswith(str(settings.sources[-1])), exc
    try:
        config = config_from_settings(settings)
    except HookConfigError as exc:
        assert str(exc).startswith(str(settings.sources[-1])), exc
        return
    if config is None:
        return
    tool_input = rng.choice(
        [
            {"command": "git push --force"},
            {"command": 'echo "x'},
            {"file_path": "/etc/passwd"},
            {"subagent_type": "Explore"},
            {},
            {"path": None},
        ]
    )
    for event in ("PreToolUse", "PostToolUse", "Stop", "SessionStart"):
        call = ToolCall(
            tool_name=rng.choice(["Bash", "Edit", "Agent", "Read"]),
            tool_input=tool_input,
            cwd=root,
            project_root=root,
            home=root,
            conditions=PermissionRuleConditions(),
        )
        config.commands_for(event, call.tool_name, call if event.endswith("ToolUse") else None)


HOOK_BLOCKS = [
    data["hooks"] for data in SETTINGS_DATA if isinstance(data, dict) and "hooks" in data
]


def test_fuzz_hook_blocks_parse_or_name_the_path() -> None:
    rng = random.Random(SEED + 3)
    for index in range(1500 * SCALE):
        data = copy.deepcopy(rng.choice(HOOK_BLOCKS))
        for _ in range(rng.randint(1, 4)):
            data = _replace_somewhere(rng, data)
        try:
            config = parse_hooks(data, "src.json")
        except HookConfigError as exc:
            assert str(exc).startswith("src.json: hooks"), exc
            continue
        except Exception as exc:
            raise AssertionError(f"seed {SEED} case {index}: {exc!r}\n{data!r}"[:3000]) from exc
        assert all(w.startswith("src.json: hooks") for w in config.warnings)


HOOK_OUTPUT_FIELDS: list[Any] = [
    ("decision", ["block", "approve", "Block", "deny", 1, None, [], {}]),
    ("continue", [True, False, "false", 0, None]),
    ("reason", ["r", 3, None, {"x": 1}]),
    ("systemMessage", ["hi", 7, []]),
    (
        "hookSpecificOutput",
        [
            None,
            "x",
            [],
            {},
            {"permissionDecision": "Deny"},
            {"permissionDecision": "deny", "permissionDecisionReason": "no"},
            {"permissionDecision": "allow"},
            {"updatedInput": "x"},
            {"updatedInput": {"text": "y"}},
            {"additionalContext": 5},
        ],
    ),
]


def _hook_output(rng: random.Random) -> str:
    data = {key: rng.choice(values) for key, values in HOOK_OUTPUT_FIELDS if rng.random() < 0.5}
    text = json.dumps(data)
    if rng.random() < 0.3:
        text = _mutate_text(rng, text)
    return text


def test_fuzz_pre_tool_use_output_fails_closed() -> None:
    """Any PreToolUse JSON output either decides cleanly or blocks; nothing raises."""
    rng = random.Random(SEED + 4)
    command = HookCommand(command="fuzz-hook", source="fuzz.json")
    for index in range(2000 * SCALE):
        stdout = _hook_output(rng)
        warnings: list[str] = []
        run = HookRun(command=command, exit_code=0, stdout=stdout)
        try:
            outcome: HookOutcome = interpret("PreToolUse", [run], warnings.append)
        except Exception as exc:
            raise AssertionError(f"seed {SEED} case {index}: {exc!r}\n{stdout!r}") from exc
        text = stdout.strip()
        if text.startswith("{"):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                assert outcome.blocked, stdout
                assert "cannot be understood" in outcome.block_reason
        if warnings and any("invalid field" in w for w in warnings):
            decisive = any(
                f"{name}:" in w
                for w in warnings
                for name in (
                    "decision",
                    "continue",
                    "permissionDecision",
                    "updatedInput",
                    "hookSpecificOutput",
                )
            )
            assert outcome.blocked or not decisive, (stdout, warnings)


@pytest.mark.parametrize("event", ["PostToolUse", "Stop", "SessionStart"])
def test_fuzz_other_events_never_raise(event: str) -> None:
    rng = random.Random(SEED + 5)
    command = HookCommand(command="fuzz-hook", source="fuzz.json")
    for _ in range(300 * SCALE):
        run = HookRun(
            command=command,
            exit_code=rng.choice([0, 0, 0, 2, 1]),
            stdout=_hook_output(rng),
            stderr=rng.choice(["", "why"]),
        )
        interpret(event, [run], lambda _message: None)
