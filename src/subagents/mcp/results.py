"""What a model receives of an MCP tool's result: text, with placeholders for what is not text.

The message model carries tool results as text (``ToolResultBlock.content``), so an image, an
audio clip or a binary resource becomes one short line saying what it was and how large,
instead of a base64 blob that would fill the context for nothing. Text blocks are kept in
order; an embedded text resource is kept under a line naming its URI; a resource link is one line;
``structuredContent`` is used (as JSON) when the result has no content block at all; runtime tags
in the text (``<task-notification>``, ``<system-reminder>`` …) are escaped. Works on
the SDK's pydantic result objects through their dumped dicts, so nothing here imports the SDK.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from subagents.runtime_tags import escape_runtime_tags
from subagents.tools.base import ToolOutput


def render_result(result: Any, *, server: str, tool: str) -> ToolOutput:
    """A ``CallToolResult`` (SDK object) as a ``ToolOutput``."""
    data: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    parts = [render_block(block) for block in data.get("content") or []]
    structured = data.get("structuredContent")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, indent=2))
    text = "\n\n".join(p for p in parts if p) or "(the tool returned no content)"
    # A third-party server's text must not read as the runtime's own messages.
    text, _ = escape_runtime_tags(text)
    metadata: dict[str, Any] = {"server": server, "tool": tool}
    if structured is not None:
        metadata["structuredContent"] = structured
    return ToolOutput(content=text, is_error=bool(data.get("isError")), metadata={"mcp": metadata})


def render_block(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        return placeholder(kind, block.get("mimeType"), block.get("data"))
    if kind == "resource":
        return render_resource(block.get("resource") or {})
    if kind == "resource_link":
        name = block.get("name") or ""
        return f"[resource link: {block.get('uri', '')}{f' ({name})' if name else ''}]"
    return f"[{kind or 'unknown'} content not shown]"


def render_resource(resource: dict[str, Any]) -> str:
    uri = resource.get("uri", "")
    if "text" in resource:
        return f"[resource {uri}]\n{resource['text']}"
    return placeholder("resource", resource.get("mimeType"), resource.get("blob"), uri=uri)


def placeholder(kind: str, mime: Any, data: Any, *, uri: str = "") -> str:
    size = _decoded_size(data)
    where = f" {uri}" if uri else ""
    return (
        f"[{kind}{where}: {mime or 'application/octet-stream'}, {_human(size)} — not shown: "
        "tool results reach the model as text]"
    )


def _decoded_size(data: Any) -> int:
    if not isinstance(data, str):
        return 0
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data) * 3 // 4


def _human(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"
