"""A test MCP server written with the official ``mcp`` SDK (``MCPServer``).

``python demo_server.py`` serves stdio; ``python demo_server.py --http PORTFILE`` serves
streamable HTTP (at ``/mcp``) and SSE (at ``/sse``) on 127.0.0.1 on a free port and writes the
port to PORTFILE once listening.
``DEMO_PID_FILE`` (env): the server appends its pid there at start (tests check it is gone).
``DEMO_LINGER_S`` (env): seconds a stdio server stays alive after its client went away.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import ImageContent, TextContent

app = MCPServer("demo")

if os.environ.get("DEMO_PID_FILE"):
    with open(os.environ["DEMO_PID_FILE"], "a") as handle:
        handle.write(f"{os.getpid()}\n")


@app.tool(annotations={"readOnlyHint": True})
def echo(text: str, times: int = 1) -> str:
    """Repeat `text` `times` times."""
    return text * times


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def crash() -> str:
    """Exit the server process at once (a crash mid-call)."""
    sys.stderr.write("demo server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@app.tool()
async def hang() -> str:
    """Never answer."""
    await asyncio.sleep(3600)
    return "never"


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@app.tool()
def picture() -> list[TextContent | ImageContent]:
    """Return a caption and a small PNG image."""
    return [
        TextContent(type="text", text="a one-pixel picture"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
    ]


@app.tool()
def big(size: int) -> str:
    """Return `size` characters."""
    return "x" * size


@app.tool()
def env_value(name: str) -> str:
    """The value of an environment variable in the server's process."""
    return os.environ.get(name, "<unset>")


@app.tool()
def cwd() -> str:
    """The server's working directory."""
    return os.getcwd()


@app.resource("memo://greeting", name="greeting", description="A greeting", mime_type="text/plain")
def greeting() -> str:
    return "hello from a resource"


def serve_http(port_file: str) -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    web = app.streamable_http_app()  # its lifespan runs the streamable HTTP session manager
    web.router.routes.extend(app.sse_app().routes)  # /sse and /messages/ beside /mcp
    config = uvicorn.Config(web, log_level="warning")
    server = uvicorn.Server(config)

    async def main() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        with open(port_file + ".tmp", "w") as handle:
            handle.write(str(port))
        os.replace(port_file + ".tmp", port_file)
        await task

    asyncio.run(main())


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        serve_http(sys.argv[2])
    else:
        app.run()
        # DEMO_LINGER_S: stay alive after the client is gone (stdin closed), as some published
        # servers do; only a kill ends it then (tests of crash recovery need such a server).
        if os.environ.get("DEMO_LINGER_S"):
            time.sleep(float(os.environ["DEMO_LINGER_S"]))
