"""The scripted model's file format (SPEC §19), validated with pydantic.

A script is public API: tests written by our users depend on it, so a mistake in one must come
back as one readable error naming the file and the field (``requests.json:
agents[1].turns[0].error.type: must be one of overloaded|rate_limit|api_error|fallback``), never
as a pydantic dump or a failure deep inside a run. Unknown fields are refused for the same reason:
a misspelt ``delay_ms`` should not silently do nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

ErrorType = Literal["overloaded", "rate_limit", "api_error", "fallback"]


class ScriptError(ValueError):
    """A script (file, dict or function result) that does not follow the format."""


class _Strict(BaseModel):
    # Built at first validation (``defer_build``): a file validates ``ScriptFile``, whose build
    # covers the models it nests; building each of the six with its class built the nested ones
    # again (~10 M instructions of a scripted start-up). A function's turns build ``ScriptTurn``.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _new_list() -> list[Any]:
    return []


def _new_dict() -> dict[str, Any]:
    return {}


# The default factories are Python functions, not ``list`` and ``dict``: pydantic asks each
# factory's signature when it builds the model, and a builtin's is parsed from its text
# signature by ``tokenize`` (compiling tokenize's regular expressions first): ~14 M instructions
# of a scripted start-up, for the same empty list or dict.


def _check_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"invalid regex {value!r}: {exc}") from None
    return value


class ScriptToolCall(_Strict):
    """One tool call the model makes: ``input`` strings may hold templates."""

    name: str = Field(min_length=1)
    """The tool's name, as the agent's tool list spells it."""
    input: dict[str, Any] = Field(default_factory=_new_dict)
    """The tool input; every string in it may hold templates."""


class ErrorSpec(_Strict):
    """Fail the next ``times`` calls with ``type`` before the turn is served."""

    type: ErrorType
    """overloaded|rate_limit|api_error (retried) or fallback (switch model)."""
    times: int = Field(default=1, ge=1)
    """How many calls fail before the turn is served."""


class ScriptUsage(_Strict):
    """Usage reported for a turn instead of the estimate."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)


class ScriptTurn(_Strict):
    """One model response: text and/or tool calls, with optional delay, usage, error, capture."""

    text: str | None = None
    """The answer's text (templates allowed); comes before the tool calls."""
    tool_calls: list[ScriptToolCall] = Field(default_factory=_new_list)
    """Tool calls, served as ``tool_use`` blocks with ids ``toolu_<agent>_<turn>_<i>``."""
    delay_ms: float = Field(default=0, ge=0)
    """Wait this long before answering (cancellable), e.g. to keep a child running."""
    stream_ms: float = Field(default=0, ge=0)
    """When the caller streams (an interactive session), the text arrives in word-sized
    ``TextDelta`` pieces spread over this many ms, after ``delay_ms``."""
    usage: ScriptUsage | None = None
    """Reported usage, verbatim (missing counters are 0); absent means an estimate."""
    error: ErrorSpec | None = None
    """Fail the next ``times`` calls first, then serve this turn."""
    capture: dict[str, str] = Field(default_factory=_new_dict)
    """NAME -> regex searched in the last user message; kept as ``{{capture.NAME}}``."""

    @field_validator("capture")
    @classmethod
    def _regexes_compile(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            try:
                _check_regex(pattern)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return value


class ScriptAgent(_Strict):
    """Turns for the agents whose type equals ``agent_type`` and whose prompt ``match`` finds."""

    agent_type: str | None = None
    """Only agents of this type (``main``, ``fork``, a definition's name); absent = any."""
    match: str | None = None
    """A regex searched in the agent's prompt; its groups are ``{{match.N}}``. Absent = any."""
    turns: list[ScriptTurn] = Field(default_factory=_new_list)
    """Served in order, one per request of the bound agent."""

    @field_validator("match")
    @classmethod
    def _match_compiles(cls, value: str | None) -> str | None:
        return None if value is None else _check_regex(value)


class ScriptFile(_Strict):
    """A whole script: where to record requests, and the agents' turns."""

    record: str | None = None
    """A JSONL file (relative to the script's folder) receiving every request."""
    agents: list[ScriptAgent] = Field(default_factory=_new_list)
    """Entries in priority order: an agent binds to the first that fits."""


def format_validation_error(source: str, error: ValidationError) -> str:
    """One line naming ``source`` and the first bad field, in the script's own terms."""
    problems = error.errors(include_url=False)
    first = problems[0]
    where = _format_loc(first["loc"])
    text = f"{source}: {where}: {_describe(first)}" if where else f"{source}: {_describe(first)}"
    if len(problems) > 1:
        text += f" (and {len(problems) - 1} more problem(s))"
    return text


def _format_loc(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _describe(problem: Any) -> str:
    kind = problem["type"]
    if kind == "literal_error":
        expected = re.findall(r"'([^']*)'", str(problem.get("ctx", {}).get("expected", "")))
        return "must be one of " + "|".join(expected)
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    message = str(problem["msg"]).removeprefix("Value error, ")
    if message.startswith("Input should be "):
        message = "must be " + message.removeprefix("Input should be ")
    return message


def parse_script(data: Any, source: str) -> ScriptFile:
    """Validate a loaded script; ``source`` names it in errors (a file name, or ``<dict>``)."""
    if not isinstance(data, dict):
        raise ScriptError(f"{source}: a script must be an object with 'agents', not {_kind(data)}")
    try:
        return ScriptFile.model_validate(data)
    except ValidationError as exc:
        raise ScriptError(format_validation_error(source, exc)) from None


def parse_turn(data: Any, source: str) -> ScriptTurn:
    """A turn given by a function: a ``ScriptTurn``, a dict in the file's shape, or a text."""
    if isinstance(data, ScriptTurn):
        return data
    if isinstance(data, str):
        return ScriptTurn(text=data)
    if not isinstance(data, dict):
        raise ScriptError(f"{source}: expected a ScriptTurn, dict or str, got {_kind(data)}")
    try:
        return ScriptTurn.model_validate(data)
    except ValidationError as exc:
        raise ScriptError(format_validation_error(source, exc)) from None


def load_script_file(path: Path) -> ScriptFile:
    """Read JSON (or YAML for ``.yaml``/``.yml``) and validate it; errors name the file."""
    name = path.name
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read script: {exc.strerror or exc}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml  # only for a YAML script: PyYAML is ~10 ms of start-up

        try:
            data = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ScriptError(f"{name}: invalid YAML: {exc}") from None
    else:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ScriptError(
                f"{name}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
    return parse_script(data, name)


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
