"""The embedded ``local`` provider: a GGUF model run in-process by llama.cpp (``xllamacpp``).

One engine per model file per process, loaded lazily on first use and kept for the life of the
process: loading costs seconds, and the engine's prompt cache is what makes a fork cheap. A fork
re-sends its parent's system prompt, tools and history byte for byte; the engine finds that
prefix in its slot (or in its RAM prompt cache, ``cache_ram_mib``) and only evaluates the new
tail.

Tool calling: see ``local_prompt``. With tools, decoding is constrained by a JSON schema so the
answer is always ``{"name": <tool>, "input": {...}}`` (``reply`` = final text); without tools the
model answers freely and its text is streamed as ``TextDelta`` events. A small model that is
stuck (about to make, for the third time in a row, a call that twice returned the same result) is
re-decoded with only ``reply`` allowed, so it answers from what it already has.

Threads and cancellation: generation runs on a worker thread (the engine releases the GIL), and
tokens come back through a streaming callback, so the event loop stays free. When the consuming
task is cancelled (an abort, a wall-time budget) or the request's abort signal fires, a
``threading.Event`` is set; the callback returns ``True`` at the next streamed chunk and llama.cpp
drops that request. A request cancelled during prompt evaluation therefore runs until its first
token (no callback fires before) and is then dropped; its evaluated prefix stays in the cache.
The engine itself is never torn down by a cancellation, so later requests are served normally.

One slot (``n_parallel=1``): concurrent agents queue inside the engine. On a CPU with few cores
parallel decoding would not be faster, and the RAM prompt cache keeps each agent's prefix when
another agent's request takes the slot in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from subagents.messages import Usage
from subagents.models.base import (
    ErrorKind,
    MessageDone,
    ModelError,
    ModelRequest,
    StreamEvent,
    TextDelta,
)
from subagents.models.local_install import (
    QWEN_SPEC,
    SMOLLM2_SPEC,
    ModelInstallError,
    ModelSpec,
    installed_model_path,
)
from subagents.models.local_prompt import (
    ParsedReply,
    call_schema,
    is_stuck_repeat,
    parse_reply,
    render_messages,
)

INSTALL_EXTRA_HINT = "the local model needs xllamacpp: pip install 'subagents[local]'"
DEFAULT_CONTEXT = 16384
DEFAULT_MAX_OUTPUT = 1024
DEFAULT_CACHE_RAM_MIB = 2048
ANTI_LOOP_SAMPLING: dict[str, Any] = {"dry_multiplier": 0.8, "dry_allowed_length": 3}
"""DRY sampling, for the 135M model only: it stops "Your answer is 42. Your answer is 42. ..."
loops, but it also penalises copying text already in the context, which a coding model must do
(an ``Edit``'s ``old_string``), so the default model does not use it."""


def default_threads() -> int:
    """``SUBAGENTS_LOCAL_THREADS`` or every core this process may run on."""
    raw = os.environ.get("SUBAGENTS_LOCAL_THREADS")
    if raw:
        return max(1, int(raw))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


@dataclass(kw_only=True)
class EngineResult:
    """One finished (or stopped) request: the generated text and the engine's counters."""

    content: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    stopped: bool = False


class LocalEngine:
    """A loaded model: xllamacpp's in-process llama.cpp server, used through direct calls.

    xllamacpp also binds an HTTP listener; it is put on a random loopback port behind a random
    API key nobody is told, so only this process talks to the engine.
    """

    def __init__(self, *, path: Path, n_ctx: int, n_threads: int, cache_ram_mib: int) -> None:
        try:
            import xllamacpp
        except ImportError as error:
            raise ModelError("invalid_request", f"{INSTALL_EXTRA_HINT} ({error})")
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        params.cache_prompt = True
        params.cache_ram_mib = cache_ram_mib
        params.port = 0
        params.api_keys = [secrets.token_hex(16)]
        params.verbosity = -1
        self.path = path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        try:
            self._server = xllamacpp.Server(params)
        except RuntimeError as error:
            raise ModelError("invalid_request", f"cannot load local model {path}: {error}")

    def chat(
        self,
        body: dict[str, Any],
        stop: threading.Event,
        on_text: Callable[[str], None] | None = None,
    ) -> EngineResult:
        """Run one chat completion to its end (or until ``stop``); blocks, call from a thread."""
        result = EngineResult()

        def on_chunk(chunk: dict[str, Any]) -> bool:
            if "choices" not in chunk:
                result.error = chunk.get("error", chunk)
                return True
            for choice in chunk["choices"]:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    result.content += text
                    if on_text is not None:
                        on_text(text)
                result.finish_reason = choice.get("finish_reason") or result.finish_reason
            result.usage = chunk.get("usage") or result.usage
            result.timings = chunk.get("timings") or result.timings
            if stop.is_set():
                result.stopped = True
                return True
            return False

        request = {**body, "stream": True, "stream_options": {"include_usage": True}}
        self._server.handle_chat_completions(request, on_chunk)
        return result


_ENGINES: dict[Path, LocalEngine] = {}
_ENGINES_LOCK = threading.Lock()


def shared_engine(path: Path) -> LocalEngine:
    """The process-wide engine of ``path``, loaded on first use (blocking: call from a thread)."""
    key = path.resolve()
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = LocalEngine(
                path=key,
                n_ctx=_env_int("SUBAGENTS_LOCAL_CONTEXT", DEFAULT_CONTEXT),
                n_threads=default_threads(),
                cache_ram_mib=_env_int("SUBAGENTS_LOCAL_CACHE_RAM_MIB", DEFAULT_CACHE_RAM_MIB),
            )
            _ENGINES[key] = engine
        return engine


@dataclass(kw_only=True)
class LocalModel:
    """The ``local`` provider's ``Model``: a verified GGUF file run by the shared engine."""

    name: str = "local"
    spec: ModelSpec | None = QWEN_SPEC
    """The pinned model to verify and load; ``None`` with ``path`` for an arbitrary GGUF."""
    path: Path | None = None
    temperature: float = 0.2
    seed: int = 42
    max_output_tokens: int = field(
        default_factory=lambda: _env_int("SUBAGENTS_LOCAL_MAX_TOKENS", DEFAULT_MAX_OUTPUT)
    )
    sampling: dict[str, Any] = field(default_factory=dict)
    """Extra llama.cpp sampling fields (``dry_multiplier``, ``repeat_penalty``, ...)."""
    provider: str = "local"
    prompt_profile: str = "compact"
    """A 1.5B model with a 16k window gets the short guidance (``agents.prompts``)."""
    _verified: Path | None = field(default=None, init=False, repr=False)

    @property
    def display_name(self) -> str:
        """The model file's own name, for the environment block."""
        if self.spec is not None:
            return f"{self.spec.general_name} (embedded, llama.cpp)"
        return f"{self.path.name if self.path else self.name} (embedded, llama.cpp)"

    def model_path(self) -> Path:
        """The file to load; for a pinned model, verified (hash and GGUF name) once first."""
        if self._verified is not None:
            return self._verified
        if self.spec is not None:
            try:
                self._verified = installed_model_path(self.spec)
            except ModelInstallError as error:
                raise ModelError("invalid_request", str(error))
            return self._verified
        if self.path is None or not self.path.is_file():
            raise ModelError("invalid_request", f"local model file not found: {self.path}")
        return self.path

    def engine(self) -> LocalEngine:
        """Verify and load (once per process); blocking."""
        return shared_engine(self.model_path())

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        engine = await asyncio.to_thread(self.engine)
        if not request.tools:
            result = EngineResult()
            body = self.request_body(request, mode="free")
            async for item in _generate(engine, body, request, stream_text=True):
                if isinstance(item, TextDelta):
                    yield item
                else:
                    result = item
            yield self._done(result, parse_reply(result.content, []), usage_from(result))
            return
        yield await self._tool_turn(engine, request)

    async def _tool_turn(self, engine: LocalEngine, request: ModelRequest) -> MessageDone:
        """A constrained turn; a stuck repeat of the same call is re-decoded as a final reply."""
        result = await _result(engine, self.request_body(request, mode="tools"), request)
        if result.error is not None and _is_grammar_error(result.error):
            # The engine refused the schema: fall back to free decoding and the lenient parser.
            result = await _result(engine, self.request_body(request, mode="free"), request)
        parsed = parse_reply(result.content, request.tools)
        usage = usage_from(result)
        if parsed.tool_name is not None and is_stuck_repeat(
            request.messages, parsed.tool_name, parsed.tool_input or {}
        ):
            result = await _result(engine, self.request_body(request, mode="reply"), request)
            parsed = parse_reply(result.content, request.tools)
            usage.add(usage_from(result))
        return self._done(result, parsed, usage)

    def request_body(
        self, request: ModelRequest, *, mode: Literal["tools", "reply", "free"]
    ) -> dict[str, Any]:
        """The engine's chat-completion body: rendered messages, sampling, the constraint.

        ``tools``: any tool or the reply tool; ``reply``: only the reply tool; ``free``: no
        constraint. The messages are the same in every mode, so the prompt cache serves them.
        """
        body: dict[str, Any] = {
            "messages": render_messages(request.system, request.messages, request.tools),
            "max_tokens": min(request.max_tokens, self.max_output_tokens),
            "temperature": self.temperature,
            "seed": self.seed,
            "cache_prompt": True,
            **self.sampling,
        }
        if mode != "free":
            body["json_schema"] = call_schema(request.tools, reply_only=mode == "reply")
        return body

    def _done(self, result: EngineResult, parsed: ParsedReply, usage: Usage) -> MessageDone:
        if result.error is not None:
            raise _model_error(result.error)
        if parsed.tool_name is not None:
            stop_reason = "tool_use"
        elif result.finish_reason == "length":
            stop_reason = "max_tokens"
        else:
            stop_reason = "end_turn"
        return MessageDone(
            message={"role": "assistant", "content": parsed.content()},
            usage=usage,
            stop_reason=stop_reason,
            model=self.name,
        )


async def _result(engine: LocalEngine, body: dict[str, Any], request: ModelRequest) -> EngineResult:
    """One request's result, no streaming of text."""
    result = EngineResult()
    async for item in _generate(engine, body, request, stream_text=False):
        if isinstance(item, EngineResult):
            result = item
    return result


async def _generate(
    engine: LocalEngine, body: dict[str, Any], request: ModelRequest, *, stream_text: bool
) -> AsyncIterator[TextDelta | EngineResult]:
    """Run one request on a worker thread: text deltas as they come, then the result.

    Leaving early (cancellation, ``aclose``) or the request's abort sets ``stop``; the worker
    thread then ends at the next streamed token without being waited for.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    stop = threading.Event()

    def sink(text: str) -> None:
        with contextlib.suppress(RuntimeError):  # the loop may be closed by then
            loop.call_soon_threadsafe(queue.put_nowait, text)

    unsubscribe = request.abort.on_abort(lambda _reason: stop.set()) if request.abort else None
    worker = asyncio.ensure_future(
        asyncio.to_thread(engine.chat, body, stop, sink if stream_text else None)
    )
    worker.add_done_callback(lambda _done: queue.put_nowait(None))
    try:
        while (text := await queue.get()) is not None:
            yield TextDelta(text=text)
        yield worker.result()
    finally:
        stop.set()
        if unsubscribe is not None:
            unsubscribe()
        if not worker.done():
            worker.add_done_callback(_retrieve)


def _retrieve(future: asyncio.Future[EngineResult]) -> None:
    """Mark an abandoned worker's outcome as seen (no 'exception never retrieved' noise)."""
    if not future.cancelled():
        future.exception()


def usage_from(result: EngineResult) -> Usage:
    """Anthropic-style usage: evaluated prompt tokens vs. tokens served from the prompt cache."""
    timings, usage = result.timings, result.usage
    cached = int(
        timings.get("cache_n")
        or (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        or 0
    )
    evaluated = timings.get("prompt_n")
    if evaluated is None:
        evaluated = max(0, int(usage.get("prompt_tokens") or 0) - cached)
    return Usage(
        input_tokens=int(evaluated),
        output_tokens=int(usage.get("completion_tokens") or timings.get("predicted_n") or 0),
        cache_read_input_tokens=cached,
    )


def _is_grammar_error(error: dict[str, Any]) -> bool:
    text = str(error.get("message", error)).lower()
    return "grammar" in text or "schema" in text


def _model_error(error: dict[str, Any]) -> ModelError:
    message = str(error.get("message") or error)
    code = error.get("code")
    status = int(code) if isinstance(code, int) else None
    kind: ErrorKind = (
        "invalid_request" if status is not None and 400 <= status < 500 else "api_error"
    )
    return ModelError(kind, f"local model: {message}", status=status)


def local_model_for(rest: str) -> LocalModel:
    """The model a ``local[:NAME]`` spec names: ``local``, ``local:smollm2``, ``local:PATH``."""
    choice = rest.strip()
    if choice in ("", "qwen", "default"):
        return LocalModel(name="local", spec=QWEN_SPEC)
    if choice == SMOLLM2_SPEC.key:
        return LocalModel(
            name="local:smollm2", spec=SMOLLM2_SPEC, sampling=dict(ANTI_LOOP_SAMPLING)
        )
    path = Path(choice).expanduser()
    if path.suffix != ".gguf":
        raise ValueError(
            f"model spec 'local:{rest}': expected 'local', 'local:smollm2' or "
            "'local:/path/to/model.gguf'"
        )
    return LocalModel(name=f"local:{choice}", spec=None, path=path)
