"""The lean transport over TLS: a local HTTPS server with a certificate made for the test.

The client trusts what the system trust store trusts; ``SSL_CERT_FILE`` (read by OpenSSL when
``ssl.create_default_context`` loads the default paths) adds the test's own certificate.
"""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from wire_server import AnthropicWire, WireServer

from subagents.messages import user_message
from subagents.models.base import ModelError, ModelRequest, RequestMetadata, complete


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[WireServer, Path]]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = WireServer()
    await server.start(tls=context)
    try:
        yield server, cert
    finally:
        await server.close()


def request() -> ModelRequest:
    return ModelRequest(
        model="",
        system="s",
        messages=[user_message("hi")],
        tools=[],
        metadata=RequestMetadata(agent_id="a", agent_type="t", prompt="hi"),
    )


async def test_a_trusted_certificate_serves_the_call(
    tls_server: tuple[WireServer, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, cert = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    wire = AnthropicWire(server)
    server.queue(wire.text("over TLS"), wire.text("again"))
    model = wire.model()

    first = await complete(model, request())
    second = await complete(model, request())

    assert model.transport == "lean" and server.url.startswith("https://localhost:")
    assert first.message["content"] == [{"type": "text", "text": "over TLS"}]
    assert second.message["content"] == [{"type": "text", "text": "again"}]
    assert server.connections == 1
    await model.aclose()


async def test_an_untrusted_certificate_is_refused(
    tls_server: tuple[WireServer, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _cert = tls_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    wire = AnthropicWire(server)
    server.queue(wire.text("never sent"))
    model = wire.model()

    with pytest.raises(ModelError, match="CERTIFICATE_VERIFY_FAILED") as caught:
        await complete(model, request())

    assert caught.value.kind == "connection"
    assert server.requests == []
    await model.aclose()
