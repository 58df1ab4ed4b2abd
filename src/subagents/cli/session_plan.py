"""From the command line to ``SessionOptions``: every headless flag, read and checked once.

``SessionPlan.from_args`` fails before anything runs (``StartupError``, one line) on a bad
directory, model, file or value; ``SessionPlan.build`` makes the ``Session``, adding what an
SDK's ``initialize`` brought (agents, hooks, the permission prompt).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from subagents.cli.claude_models import ModelChoice, choose
from subagents.cli.flags import split_list
from subagents.cli.session_request import SessionRequest
from subagents.distributed.select import executor_from_env
from subagents.session import Session, SessionOptions
from subagents.state import ProjectState

DEFAULT_MODEL = "local"
"""The embedded model: what ``-p`` runs on a machine with no key and no server configured."""
ANTHROPIC_DEFAULT = "anthropic:sonnet"
SDK_ONLY_AGENT_FIELDS = ("initialPrompt", "effort")
"""``AgentDefinition`` fields of the SDK with no counterpart here: dropped with a warning."""


class StartupError(Exception):
    """The session could not start; the message is the one line the user sees."""


@dataclass(kw_only=True)
class SessionPlan:
    """What the CLI's flags resolve to: the session's options and model."""

    options: SessionOptions
    model: ModelChoice
    configured_model: str
    warn: Callable[[str], None]

    @classmethod
    def from_args(cls, args: argparse.Namespace, warn: Callable[[str], None]) -> SessionPlan:
        cwd = Path(args.cwd).expanduser() if args.cwd else Path.cwd()
        if not cwd.is_dir():
            raise StartupError(f"--cwd {args.cwd}: not a directory")
        configured = choose_model(None, os.environ) if not _is_spec(args.model) else args.model
        model = choose(args.model, configured)
        explicit = bool(args.model or os.environ.get("SUBAGENTS_MODEL"))
        check_local_model(model.spec, explicit=explicit)
        options = SessionOptions(
            model=model.spec,
            executor=executor_from_env(os.environ, model_spec=model.spec),
            cwd=cwd,
            max_turns=args.max_turns,
            resume=_resume(args, cwd),
            session_id=args.session_id,
            fork_session=args.fork_session,
            fallback_model=choose(args.fallback_model, configured).spec
            if args.fallback_model
            else None,
            agents_json=args.agents,
            permission_mode=_mode(args),
            settings_file=_settings_file(args.settings),
            system_prompt=args.system_prompt,
            system_prompt_file=(
                Path(args.system_prompt_file).expanduser() if args.system_prompt_file else None
            ),
            append_system_prompt=_text_or_file(
                args.append_system_prompt, args.append_system_prompt_file, "append-system"
            ),
            tool_names=None if args.tools is None else split_list(args.tools),
            allowed_tools=[r for v in args.allowed_tools for r in split_list(v)],
            disallowed_tools=[r for v in args.disallowed_tools for r in split_list(v)],
            additional_dirs=[Path(d).expanduser() for d in args.add_dirs],
            max_budget_usd=args.max_budget_usd,
            json_schema=_json_schema(args.json_schema),
            mcp_config=tuple(args.mcp_config),
            strict_mcp_config=args.strict_mcp_config,
        )
        return cls(options=options, model=model, configured_model=configured, warn=warn)

    def build(self, request: SessionRequest) -> Session:
        options = self.options
        if request.agents:
            options = replace(options, agents_json=self._agents_json(request.agents))
        if request.hooks is not None:
            options = replace(options, hooks=request.hooks)
        if request.ask is not None:
            options = replace(options, ask_callback=request.ask)
        if request.mcp_sdk is not None:
            options = replace(options, mcp_sdk=request.mcp_sdk)
        return Session(options)

    def _agents_json(self, sdk_agents: Mapping[str, Any]) -> str:
        merged: dict[str, Any] = json.loads(self.options.agents_json or "{}")
        for name, spec in sdk_agents.items():
            entry = dict(spec) if isinstance(spec, Mapping) else spec
            if isinstance(entry, dict):
                for key in SDK_ONLY_AGENT_FIELDS:
                    if entry.pop(key, None) is not None:
                        self.warn(f"agent {name!r}: {key} is accepted but not honoured")
            merged[name] = entry
        return json.dumps(merged)


def _is_spec(model: str | None) -> bool:
    from subagents.cli.claude_models import is_provider_spec

    return model is not None and is_provider_spec(model)


def _resume(args: argparse.Namespace, cwd: Path) -> str | None:
    resume: str | None = args.resume
    if args.continue_latest and not resume:
        resume = latest_session(ProjectState.for_cwd(cwd))
        if resume is None:
            raise StartupError(f"--continue: no earlier session for {cwd}")
    return resume


def _mode(args: argparse.Namespace) -> str | None:
    if args.dangerously_skip_permissions:
        return "bypassPermissions"
    mode: str | None = args.permission_mode
    return None if mode == "auto" else mode


def _settings_file(value: str | None) -> Path | None:
    """``--settings`` is a file, or (as the SDK passes it) a JSON object, kept in a temp file
    for the process's life."""
    if value is None:
        return None
    if not value.lstrip().startswith("{"):
        return Path(value).expanduser()
    try:
        json.loads(value)
    except ValueError as exc:
        raise StartupError(f"--settings: invalid JSON: {exc}") from None
    import tempfile  # only for this flag: with shutil, bz2 and lzma, ~3 % of a -p start-up

    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - it must outlive this function
        "w", prefix="subagents-settings-", suffix=".json", delete=False
    )
    with handle:
        handle.write(value)
    _cleanup_at_exit(Path(handle.name))
    return Path(handle.name)


