"""Retries with exponential backoff and jitter, and the switch to a fallback model.

Overloaded, rate-limited, 5xx-class and dropped-connection errors are retried a bounded number of
times; the delay doubles each attempt ("equal jitter": half fixed, half random; capped), and a
server's ``retry-after`` wins when it is longer. A ``fallback``-class error switches to the
configured fallback model for the rest of the run. Each retry and each switch is reported through
``on_notice`` so the event stream shows it.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from subagents.models.base import (
    MessageDone,
    Model,
    ModelError,
    ModelRequest,
    Responder,
    TextDelta,
    drain,
    responder,
)
from subagents.models.pricing import Price, price_for
from subagents.observe import RunObserver

Notice = Callable[[str, dict[str, Any]], None]


@dataclass(kw_only=True, slots=True, frozen=True)
class RetryPolicy:
    """How often and how long to wait before retrying a failed model call."""

    max_attempts: int = 8
    base_delay_s: float = 0.5
    max_delay_s: float = 32.0

    @classmethod
    def from_env(cls) -> RetryPolicy:
        """``SUBAGENTS_RETRY_BASE_MS`` and ``SUBAGENTS_MAX_RETRIES`` tune it (tests use 1 ms)."""
        base_ms = os.environ.get("SUBAGENTS_RETRY_BASE_MS")
        attempts = os.environ.get("SUBAGENTS_MAX_RETRIES")
        default = cls()
        return cls(
            max_attempts=int(attempts) + 1 if attempts else default.max_attempts,
            base_delay_s=float(base_ms) / 1000 if base_ms else default.base_delay_s,
        )

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Delay before retry number ``attempt`` (1-based): half of an exponential cap plus a random
        share of the other half (equal jitter), so retries spread out but never come too soon."""
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        delay: float = cap / 2 + random.uniform(0, cap / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_delay_s * 2))
        return delay


@dataclass(kw_only=True)
class ModelCaller:
    """Calls a model with retries; holds the current model so a fallback switch sticks."""

    model: Model
    policy: RetryPolicy
    fallback: Model | None = None
    on_notice: Notice | None = None
    prices: Callable[[str], Price] = price_for
    """A model name's price (what the loop charges a call): a session's callers share one
    ``SessionPrices``; by default each look-up reads the tables."""
    on_text: Callable[[str], None] | None = None
    """Told each piece of answer text as it streams (an interactive session watching the
    main agent); None calls the model without streaming (``complete``). A retried call
    streams again from its start: the ``api_retry`` notice says so first."""

    _bound: Model | None = field(default=None, init=False, repr=False, compare=False)
    _respond: Responder | None = field(default=None, init=False, repr=False, compare=False)
    """``model.respond`` of the model last called (``models.base.complete``'s look-up, once
    per model instead of once per call; ``model`` may be switched at any time)."""

    async def call(self, request: ModelRequest) -> MessageDone:
        attempt = 0
        while True:
            attempt += 1
            model = self.model
            request.model = model.name
            try:
                if self.on_text is not None:
                    return await self._streamed(request, self.on_text)
                if model is not self._bound:
                    self._bound, self._respond = model, responder(model)
                if self._respond is not None:  # one event per answer: no stream to drain
                    return await self._respond(request)
                return await drain(model.stream(request), model.name)
            except ModelError as error:
                if error.kind == "fallback" and self._switch_to_fallback(error):
                    attempt = 0
                    continue
                if not error.retryable or attempt >= self.policy.max_attempts:
                    raise
                delay = self.policy.delay(attempt, error.retry_after)
                self._notice(
                    "api_retry",
                    {
                        "attempt": attempt,
                        "max_retries": self.policy.max_attempts - 1,
                        "retry_delay_ms": round(delay * 1000),
                        "error": error.kind,
                        "error_status": error.status,
                        "message": str(error),
                    },
                )
                await asyncio.sleep(delay)

    async def _streamed(self, request: ModelRequest, on_text: Callable[[str], None]) -> MessageDone:
        done: MessageDone | None = None
        async for event in self.model.stream(request):
            if isinstance(event, TextDelta):
                on_text(event.text)
            else:
                done = event
        if done is None:
            raise ModelError("api_error", f"model {self.model.name!r} ended without a message")
        return done

    def _switch_to_fallback(self, error: ModelError) -> bool:
        if self.fallback is None or self.fallback is self.model:
            return False
        previous, self.model = self.model, self.fallback
        self._notice(
            "model_fallback",
            {"from_model": previous.name, "to_model": self.model.name, "message": str(error)},
        )
        return True

    def _notice(self, subtype: str, data: dict[str, Any]) -> None:
        if self.on_notice is not None:
            self.on_notice(subtype, data)


def new_caller(
    *, model: Model, policy: RetryPolicy, fallback: Model | None, prices: Callable[[str], Price]
) -> ModelCaller:
    """``ModelCaller(model=..., ...)`` of these fields, the others at their defaults, with
    every field set directly: each child's job gets one (``AgentRuntime.caller``), and a class
    called with keywords packs them into a dict and unpacks it for ``__init__``
    (docs/performance.md, session 15). ``tests/test_run_builders.py`` holds it to the class."""
    caller: ModelCaller = _new(ModelCaller)
    caller.model = model
    caller.policy = policy
    caller.fallback = fallback
    caller.on_notice = None
    caller.prices = prices
    caller.on_text = None
    # (``_bound`` and ``_respond`` left to the class's None, as ``__init__`` leaves them)
    return caller


_new = object.__new__


@dataclass(kw_only=True)
class ObservedModelCaller(ModelCaller):
    """A ``ModelCaller`` that tells an observer about each call (its retries included): chosen
    instead of the plain one only when telemetry is on, so an unobserved call pays nothing."""

    observer: RunObserver

    async def call(self, request: ModelRequest) -> MessageDone:
        observation = self.observer.model_call_started(self.model, request)
        try:
            done = await super().call(request)
        except BaseException as exc:
            observation.end(None, exc)
            raise
        observation.end(done, None)
        return done
