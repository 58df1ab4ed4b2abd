"""What ``subagents -p`` imports on its way to the first model request (issue 20, start-up).

Start-up CPU is measured in ``bench/startup.py``, never here; these tests pin its cause: the
modules a one-turn run loads. ``import anthropic`` alone costs over a second of CPU, the HTTP
stack the SDKs share a tenth of one, and the other providers' and optional parts' modules are
not needed either — so a run on the Anthropic path (lean transport, a real local server) and a
run on the scripted path must load none of them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from wire_server import AnthropicWire, WireServer

WRAPPER = (
    "import atexit, json, sys\n"
    "out = sys.argv.pop(1)\n"
    "def report():\n"
    "    signature_docs = sorted(\n"
    "        f'{name}.{cls.__qualname__}'\n"
    "        for name, module in list(sys.modules.items()) if name.startswith('subagents')\n"
    "        for cls in vars(module).values()\n"
    "        if isinstance(cls, type) and cls.__module__ == name\n"
    "        and '__dataclass_fields__' in vars(cls)\n"
    "        and (cls.__doc__ or '').startswith(cls.__name__ + '(')\n"
    "    )\n"
    "    script = sys.modules.get('subagents.models.script_schema')\n"
    "    built = sorted(\n"
    "        k for k, v in vars(script).items()\n"
    "        if isinstance(v, type) and getattr(v, '__pydantic_complete__', False)\n"
    "    ) if script else []\n"
    "    base = sys.modules.get('pydantic.main')\n"
    "    models = sorted(\n"
    "        f'{name}.{cls.__qualname__}'\n"
    "        for name, module in list(sys.modules.items()) if name.startswith('subagents')\n"
    "        for cls in vars(module).values()\n"
    "        if isinstance(cls, type) and cls.__module__ == name\n"
    "        and base is not None and issubclass(cls, base.BaseModel)\n"
    "    )\n"
    "    facts = {'modules': sorted(sys.modules), 'signature_docs': signature_docs,\n"
    "             'built_script_models': built, 'pydantic_models': models}\n"
    "    open(out, 'w').write(json.dumps(facts))\n"
    "atexit.register(report)\n"
    "from subagents.cli.main import main\n"
    "sys.exit(main())\n"
)
NEVER = {
    "anthropic",
    "openai",
    "httpx2",
    "httpx",
    "httpcore2",
    "h11",
    "anyio",
    "xllamacpp",
    "subagents.models.local",
    "subagents.models.local_install",
    "urllib.request",
    "http.client",
    "mcp",
    "mcp_types",
    "jsonschema",
    "subagents.mcp.entries",
    "subagents.mcp.connection",
    "subagents.mcp.servers",
    "textual",
    "rich",
    "subagents.tui",
    "subagents.tui.app",
    "importlib.metadata",
    "email",
    "zipfile",
    "csv",
    "tempfile",
    "html",
    "html.entities",
    "ctypes",
    "subagents.agents.cli_agents",
    "shutil",
    "shlex",
    "bz2",
    "lzma",
    "subagents.cli.stream_session",
    "subagents.cli.control",
    "subagents.cli.stream_input",
    "subagents.cli.sdk_events",
    "subagents.cli.sdk_requests",
    "subagents.mcp.sdk_bridge",
    "subagents.tools.walk",
    "subagents.tools.ripgrep",
    "subagents.tools.ignore",
}
"""Not loaded by a one-turn ``-p`` run on the Anthropic or the scripted path: neither the SDKs,
nor the optional parts, nor what only a later step needs — ``importlib.metadata`` and what it
brings (pydantic's plugin discovery, answered by ``cli/pydantic_plugins.py`` when no plugin is
installed), ``tempfile`` (``--settings`` JSON), ``html`` (SendMessage), ``ctypes`` (the first
``syncfs``), ``agents.cli_agents`` (``--agents`` JSON, a pydantic model), ``shlex`` (an
exec-form hook), ``shutil`` with ``bz2`` and ``lzma`` (argparse's width comes from ``cli/main.terminal_columns``), the stream-json
session and its control channel (``--input-format``/``--output-format stream-json``), what Glob
and Grep search with (``tools.walk``, ``tools.ripgrep``, ``tools.ignore``: their first call)."""
NEVER_PREFIXES = (
    "opentelemetry",
    "subagents.telemetry",
    "google.protobuf",
    "requests",
    "yaml",
    "subagents.config_yaml",
    "subagents.agents.teams",
    "subagents.agents.team_tools",
    "subagents.agents.teammates",
    "subagents.tools.bash_",
    "subagents.permissions.bash_decision",
    "subagents.permissions.commands",
    "subagents.worktrees",
    "subagents.tools.inputs",
)
"""Nor anything of these packages: telemetry (off unless ``SUBAGENTS_TELEMETRY=1``) and what
its exporter brings; PyYAML (~10 ms: only a definition's frontmatter or a ``.yaml`` script is
YAML, and these projects have neither); agent teams (opt-in, ``SUBAGENTS_AGENT_TEAMS=1``); the shell parser and the Bash
permission analysis (the first Bash call loads them); git worktrees (an isolated child or
EnterWorktree loads them); the built-in tools' input models (``tools/inputs/``: a tool's first
call loads its own; the schemas sent before come from the generated table)."""


def never_loaded(loaded: set[str]) -> set[str]:
    """What ``loaded`` holds that a -p run must not load."""
    return (loaded & NEVER) | {m for m in loaded if m.startswith(NEVER_PREFIXES)}


async def run_cli(tmp_path: Path, *args: str, env: dict[str, str]) -> set[str]:
    """Run ``subagents`` under the wrapper; the modules loaded by the time it exited."""
    return set((await run_facts(tmp_path, *args, env=env))["modules"])


async def run_facts(tmp_path: Path, *args: str, env: dict[str, str]) -> dict[str, Any]:
    """Run ``subagents`` under the wrapper; what it reported at exit (``WRAPPER``)."""
    out = tmp_path / "facts.json"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRAPPER, str(out), *args, "--cwd", str(tmp_path),
        env={**os.environ, "HOME": str(tmp_path), "SUBAGENTS_HOME": str(tmp_path / "home"), **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert stdout.decode().strip() == "the answer"
    facts: dict[str, Any] = json.loads(out.read_text())
    return facts


def anthropic_answering(wire_server: WireServer) -> dict[str, str]:
    """Queue one text answer and return the environment of a run that asks the wire server."""
    wire_server.queue(AnthropicWire(wire_server).text("the answer"))
    return {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": wire_server.url, "SUBAGENTS_MODEL": ""}


async def test_an_anthropic_run_loads_no_sdk_and_no_other_provider(
    wire_server: WireServer, tmp_path: Path
) -> None:
    env = anthropic_answering(wire_server)

    loaded = await run_cli(tmp_path, "-p", "hi", env=env)

    assert len(wire_server.requests) == 1  # the run really went over HTTP
    assert never_loaded(loaded) == set()
    assert "subagents.models.scripted" not in loaded
    assert "subagents.models.anthropic" in loaded


async def test_a_scripted_run_loads_no_http_provider(tmp_path: Path) -> None:
    script = tmp_path / "one.json"
    script.write_text(json.dumps({"agents": [{"turns": [{"text": "the answer"}]}]}))

    loaded = await run_cli(tmp_path, "-p", "hi", "--model", f"scripted:{script}", env={})

    assert never_loaded(loaded) == set()
    http_providers = {"subagents.models.anthropic", "subagents.models.openai"}
    assert loaded & {*http_providers, "subagents.models._http"} == set()


async def test_a_scripted_run_builds_one_script_model_and_no_signature_docstrings(
    tmp_path: Path,
) -> None:
    """Two costs of start-up that come back silently. The script's models are built at their
    first validation, the file's ``ScriptFile`` building what it nests (built with each class,
    the nested ones were built again: ~2 M instructions). And ``dataclasses`` gives a class
    without a docstring one made from ``inspect.signature`` (~0.2 M instructions each): every
    runtime dataclass a run creates has its own."""
    script = tmp_path / "one.json"
    script.write_text(json.dumps({"agents": [{"turns": [{"text": "the answer"}]}]}))

    facts = await run_facts(tmp_path, "-p", "hi", "--model", f"scripted:{script}", env={})

    assert facts["built_script_models"] == ["ScriptFile"]
    assert facts["signature_docs"] == []
    script_models = {f"subagents.models.script_schema.{name}" for name in SCRIPT_MODELS}
    assert set(facts["pydantic_models"]) == script_models | TOOL_INPUT_BASES


SCRIPT_MODELS = ("ErrorSpec", "ScriptAgent", "ScriptFile", "ScriptToolCall", "ScriptTurn")
SCRIPT_MODELS += ("ScriptUsage", "_Strict")
TOOL_INPUT_BASES = {"subagents.tools.base.BuiltinToolInput", "subagents.tools.base.ToolInput"}
"""The pydantic model classes a one-turn run creates: a model class costs ~1-2 M instructions
to create even when its build is deferred, so the tools' inputs (the Agent tool's, ExitPlanMode's,
StructuredOutput's and ``tools/inputs/``) are created at each tool's first call."""


async def test_an_anthropic_run_creates_no_tool_input_model(
    wire_server: WireServer, tmp_path: Path
) -> None:
    env = anthropic_answering(wire_server)

    facts = await run_facts(tmp_path, "-p", "hi", env=env)

    assert set(facts["pydantic_models"]) == TOOL_INPUT_BASES


PLUGIN = """\
import os


class Plugin:
    def new_schema_validator(self, schema, schema_type, path, kind, config, settings):
        open(os.environ["PROBE_MARKER"], "a").close()
        return None, None, None


plugin = Plugin()
"""


async def test_an_installed_pydantic_plugin_is_still_loaded(tmp_path: Path) -> None:
    """The cheap "no plugin" answer is given only when none is installed: a distribution on
    the path declaring a ``pydantic`` entry point gets pydantic's own loader, which loads it."""
    site = tmp_path / "site"
    info = site / "probe_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[console_scripts]\nx = y:z\n\n[pydantic]\nprobe = probe_plugin:plugin\n"
    )
    (site / "probe_plugin.py").write_text(PLUGIN)
    script = tmp_path / "one.json"
    script.write_text(json.dumps({"agents": [{"turns": [{"text": "the answer"}]}]}))
    marker = tmp_path / "plugin-saw-a-model"
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    env = {"PYTHONPATH": path, "PROBE_MARKER": str(marker)}

    loaded = await run_cli(tmp_path, "-p", "hi", "--model", f"scripted:{script}", env=env)

    assert marker.exists()  # pydantic called the plugin for the runtime's models
    assert "importlib.metadata" in loaded