def _cleanup_at_exit(path: Path) -> None:
    import atexit

    atexit.register(lambda: path.unlink(missing_ok=True))


def _text_or_file(text: str | None, file: str | None, flag: str) -> str | None:
    if file is None:
        return text
    if text is not None:
        raise StartupError(f"--{flag}-prompt and --{flag}-prompt-file: give one of them")
    try:
        return Path(file).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StartupError(f"--{flag}-prompt-file {file}: {exc}") from None


def _json_schema(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise StartupError(f"--json-schema: invalid JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise StartupError("--json-schema: expected a JSON schema object")
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise StartupError(f"--json-schema: not a valid schema: {exc.message}") from None
    return schema


def choose_model(cli_model: str | None, env: Mapping[str, str]) -> str:
    """The model spec of a run: ``--model`` > ``SUBAGENTS_MODEL`` > Claude when
    ``ANTHROPIC_API_KEY`` is set > ``openai:<OPENAI_MODEL>`` when ``OPENAI_BASE_URL`` is set >
    the embedded ``local`` model, so a fresh machine with no key still runs."""
    if cli_model:
        return cli_model
    if env.get("SUBAGENTS_MODEL"):
        return env["SUBAGENTS_MODEL"]
    if env.get("ANTHROPIC_API_KEY"):
        return ANTHROPIC_DEFAULT
    if env.get("OPENAI_BASE_URL"):
        name = env.get("OPENAI_MODEL", "").strip()
        if not name:
            raise StartupError(
                "OPENAI_BASE_URL is set but OPENAI_MODEL is not: set OPENAI_MODEL to the "
                "server's model name, or pass --model openai:NAME"
            )
        return f"openai:{name}"
    return DEFAULT_MODEL


def check_local_model(spec: str, *, explicit: bool) -> None:
    """Fail before the run starts, in one line, when a ``local`` model cannot load: a missing
    engine or model file would otherwise surface only as the first model call's error."""
    provider, _, rest = spec.strip().partition(":")
    if provider != "local":
        return
    from subagents.models.base import ModelError
    from subagents.models.local import INSTALL_EXTRA_HINT, local_model_for

    others = "" if explicit else "; or set ANTHROPIC_API_KEY, OPENAI_BASE_URL or --model"
    if importlib.util.find_spec("xllamacpp") is None:
        raise StartupError(f"{INSTALL_EXTRA_HINT}, then run `subagents model install`{others}")
    try:
        local_model_for(rest).model_path()
    except ModelError as error:
        raise StartupError(f"{_one_line(str(error))}{others}") from None


def latest_session(state: ProjectState) -> str | None:
    recent = recent_sessions(state, limit=1)
    return recent[0][0] if recent else None


def recent_sessions(state: ProjectState, limit: int = 10) -> list[tuple[str, float]]:
    """The project's sessions, most recently active first: (session id, mtime)."""
    folder = state.sessions_dir
    if not folder.is_dir():
        return []
    stamped = sorted(((p.stat().st_mtime_ns, p.stem) for p in folder.glob("*.jsonl")), reverse=True)
    return [(stem, ns / 1e9) for ns, stem in stamped[:limit]]


def slash_commands(cwd: Path, sources: str | None = None, home: Path | None = None) -> list[str]:
    """Custom slash commands Claude Code would offer: ``.claude/commands/**/*.md`` of the
    project and the user (``sub/name.md`` is ``sub:name``), from the ``--setting-sources``
    named (default: all)."""
    wanted = set(split_list(sources)) if sources is not None else {"user", "project"}
    roots = []
    if "project" in wanted:
        roots.append(cwd / ".claude" / "commands")
    if "user" in wanted:
        roots.append((home or Path.home()) / ".claude" / "commands")
    names: list[str] = []
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.md"))[:500]:
            parts = path.relative_to(root).with_suffix("").parts
            name = ":".join(parts)
            if name not in names:
                names.append(name)
    return names


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line[:300]
