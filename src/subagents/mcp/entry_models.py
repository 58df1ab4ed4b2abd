"""The shapes of an ``mcpServers`` entry, as pydantic models (validated by ``entries.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class StdioServer(BaseModel):
    """A server started as a subprocess, spoken to over its stdin/stdout."""

    model_config = ConfigDict(extra="forbid", strict=True)

    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = []
    env: dict[str, str] = {}


class HttpServer(BaseModel):
    """A remote server over streamable HTTP (``http``) or server-sent events (``sse``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    type: Literal["http", "sse"]
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = {}


class SdkServer(BaseModel):
    """An in-process server of the ``claude-agent-sdk`` program driving this run."""

    model_config = ConfigDict(extra="forbid", strict=True)

    type: Literal["sdk"]
    name: str | None = None


ServerEntry = StdioServer | HttpServer | SdkServer
