"""Settings files: where they are, in which order they merge, and how a bad one is reported.

Files are read in Claude Code's order, lowest priority first, so a later file wins a scalar:

1. user: ``~/.claude/settings.json``, then ``<SUBAGENTS_HOME>/settings.json``;
2. project (only for a trusted workspace): ``.claude/settings.json``,
   ``.claude/settings.local.json``, ``.subagents/settings.json``;
3. the file given with ``--settings``.

Permission rule lists (``allow``, ``deny``, ``ask``, ``additionalDirectories``) are concatenated
across files, first occurrence kept, so a project can never *remove* a user's deny rule; only
``defaultMode`` and other scalar keys are overridden. Hook events concatenate their matcher
groups. A file that is missing is simply absent.

What is fatal and what is a warning follows one rule: **a value whose loss could only make the
run stricter is a warning; anything whose loss could make it looser stops the run** with a
``SettingsError`` naming the file and the field (line and column, for bad JSON), because running
without the user's deny rules because their file had a stray comma would be worse than not
running at all.

* ``SettingsError``: not valid JSON (or nested deeper than ``config_files.MAX_DEPTH``), not a
  JSON object, over the size cap, not UTF-8, unreadable; ``permissions`` not an object;
  ``deny``/``ask`` not a list of rule strings; a ``defaultMode`` that is not a mode; a
  ``--settings`` file that is missing or is not a regular file. Hook blocks are kept as written
  (``Settings.hook_blocks``) and validated by ``hooks.config.config_from_settings`` with the
  same rule: a malformed hook of an event we fire is a ``HookConfigError`` naming the file.
* warnings (``Settings.warnings``; the rest loads): a discovered settings path that is a FIFO,
  device, socket or directory (skipped without reading: start-up cannot hang on it);
  ``allow``/``additionalDirectories`` of the wrong shape (ignored: fewer allows);
  ``defaultMode: "auto"`` (Claude Code's classifier mode: no classifier is built here, so it
  behaves as ``default``); an ``env`` that is not an object, or an entry whose name or value
  cannot be an environment variable (ignored: the commands run without it).

``env`` (Claude Code: "environment variables applied to every session") merges per name, later
file wins, and reaches every command an agent runs (Bash, background shells; children inherit
it); numbers and booleans become their JSON text, as Claude Code coerces them. Hooks keep their
clean environment (``hooks/runner.clean_environment``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

from subagents import state
from subagents.config_files import (
    ConfigFileError,
    ConfigSyntaxError,
    SpecialFileError,
    load_json,
    read_config_text,
)

PermissionModeName = Literal["default", "acceptEdits", "bypassPermissions", "dontAsk", "plan"]
RuleBehavior = Literal["allow", "deny", "ask"]
RULE_BEHAVIORS: tuple[RuleBehavior, ...] = ("allow", "deny", "ask")

SHELL_CHANGING_ENV: Final = frozenset(
    {"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "IFS", "PS4", "LD_PRELOAD", "LD_AUDIT"}
)
"""Settings ``env`` names left out: with them ``bash -c CMD`` would run more than the ``CMD``
the permission check read (``BASH_FUNC_*`` names too: exported functions shadow commands)."""

AUTO_MODE: Final = "auto"
"""Claude Code's classifier-approved mode: accepted in settings, run as ``default``."""


class SettingsError(ValueError):
    """A settings file that exists but cannot be used; the message names the file."""


@dataclass(kw_only=True)
class SettingsFile:
    """The parts of one settings file this module understands, validated (see module doc)."""

    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    additional_directories: list[str] = field(default_factory=list)
    default_mode: PermissionModeName | None = None
    permissions_extra: dict[str, Any] = field(default_factory=dict)
    hooks: Any = None
    """The raw ``hooks`` value; ``hooks.config.parse_hooks`` validates it."""
    env: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    """Every other top-level key."""
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SourcedRule:
    """A permission rule string and the settings file it came from."""

    rule: str
    source: Path


@dataclass(kw_only=True)
class Settings:
    """The merged settings of every file that applies to this run."""

    allow: list[SourcedRule] = field(default_factory=list)
    deny: list[SourcedRule] = field(default_factory=list)
    ask: list[SourcedRule] = field(default_factory=list)
    additional_directories: list[Path] = field(default_factory=list)
    """Resolved: ``~`` is ``home``, relative entries start at the directory the run starts in."""
    default_mode: PermissionModeName | None = None
    default_mode_source: Path | None = None
    hooks: dict[str, list[Any]] = field(default_factory=dict)
    """Raw hook groups per event (list values only), concatenated in file order."""
    hook_blocks: list[tuple[Path, Any]] = field(default_factory=list)
    """Each file's ``hooks`` value as written, in file order; ``hooks.config_from_settings``
    validates them file by file (so errors and warnings name the file)."""
    env: dict[str, str] = field(default_factory=dict)
    """The ``env`` variables every command of the run sees; later files win per name."""
    values: dict[str, Any] = field(default_factory=dict)
    """Every other top-level key (``model``, ``mcpServers``, ...): objects merge per key, later
    wins."""
    permissions_extra: dict[str, Any] = field(default_factory=dict)
    """Unknown keys of ``permissions`` (later wins), kept for features built later."""
    sources: list[Path] = field(default_factory=list)
    """The files that were found and merged, in merge order."""
    warnings: list[str] = field(default_factory=list)
    """What was ignored, each naming its file and field; the session shows every one."""

    def rules(self, behavior: RuleBehavior) -> list[SourcedRule]:
        """The rule list for ``behavior`` (``allow``, ``deny`` or ``ask``)."""
        lists = {"allow": self.allow, "deny": self.deny, "ask": self.ask}
        return lists[behavior]


