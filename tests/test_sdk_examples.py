"""claude-agent-sdk's published example scripts run unchanged against ``subagents``.

The scripts in ``tests/sdk_examples/`` are the SDK repository's ``examples/``, verbatim. Each
runs as its own process, as a user would run it, in a sandbox of its own (four at a time: the
``ran`` fixture runs them all once for the module), with a ``claude`` on ``PATH`` that is our
``subagents`` (the SDK looks for its bundled CLI first: the runner sets that lookup aside, the
one change it makes) and a scripted model, through ``SUBAGENTS_MODEL``, that answers each
example's prompts. ``SUBAGENTS_SDK_EXAMPLES_SLOW=1`` adds the examples that wait on purpose
(``streaming_mode.py concurrent_responses`` sleeps ~11 s, ``async_iterable_prompt`` ~30 s).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The first test waits for every example (the ``ran`` fixture); each process is bounded by
# ``run_example``'s own timeout.
pytestmark = pytest.mark.timeout(900)

EXAMPLES = Path(__file__).with_name("sdk_examples")
RUNNER = """
import runpy, sys
from claude_agent_sdk._internal.transport import subprocess_cli
# The SDK prefers the `claude` bundled in its wheel over PATH; use the one on PATH.
subprocess_cli.SubprocessCLITransport._find_bundled_cli = lambda self: None
path = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(path, run_name="__main__")
"""


def main(match: str, *turns: dict[str, Any]) -> dict[str, Any]:
    return {"agent_type": "main", "match": match, "turns": list(turns)}


def call(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": tool_input}]}


def say(text: str, **extra: Any) -> dict[str, Any]:
    return {"text": text, **extra}


def agent(description: str, agent_type: str) -> dict[str, Any]:
    return call("Agent", description=description, prompt=description, subagent_type=agent_type)


def script_for(cwd: Path) -> dict[str, Any]:
    """Answers to every prompt the examples send, by prompt."""
    joke = say("Why did the developer go broke? He used up all his cache.")
    return {"agents": [
        main(r"2 ?\+ ?2", say("2 + 2 = 4"), say("12"), say("8")),
        main("Explain what Python", say("Python is a readable programming language.")),
        main("Create a file called hello.txt",
             call("Write", file_path=str(cwd / "hello.txt"), content="Hello, World!"),
             say("Created hello.txt.")),
        main("What tools do you have", say("I have the tools listed in my request.")),
        main("Read the README", call("Read", file_path=str(cwd / "README.md")), say("summary")),
        main("code-reviewer agent", agent("review types.py", "code-reviewer"),
             say("Review: {{tool_results}}")),
        main("doc-writer agent", agent("explain AgentDefinition", "doc-writer"),
             say("{{tool_results}}")),
        main("analyzer agent", agent("find Python files", "analyzer"), say("{{tool_results}}")),
        {"agent_type": "code-reviewer", "turns": [say("The types look consistent.")]},
        {"agent_type": "doc-writer", "turns": [say("AgentDefinition describes a sub-agent.")]},
        {"agent_type": "analyzer", "turns": [call("Glob", pattern="examples/*.py"),
                                             say("Found: {{tool_results}}")]},
        main(r"\./foo\.sh", call("Bash", command="./foo.sh --help"),
             say("Blocked: {{tool_results}}"),
             call("Bash", command="echo 'Hello from hooks example!'"), say("{{tool_results}}")),
        # The UserPromptSubmit hook's context rides with the prompt.
        main(r"favorite color\?\s+My favorite color is ([a-z ]+)",
             say("Your favorite color is {{match.1}}.")),
        main("nonexistent_directory", call("Bash", command="ls /nonexistent_directory"),
             say("The directory does not exist.")),
        main("important_config",
             call("Write", file_path=str(cwd / "important_config.txt"), content="test data"),
             say("{{tool_results}}"),
             call("Write", file_path=str(cwd / "regular_file.txt"), content="test data"),
             say("{{tool_results}}")),
        main("CRITICAL ERROR", call("Bash", command="echo 'CRITICAL ERROR: system failure'"),
             say("{{tool_results}}")),
        main("capital of France", say("Paris."), say("About 2.1 million people.")),
        main("Count from 1 to", say("1, 2, 3, ...", delay_ms=10_000), joke, say("Hello!")),
        main("List 5 programming", say("Python, JavaScript, Java, Go and Rust.")),
        main("Create a simple hello.txt",
             call("Write", file_path=str(cwd / "hello.txt"), content="Hello there!"),
             say("Done.")),
        main("multiple questions", say("Ask away."), say("Tokyo."), say("30.")),
        main("bash echo command", call("Bash", command="echo 'Hello from bash!'"),
             say("{{tool_results}}")),
        main("sleep command", call("Bash", command="sleep 4"), say("Slept.")),
        main("Please do the following", call("Bash", command="ls"),
             # A relative path: the example's callback redirects it to ./safe_output/.
             call("Write", file_path="hello.py", content="print('Hello, world!')\n"),
             call("Bash", command="python3 safe_output/hello.py"),
             say("It printed: {{tool_results}}")),
        main("Say hello in exactly", say("Hello there, friend.")),
        main("Think of three jokes", joke),
    ]}  # fmt: skip


def make_sandbox(folder: Path) -> Path:
    """A project folder holding the examples (as in the SDK repository: ``examples/`` beside
    ``.claude/``), a ``claude`` shim, and the scripted model."""
    shutil.copytree(EXAMPLES, folder / "examples")
    (folder / "README.md").write_text("# A project\n\nIt does things.\n")
    agents = folder / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "test-agent.md").write_text(
        "---\nname: test-agent\ndescription: A test agent\n---\nYou test things.\n"
    )
    commands = folder / ".claude" / "commands"
    commands.mkdir()
    (commands / "commit.md").write_text("Commit the staged changes.\n")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(Path(sys.executable).with_name("subagents"))
    (folder / "script.json").write_text(json.dumps(script_for(folder)))
    return folder


def run_example(sandbox: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(
        PATH=f"{sandbox / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        SUBAGENTS_MODEL=f"scripted:{sandbox / 'script.json'}",
        SUBAGENTS_PRICES=json.dumps({"scripted": {"input": 3, "output": 15}}),
        # Fifty short-lived processes: let them reuse compiled bytecode (empty = off).
        PYTHONDONTWRITEBYTECODE="",
    )
    return subprocess.run(
        [sys.executable, "-c", RUNNER, str(sandbox / "examples" / f"{name}.py"), *args],
        cwd=sandbox,
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def ok(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert "Traceback" not in run.stderr, run.stderr
    return run.stdout


@dataclass(frozen=True)
class Ran:
    sandbox: Path
    run: subprocess.CompletedProcess[str]


EXAMPLE_RUNS = (
    ("quick_start",),
    ("system_prompt",),
    ("tools_option",),
    ("agents",),
    *(("hooks", name) for name in ("PreToolUse", "DecisionFields", "PostToolUse")),
    ("hooks", "UserPromptSubmit"),
    *(
        ("streaming_mode", name)
        for name in (
            "basic_streaming",
            "multi_turn_conversation",
            "manual_message_handling",
            "with_options",
            "bash_command",
            "with_interrupt",
            "control_protocol",
            "error_handling",
        )
    ),
    ("tool_permission_callback",),
    ("max_budget_usd",),
    ("include_partial_messages",),
    ("stderr_callback_example",),
    ("setting_sources", "all"),
    ("filesystem_agents",),
)


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], Ran]:
    """Every example, each in a sandbox of its own, a few at a time: most of an example's time
    is processes starting and waiting on each other, which overlaps well."""

    def one(example: tuple[str, ...]) -> Ran:
        sandbox = make_sandbox(tmp_path_factory.mktemp("-".join(example)))
        return Ran(sandbox=sandbox, run=run_example(sandbox, *example))

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(EXAMPLE_RUNS, pool.map(one, EXAMPLE_RUNS), strict=True))


def test_quick_start(ran: dict[tuple[str, ...], Ran]) -> None:
    out = ok(ran["quick_start",].run)
    assert "Claude: 2 + 2 = 4" in out and "Claude: Python is a readable" in out
    assert (ran["quick_start",].sandbox / "hello.txt").read_text() == "Hello, World!"
    assert "Cost: $0.0" in out


def test_system_prompt_and_tools_option(ran: dict[tuple[str, ...], Ran]) -> None:
    assert ok(ran["system_prompt",].run).count("Claude: 2 + 2 = 4") == 4
    out = ok(ran["tools_option",].run)
    assert "Tools from system message: ['Glob', 'Grep', 'Read']" in out
    assert "Tools from system message: []" in out
    preset = re.search(r"Tools from system message \((\d+) tools\): \['Agent', 'Bash'", out)
    assert preset is not None and int(preset.group(1)) >= 12, out  # every main-agent tool


def test_agents(ran: dict[tuple[str, ...], Ran]) -> None:
    out = ok(ran["agents",].run)
    assert "The types look consistent." in out
    assert "AgentDefinition describes a sub-agent." in out
    assert "agents.py" in out  # the analyzer's Glob found the examples


def test_hooks(ran: dict[tuple[str, ...], Ran]) -> None:
    out = ok(ran["hooks", "PreToolUse"].run)
    assert "Command contains invalid pattern: foo.sh" in out
    assert "Hello from hooks example!" in out
    decisions = ran["hooks", "DecisionFields"]
    assert "Security policy blocks writes to important files" in ok(decisions.run)
    assert not (decisions.sandbox / "important_config.txt").exists()
    assert (decisions.sandbox / "regular_file.txt").read_text() == "test data"
    ok(ran["hooks", "PostToolUse"].run)
    out = ok(ran["hooks", "UserPromptSubmit"].run)
    assert "Your favorite color is hot pink." in out  # the hook's context reached the model


def test_streaming_mode(ran: dict[tuple[str, ...], Ran]) -> None:
    for name in ("basic_streaming", "multi_turn_conversation", "manual_message_handling",
                 "with_options", "bash_command"):  # fmt: skip
        ok(ran["streaming_mode", name].run)
    out = ok(ran["streaming_mode", "with_interrupt"].run)
    assert "Claude: Why did the developer go broke?" in out
    out = ok(ran["streaming_mode", "control_protocol"].run)
    assert "Server info retrieved successfully" in out and "Interrupt sent successfully" in out
    assert "Claude: Why did the developer" in out  # the turn after the interrupt
    out = ok(ran["streaming_mode", "error_handling"].run)
    assert "Response timeout after 3 seconds" in out


@pytest.mark.skipif(
    os.environ.get("SUBAGENTS_SDK_EXAMPLES_SLOW") != "1", reason="waits ~40 s on purpose"
)
def test_streaming_mode_slow_examples(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path)
    out = ok(run_example(sandbox, "streaming_mode", "concurrent_responses"))
    assert "Claude: 12" in out
    out = ok(run_example(sandbox, "streaming_mode", "async_iterable_prompt"))
    assert "Claude: Tokyo." in out


def test_tool_permission_callback(ran: dict[tuple[str, ...], Ran]) -> None:
    permission = ran["tool_permission_callback",]
    out = ok(permission.run)
    assert "Redirecting write from hello.py to ./safe_output/hello.py" in out
    assert (permission.sandbox / "safe_output" / "hello.py").exists()
    assert "It printed: Hello, world!" in out


def test_budget_partial_messages_and_stderr(ran: dict[tuple[str, ...], Ran]) -> None:
    budget = ran["max_budget_usd",].run
    assert "Status: success" in budget.stdout
    assert "Budget limit exceeded!" in budget.stdout
    # As with Claude Code, the run that ended on an error result exits non-zero, which the
    # SDK raises (ResultError) after yielding the result: the example's last call ends so.
    assert "ResultError" in budget.stderr and "max_budget_usd" in budget.stderr
    out = ok(ran["include_partial_messages",].run)
    assert "StreamEvent(" in out and "content_block_delta" in out
    ok(ran["stderr_callback_example",].run)


def test_setting_sources_and_filesystem_agents(ran: dict[tuple[str, ...], Ran]) -> None:
    out = ok(ran["setting_sources", "all"].run)
    assert out.count("✓") == 4, out
    out = ok(ran["filesystem_agents",].run)
    assert "SUCCESS: test-agent was loaded from filesystem" in out
    assert "SUCCESS: Received full response" in out
