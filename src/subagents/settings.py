"""Settings files: where they are, in which order they merge, and how a bad one is reported.

Files are read in Claude Code's order, lowest priority first, so a later file wins a scalar:

1. user: ``~/.claude/settings.json``, then ``<SUBAGENTS_HOME>/settings.json``;
2. project (only for a trusted workspace): ``.claude/settings.json``,
   ``.claude/settings.local.json``, ``.subagents/settings.json``;
3. the file given with ``--settings``.

Permission rule lists (``allow``, ``deny``, ``ask``, ``additionalDirectories``) are concatenated
across files, first occurrence kept, so a project can never *remove* a user's deny rule; only
``defaultMode`` and other scalar keys are overridden. Hook events concatenate their matcher
groups. A file that is missing is simply absent; a file that exists but cannot be read or parsed
stops the run with a ``SettingsError`` naming the file (and the line and column, for bad JSON):
running without the user's deny rules because their file had a stray comma would be worse
than not running at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from subagents import state

PermissionModeName = Literal["default", "acceptEdits", "bypassPermissions", "dontAsk", "plan"]
RuleBehavior = Literal["allow", "deny", "ask"]
RULE_BEHAVIORS: tuple[RuleBehavior, ...] = ("allow", "deny", "ask")


class SettingsError(ValueError):
    """A settings file that exists but cannot be used; the message names the file."""


class PermissionsSection(BaseModel):
    """The validated ``permissions`` object; unknown keys are kept for forward compatibility."""

    model_config = ConfigDict(extra="allow", strict=True)

    allow: list[str] = []
    deny: list[str] = []
    ask: list[str] = []
    additionalDirectories: list[str] = []  # Claude Code's camelCase keys, as written
    defaultMode: PermissionModeName | None = None


class HookGroup(BaseModel):
    """A matcher group: ``{"matcher": ..., "hooks": [...]}``."""

    model_config = ConfigDict(extra="allow", strict=True)

    matcher: str | None = None
    hooks: list[dict[str, Any]] = []


class SettingsFile(BaseModel):
    """The parts of one settings file this module must understand; everything else passes."""

    model_config = ConfigDict(extra="allow", strict=True)

    permissions: PermissionsSection = PermissionsSection()
    hooks: dict[str, list[HookGroup]] = {}


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
    hooks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Raw hook groups per event, concatenated in file order; ``subagents.hooks`` parses them."""
    values: dict[str, Any] = field(default_factory=dict)
    """Every other top-level key (``env``, ``model``, ...): objects merge per key, later wins."""
    permissions_extra: dict[str, Any] = field(default_factory=dict)
    """Unknown keys of ``permissions`` (later wins), kept for features built later."""
    sources: list[Path] = field(default_factory=list)
    """The files that were found and merged, in merge order."""

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

    ``extra_file`` (``--settings``) must exist: the user named it, so its absence is an error.
    ``trusted=False`` skips the project's files (an untrusted checkout must not grant itself
    permissions); user files and ``extra_file`` still apply.
    """
    home = Path.home() if home is None else home
    if extra_file is not None and not extra_file.exists():
        raise SettingsError(f"{extra_file}: settings file given with --settings does not exist")
    settings = Settings()
    paths = settings_paths(
        cwd=cwd, home=home, subagents_home=subagents_home, extra_file=extra_file, trusted=trusted
    )
    for path in paths:
        parsed = read_settings_file(path)
        if parsed is not None:
            _merge(settings, parsed, path, cwd=cwd, home=home)
    return settings


def read_settings_file(path: Path) -> SettingsFile | None:
    """One file, validated; ``None`` when it does not exist. Every other problem raises."""
    text = _read_text(path)
    if text is None:
        return None
    if not text.strip():
        return SettingsFile()  # an empty file holds no settings; nothing is lost by using none
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise SettingsError(f"{path}: settings must be a JSON object, not a JSON {kind}")
    try:
        return SettingsFile.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(f"{path}: invalid settings: {_describe(exc)}") from None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise SettingsError(f"{path}: settings path is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: settings file is not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read settings file: {exc.strerror or exc}") from None


def _describe(exc: ValidationError) -> str:
    """Pydantic errors as ``field.path: message`` so the user sees which key is wrong."""
    parts = []
    for error in exc.errors():
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
        where = where.removeprefix(".") or "(top level)"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _merge(settings: Settings, parsed: SettingsFile, path: Path, *, cwd: Path, home: Path) -> None:
    settings.sources.append(path)
    perms = parsed.permissions
    for behavior in RULE_BEHAVIORS:
        target = settings.rules(behavior)
        seen = {entry.rule for entry in target}
        for rule in getattr(perms, behavior):
            if rule not in seen:
                seen.add(rule)
                target.append(SourcedRule(rule=rule, source=path))
    for raw in perms.additionalDirectories:
        directory = _resolve_dir(raw, cwd=cwd, home=home)
        if directory not in settings.additional_directories:
            settings.additional_directories.append(directory)
    if perms.defaultMode is not None:
        settings.default_mode = perms.defaultMode
        settings.default_mode_source = path
    settings.permissions_extra.update(perms.model_extra or {})
    for event, groups in parsed.hooks.items():
        merged = settings.hooks.setdefault(event, [])
        merged.extend(group.model_dump(exclude_unset=True) for group in groups)
    for key, value in (parsed.model_extra or {}).items():
        settings.values[key] = _merge_value(settings.values.get(key), value)


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
