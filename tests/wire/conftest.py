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


@pytest.fixture
async def anthropic_wire(wire_server: WireServer) -> AsyncIterator[AnthropicWire]:
    wire = AnthropicWire(wire_server)
    yield wire
    for model in wire.models:
        await model.aclose()


@pytest.fixture
async def openai_wire(wire_server: WireServer) -> AsyncIterator[OpenAIWire]:
    wire = OpenAIWire(wire_server)
    yield wire
    for model in wire.models:
        await model.aclose()