def settings_paths(
    *,
    cwd: Path,
    home: Path | None = None,
    subagents_home: Path | None = None,
    extra_file: Path | None = None,
    trusted: bool = True,
) -> list[Path]:
    """Candidate files in merge order (lowest priority first); duplicates appear once."""
    home = Path.home() if home is None else home
    if subagents_home is None:
        subagents_home = state.subagents_home(home)
    paths = [home / ".claude" / "settings.json", subagents_home / "settings.json"]
    if trusted:
        paths += [
            cwd / ".claude" / "settings.json",
            cwd / ".claude" / "settings.local.json",
            cwd / ".subagents" / "settings.json",
        ]
    if extra_file is not None:
        paths.append(extra_file)
    return _unique_paths(paths)


def load_settings(
    *,
    cwd: Path,
    home: Path | None = None,
    subagents_home: Path | None = None,
    extra_file: Path | None = None,
    trusted: bool = True,
) -> Settings:
    """Read and merge every settings file that applies; raise ``SettingsError`` on a bad one.

    ``extra_file`` (``--settings``) must exist and be a regular file: the user named it, so its
    absence is an error. ``trusted=False`` skips the project's files (an untrusted checkout must
    not grant itself permissions); user files and ``extra_file`` still apply.
    """
    home = Path.home() if home is None else home
    settings = Settings()
    paths = settings_paths(
        cwd=cwd, home=home, subagents_home=subagents_home, extra_file=extra_file, trusted=trusted
    )
    for path in paths:
        parsed = _read_one(path, named=path == extra_file, warnings=settings.warnings)
        if parsed is not None:
            _merge(settings, parsed, path, cwd=cwd, home=home)
    return settings


def _read_one(path: Path, *, named: bool, warnings: list[str]) -> SettingsFile | None:
    try:
        parsed = read_settings_file(path)
    except SpecialFileError as exc:
        if named:
            raise SettingsError(f"{exc}; --settings needs a settings file") from None
        warnings.append(f"{exc}; skipped, not read as a settings file")
        return None
    if parsed is None and named:
        raise SettingsError(f"{path}: settings file given with --settings does not exist")
    return parsed


