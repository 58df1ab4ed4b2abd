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
import email.utils
import importlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Protocol

from subagents.abort import AbortSignal
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
    if isinstance(error, sdk.APIStatusError):
        return _status_error(error, label)
    if isinstance(error, (sdk.APIConnectionError, *transport_error_types())):
        return ModelError("connection", f"{label}: connection failed: {_describe(error)}")
    if isinstance(error, sdk.APIError):
        # An error event inside a stream: no status of its own, only a body.
        kind = _TYPE_KINDS.get(body_error_type(getattr(error, "body", None)) or "", "api_error")
        return ModelError(kind, f"{label}: {_describe(error)}")
    return None


def _status_error(error: Any, label: str) -> ModelError:
    status: int = int(error.status_code)
    if status >= 400:
        kind = kind_for_status(status)
    else:
        kind = _TYPE_KINDS.get(body_error_type(error.body) or "", "api_error")
    headers = getattr(error.response, "headers", None)
    shown = f"HTTP {status}" if status >= 400 else "stream error"
    return ModelError(
        kind,
        f"{label}: {shown}: {_describe(error)}",
        status=status if status >= 400 else None,
        retry_after=retry_after_seconds(headers),
    )


def _describe(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) <= 500 else text[:500] + "..."


def load_sdk(module: str, extra: str) -> ModuleType:
    """Import an optional provider SDK, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"the {extra} provider needs the {module!r} package: pip install 'subagents[{extra}]'"
        ) from exc


@contextmanager
def abort_scope(abort: AbortSignal | None) -> Iterator[None]:
    """While open, an abort cancels the task reading the stream, so a pending read ends now.

    The agent loop already binds its task to the same signal; a second ``cancel`` would leave an
    extra cancellation request behind after the loop's ``uncancel``, so we cancel only a task that
    is not already being cancelled. Closing the HTTP stream is the caller's ``finally``.
    """
    task = asyncio.current_task()
    if abort is None or task is None:
        yield
        return

    def cancel(reason: str) -> None:
        if not task.done() and not task.cancelling():
            task.cancel(f"abort: {reason}")

    unsubscribe = abort.on_abort(cancel)
    try:
        yield
    finally:
        unsubscribe()


def parse_tool_arguments(raw: str) -> dict[str, Any]:
    """Tool input from streamed JSON text. Invalid or non-object JSON is not fatal: the input
    becomes ``{INVALID_JSON_KEY: raw}``, an unknown field every tool's input model rejects, so
    the loop answers with an ``is_error`` result naming it and the model can retry the call."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {INVALID_JSON_KEY: raw}
    return value if isinstance(value, dict) else {INVALID_JSON_KEY: raw}


class Assembler(Protocol):
    """Builds one assistant message from an SDK's stream events (one per provider)."""

    def feed(self, event: Any, /) -> str | None: ...

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

    The stream is closed whatever happens; an SDK error becomes a ``ModelError`` (so the retry
    policy can classify it); an abort closes the connection (``abort_scope``)."""
    with abort_scope(abort):
        try:
            stream = await open_stream()
            try:
                async for event in stream:
                    text = assembler.feed(event)
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
