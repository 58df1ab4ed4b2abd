"""Fixtures: a scripted local server per test, and protocol helpers pointed at it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from wire_server import AnthropicWire, OpenAIWire, WireServer


@pytest.fixture
async def wire_server() -> AsyncIterator[WireServer]:
    server = WireServer()
    await server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(Exception):
            await server.close()


TRANSPORTS = ["lean", "sdk"]
"""Every wire test runs on both transports: the lean one and the official SDK it must match."""


@pytest.fixture(params=TRANSPORTS)
async def anthropic_wire(
    wire_server: WireServer, request: pytest.FixtureRequest
) -> AsyncIterator[AnthropicWire]:
    wire = AnthropicWire(wire_server, transport=request.param)
    yield wire
    for model in wire.models:
        await model.aclose()


@pytest.fixture(params=TRANSPORTS)
async def openai_wire(
    wire_server: WireServer, request: pytest.FixtureRequest
) -> AsyncIterator[OpenAIWire]:
    wire = OpenAIWire(wire_server, transport=request.param)
    yield wire
    for model in wire.models:
        await model.aclose()