def read_settings_file(path: Path) -> SettingsFile | None:
    """One file, validated; ``None`` when it does not exist. ``SpecialFileError`` for a FIFO,
    device, socket or directory (never read); every other problem is a ``SettingsError``."""
    try:
        text = read_config_text(path)
    except SpecialFileError:
        raise
    except ConfigFileError as exc:
        raise SettingsError(f"{exc} (settings file)") from None
    if text is None:
        return None
    if not text.strip():
        return SettingsFile()  # an empty file holds no settings; nothing is lost by using none
    try:
        data = load_json(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except ConfigSyntaxError as exc:
        raise SettingsError(f"{path}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise SettingsError(f"{path}: settings must be a JSON object, not a JSON {kind}")
    return _validate(data, path)


def _validate(data: dict[str, Any], path: Path) -> SettingsFile:
    parsed = SettingsFile(hooks=data.get("hooks"))
    perms = data.get("permissions", {})
    if not isinstance(perms, dict):
        raise SettingsError(f"{path}: permissions: must be an object of rule lists")
    parsed.deny = _rule_list(perms.get("deny"), path, "deny")
    parsed.ask = _rule_list(perms.get("ask"), path, "ask")
    parsed.allow = _loose_list(perms.get("allow"), path, "allow", parsed.warnings)
    parsed.additional_directories = _loose_list(
        perms.get("additionalDirectories"), path, "additionalDirectories", parsed.warnings
    )
    parsed.default_mode = _default_mode(perms.get("defaultMode"), path, parsed.warnings)
    known = {*RULE_BEHAVIORS, "additionalDirectories", "defaultMode"}
    parsed.permissions_extra = {k: v for k, v in perms.items() if k not in known}
    parsed.env = _env(data.get("env"), path, parsed.warnings)
    parsed.values = {k: v for k, v in data.items() if k not in ("permissions", "hooks", "env")}
    return parsed


def _env(value: Any, path: Path, warnings: list[str]) -> dict[str, str]:
    """``env``: names to text; what cannot be a variable is warned and left out."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        warnings.append(f"{path}: env: must be an object of variable names to values; ignored")
        return {}
    env: dict[str, str] = {}
    for name, raw in value.items():
        text = json.dumps(raw) if isinstance(raw, bool | int | float) else raw
        usable = isinstance(text, str) and _env_text(text) and _env_text(name) and "=" not in name
        if not name or not usable:
            warnings.append(f"{path}: env[{name!r}]: not a usable environment variable; ignored")
            continue
        if name in SHELL_CHANGING_ENV or name.startswith("BASH_FUNC_"):
            warnings.append(
                f"{path}: env[{name!r}]: changes what bash runs behind the permission check "
                "(a startup file, options, exported functions or a preloaded library); ignored"
            )
            continue
        env[name] = text
    return env


def _env_text(text: str) -> bool:
    """Text a process environment can carry (no NUL, encodable: a lone surrogate is not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\0" not in text


def _rule_list(value: Any, path: Path, behavior: str) -> list[str]:
    """``deny``/``ask``: dropping one of these would widen the run, so a bad shape is fatal."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(rule, str) for rule in value):
        raise SettingsError(
            f"{path}: permissions.{behavior}: must be a list of rule strings such as "
            '"Bash(rm:*)"; refusing to run without them'
        )
    return value


def _loose_list(value: Any, path: Path, key: str, warnings: list[str]) -> list[str]:
    """``allow``/``additionalDirectories``: dropping entries only narrows, so a warning."""
    if value is None:
        return []
    if not isinstance(value, list):
        warnings.append(f"{path}: permissions.{key}: must be a list of strings; ignored")
        return []
    kept = [item for item in value if isinstance(item, str)]
    if len(kept) != len(value):
        warnings.append(f"{path}: permissions.{key}: entries that are not strings were ignored")
    return kept


def _default_mode(value: Any, path: Path, warnings: list[str]) -> PermissionModeName | None:
    if value is None:
        return None
    if value == AUTO_MODE:
        warnings.append(
            f"{path}: permissions.defaultMode: 'auto' is Claude Code's classifier-approved mode; "
            "no classifier is built here, so it behaves as 'default' (a call that needs "
            "approval is asked, or denied when no one can answer)"
        )
        return "default"
    modes: tuple[PermissionModeName, ...] = get_args(PermissionModeName)
    for mode in modes:
        if value == mode:
            return mode
    raise SettingsError(
        f"{path}: permissions.defaultMode: {value!r} is not a permission mode "
        f"(expected one of {', '.join(modes)}, or auto)"
    )


def _merge(settings: Settings, parsed: SettingsFile, path: Path, *, cwd: Path, home: Path) -> None:
    settings.sources.append(path)
    settings.warnings.extend(parsed.warnings)
    for behavior in RULE_BEHAVIORS:
        target = settings.rules(behavior)
        seen = {entry.rule for entry in target}
        for rule in getattr(parsed, behavior):
            if rule not in seen:
                seen.add(rule)
                target.append(SourcedRule(rule=rule, source=path))
    for raw in parsed.additional_directories:
        directory = _resolve_dir(raw, cwd=cwd, home=home)
        if directory not in settings.additional_directories:
            settings.additional_directories.append(directory)
    if parsed.default_mode is not None:
        settings.default_mode = parsed.default_mode
        settings.default_mode_source = path
    settings.permissions_extra.update(parsed.permissions_extra)
    settings.env.update(parsed.env)
    _merge_hooks(settings, parsed.hooks, path)
    for key, value in parsed.values.items():
        settings.values[key] = _merge_value(settings.values.get(key), value)


def _merge_hooks(settings: Settings, raw: Any, path: Path) -> None:
    if raw is None:
        return
    settings.hook_blocks.append((path, raw))
    if isinstance(raw, dict):
        for event, groups in raw.items():
            if isinstance(groups, list):
                settings.hooks.setdefault(str(event), []).extend(groups)


def _merge_value(old: Any, new: Any) -> Any:
    """Objects merge per key, lists concatenate (deduplicated), anything else: the new value."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **new}
    if isinstance(old, list) and isinstance(new, list):
        return old + [item for item in new if item not in old]
    return new


def _resolve_dir(raw: str, *, cwd: Path, home: Path) -> Path:
    path = home / raw[2:] if raw == "~" or raw.startswith("~/") else Path(raw)
    if not path.is_absolute():
        path = cwd / path
    return path.resolve(strict=False)


def _unique_paths(paths: list[Path]) -> list[Path]:
    """Drop a file listed twice (home used as project dir) so its rules are not merged twice."""
    seen: set[Path] = set()
    unique = []
    for path in paths:
        try:
            key = path.resolve(strict=False)
        except (OSError, RuntimeError):  # a symlink loop: reading it will report the error
            key = path.absolute()
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique
