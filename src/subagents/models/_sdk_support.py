"""What the SDK providers share: loading the optional SDK, abort scoping, error mapping.

Turning provider SDK exceptions into ``ModelError``s with a kind the retry policy acts on:

Both official SDKs (``anthropic``, ``openai``) share one exception shape: ``APIStatusError`` with
``status_code``, ``response.headers`` and a JSON ``body``; ``APIConnectionError`` for transport
failures. We build every SDK client with ``max_retries=0`` so that ``ModelCaller`` owns retries,
which means these errors reach us raw and must carry what the policy needs: the kind and the
server's ``retry-after``.

Kinds, by HTTP status; an error *event* inside a 200 stream has no status of its own, so there
the body's error ``type`` decides:

* 529 / ``overloaded_error``            -> ``overloaded``
* 429 / ``rate_limit_error``            -> ``rate_limit`` (with ``retry_after``)
* 5xx / ``api_error``                   -> ``api_error``
* 408, transport errors, dropped stream -> ``connection``
* 401, 403                              -> ``auth``
* 404 / ``not_found_error``             -> ``fallback``: the model id is unknown or not served
  to this key, which another model can answer; with no fallback configured it is final.
* any other 4xx                         -> ``invalid_request``

A mid-stream drop surfaces from the HTTP library (``httpx``/``httpx2``), not from the SDK, so
its transport errors are recognised here too.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import ModuleType
from typing import Any, Protocol

import orjson

from subagents.abort import AbortSignal
from subagents.models._sdk_bounds import bound_passed
from subagents.models.base import ErrorKind, MessageDone, ModelError, StreamEvent, TextDelta

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}

INVALID_JSON_KEY = "invalid_json_arguments"
"""Key holding tool arguments that were not valid JSON (see ``parse_tool_arguments``)."""

_TYPE_KINDS: dict[str, ErrorKind] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limit",
    "api_error": "api_error",
    "timeout_error": "api_error",
    "authentication_error": "auth",
    "permission_error": "auth",
    "not_found_error": "fallback",
    "invalid_request_error": "invalid_request",
    "request_too_large": "invalid_request",
}


def kind_for_status(status: int) -> ErrorKind:
    """The error kind an HTTP status implies on its own."""
    if status == 529:
        return "overloaded"
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "fallback"
    if status == 408:
        return "connection"
    if 400 <= status < 500:
        return "invalid_request"
    return "api_error"


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """``retry-after-ms`` (precise), else ``retry-after`` as seconds or an HTTP date."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    import email.utils  # an HTTP date is rare; the package costs ~2 % of a start-up

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def body_error_type(body: object) -> str | None:
    """``error.type`` of an error body (``{"error": {"type": ...}}``), or a bare ``type``."""
    if not isinstance(body, Mapping):
        return None
    inner = body.get("error")
    if isinstance(inner, Mapping) and isinstance(inner.get("type"), str):
        return str(inner["type"])
    kind = body.get("type")
    return kind if isinstance(kind, str) and kind != "error" else None


def transport_error_types() -> tuple[type[BaseException], ...]:
    """Transport errors of whichever HTTP library the installed SDKs use."""
    found: list[type[BaseException]] = []
    for module_name in ("httpx2", "httpx"):
        module = _optional_module(module_name)
        if module is not None:
            found.append(module.TransportError)
    return tuple(found)


def _optional_module(name: str) -> ModuleType | None:
    try:
        return __import__(name)
    except ImportError:
        return None


def to_model_error(error: BaseException, *, sdk: ModuleType, label: str) -> ModelError | None:
    """Map an exception of ``sdk`` (or of its HTTP library) to a ``ModelError``; else None.

    ``label`` names the provider and model in the message, e.g. ``anthropic model 'x'``.
    """
    bound = bound_passed(error)
    if bound is not None:  # worded as the lean transport words it, whatever the SDK wraps it in
        return ModelError("connection", f"{label}: connection failed: {_describe(bound)}")
    if isinstance(error, sdk.APIStatusError):
        return _status_error(error, label)
    if isinstance(error, (sdk.APIConnectionError, *transport_error_types())):
        return ModelError("connection", f"{label}: connection failed: {_describe(error)}")
    if isinstance(error, sdk.APIError):
        # An error event inside a stream: no status of its own, only a body.
        kind = stream_error_kind(getattr(error, "body", None))
        return ModelError(kind, f"{label}: {_describe(error)}")
    return None


def _status_error(error: Any, label: str) -> ModelError:
    headers = getattr(error.response, "headers", None)
    return status_error(int(error.status_code), _describe(error), error.body, headers, label)


def status_error(
    status: int, message: str, body: object, headers: Mapping[str, str] | None, label: str
) -> ModelError:
    """The ``ModelError`` for an HTTP error status, or for an error event inside a 200 stream
    (``status`` < 400: the body's error type decides the kind). Both transports use it."""
    if status >= 400:
        kind = kind_for_status(status)
    else:
        kind = _TYPE_KINDS.get(body_error_type(body) or "", "api_error")
    shown = f"HTTP {status}" if status >= 400 else "stream error"
    return ModelError(
        kind,
        f"{label}: {shown}: {message}",
        status=status if status >= 400 else None,
        retry_after=retry_after_seconds(headers),
    )


def stream_error_kind(body: object) -> ErrorKind:
    """The kind of an error that arrived as stream data rather than as a status."""
    return _TYPE_KINDS.get(body_error_type(body) or "", "api_error")


def _describe(error: BaseException) -> str:
    return clip(str(error) or type(error).__name__)


def clip(text: str) -> str:
    """An error text as shown in a ``ModelError``: at most 500 characters."""
    return text if len(text) <= 500 else text[:500] + "..."


def load_sdk(module: str, extra: str) -> ModuleType:
    """Import an optional provider SDK, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"the {extra} provider needs the {module!r} package: pip install 'subagents[{extra}]'"
        ) from exc


class abort_scope:
    """While open, an abort cancels the task reading the stream, so a pending read ends now.

    The agent loop already binds its task to the same signal; a second ``cancel`` would leave an
    extra cancellation request behind after the loop's ``uncancel``, so we cancel only a task that
    is not already being cancelled. Closing the HTTP stream is the caller's ``finally``. A class,
    not ``@contextmanager``: it is entered once per model call, and the generator-based version
    was a measurable share of a lean call's CPU.
    """

    __slots__ = ("_abort", "_task", "_unsubscribe")

    def __init__(self, abort: AbortSignal | None) -> None:
        self._abort = abort
        self._task: asyncio.Task[Any] | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def __enter__(self) -> None:
        if self._abort is not None:
            self._task = asyncio.current_task()
            if self._task is not None:
                self._unsubscribe = self._abort.on_abort(self._cancel)

    def __exit__(self, *_exc: object) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _cancel(self, reason: str) -> None:
        task = self._task
        if task is not None and not task.done() and not task.cancelling():
            task.cancel(f"abort: {reason}")


def parse_tool_arguments(raw: str) -> dict[str, Any]:
    """Tool input from streamed JSON text. Invalid or non-object JSON is not fatal: the input
    becomes ``{INVALID_JSON_KEY: raw}``, an unknown field every tool's input model rejects, so
    the loop answers with an ``is_error`` result naming it and the model can retry the call."""
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and Python's parser takes (integers beyond 64 bits)
            value = json.loads(raw)
        except ValueError:
            return {INVALID_JSON_KEY: raw}
    return value if isinstance(value, dict) else {INVALID_JSON_KEY: raw}


class Assembler(Protocol):
    """Builds one assistant message from stream events, each the event's JSON as a dict (one
    assembler per provider, shared by the SDK and the lean transport)."""

    def feed(self, event: dict[str, Any], /) -> str | None: ...

    def done(self, model: str, label: str) -> MessageDone: ...


async def relay(
    open_stream: Callable[[], Awaitable[Any]],
    assembler: Assembler,
    *,
    model: str,
    label: str,
    sdk: ModuleType,
    abort: AbortSignal | None,
) -> AsyncIterator[StreamEvent]:
    """Stream one SDK call as our events: text deltas as they come, then the whole message.

    Each SDK event is handed to the assembler as the JSON it was parsed from (``to_dict`` keeps
    only the fields the server sent). The stream is closed whatever happens; an SDK error becomes
    a ``ModelError`` (so the retry policy can classify it); an abort closes the connection
    (``abort_scope``)."""
    with abort_scope(abort):
        try:
            stream = await open_stream()
            try:
                async for event in stream:
                    text = assembler.feed(event.to_dict())
                    if text:
                        yield TextDelta(text=text)
            finally:
                await stream.close()
        except Exception as exc:
            error = to_model_error(exc, sdk=sdk, label=label)
            if error is None:
                raise
            raise error from exc
    yield assembler.done(model, label)
