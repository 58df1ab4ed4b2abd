"""``WebFetch``: one web page, as Markdown, within size and time caps.

* httpx (optional extra ``web``, imported only when the tool runs), streamed: at most
  ``MAX_BYTES`` are read, the whole request bounded by ``TIMEOUT_S``;
* HTML becomes Markdown through ``markdownify`` (scripts and styles dropped); text, JSON and XML
  come as they are; anything else (images, archives) is refused with its content type;
* redirects are followed only within the same host (at most ``MAX_REDIRECTS``); a redirect to
  another host is reported to the model with its target, never followed, so a page cannot send
  the agent somewhere it did not choose;
* private, loopback, link-local and reserved addresses are refused (the host is resolved and
  every address checked) unless the tool was built with ``allow_private=True`` or
  ``SUBAGENTS_WEBFETCH_ALLOW_PRIVATE=1`` is set: an agent reading untrusted text must not be
  steered into the machine's own services. (The check resolves the name once; a DNS answer that
  changes between the check and httpx's own lookup is not caught.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from subagents.runtime_tags import escape_runtime_tags
from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)

if TYPE_CHECKING:
    from subagents.tools.inputs.web_fetch import WebFetchInput

MAX_BYTES = 5 * 1024 * 1024
MAX_CHARS = 100_000
TIMEOUT_S = 30.0
MAX_REDIRECTS = 5
ALLOW_PRIVATE_ENV = "SUBAGENTS_WEBFETCH_ALLOW_PRIVATE"
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml")
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "subagents-webfetch/0.1"


class WebFetchTool(Tool["WebFetchInput"]):
    name = "WebFetch"
    description = descriptions.WEB_FETCH.format(
        max_bytes_mib=MAX_BYTES // (1024 * 1024), max_chars=MAX_CHARS, timeout_s=int(TIMEOUT_S)
    )
    input_model = LazyInput["WebFetchInput"]("subagents.tools.inputs.web_fetch", "WebFetchInput")
    max_result_chars = MAX_CHARS + 2_000

    def __init__(self, *, allow_private: bool | None = None) -> None:
        self.allow_private = allow_private

    def is_concurrency_safe(self, args: WebFetchInput) -> bool:
        return True

    def _private_allowed(self) -> bool:
        if self.allow_private is not None:
            return self.allow_private
        return os.environ.get(ALLOW_PRIVATE_ENV, "") in ("1", "true", "yes")

    async def call(self, args: WebFetchInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        try:
            import httpx
        except ImportError:
            raise ToolError("WebFetch needs httpx: pip install 'subagents[web]'") from None
        url = _checked_url(args.url)
        try:
            async with asyncio.timeout(TIMEOUT_S):
                return await self._fetch(httpx, url)
        except TimeoutError:
            raise ToolError(f"Fetching {url} took longer than {TIMEOUT_S:g} s.") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"Fetching {url} failed: {type(exc).__name__}: {exc}") from None

    async def _fetch(self, httpx: Any, url: str) -> ToolOutput:
        headers = {"User-Agent": USER_AGENT, "Accept": "text/html, text/*;q=0.9, */*;q=0.5"}
        async with httpx.AsyncClient(follow_redirects=False, headers=headers) as client:
            for _hop in range(MAX_REDIRECTS + 1):
                await self._check_host(url)
                async with client.stream("GET", url) as response:
                    if response.status_code in _REDIRECTS and "location" in response.headers:
                        target = urljoin(url, response.headers["location"])
                        if _host(target) != _host(url):
                            return _cross_host(url, target, response.status_code)
                        url = _checked_url(target)
                        continue
                    body, truncated = await _read_capped(response)
                    return _page(url, response, body, truncated)
        raise ToolError(f"{url}: more than {MAX_REDIRECTS} redirects.")

    async def _check_host(self, url: str) -> None:
        if self._private_allowed():
            return
        host = urlsplit(url).hostname or ""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, None)
        except socket.gaierror as exc:
            raise ToolError(f"Cannot resolve {host}: {exc.strerror or exc}") from None
        for info in infos:
            address = ipaddress.ip_address(info[4][0])
            if not address.is_global:
                raise ToolError(
                    f"Refused: {host} resolves to {address}, a private or local address. "
                    f"WebFetch reads public pages only (set {ALLOW_PRIVATE_ENV}=1 to allow)."
                )


def _checked_url(raw: str) -> str:
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"Not a fetchable URL: {raw!r} (give a full http:// or https:// URL).")
    if parts.username or parts.password:
        raise ToolError("URLs with credentials (user:password@) are not fetched.")
    return parts.geturl()


def _host(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _cross_host(url: str, target: str, status: int) -> ToolOutput:
    text = (
        f"{url} redirects (HTTP {status}) to another host: {target}\n"
        "The redirect was not followed. If that address is what you want, call WebFetch "
        "again with it."
    )
    return ToolOutput(content=text, metadata={"redirect": target, "status": status})


async def _read_capped(response: Any) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BYTES:
            return b"".join(chunks)[:MAX_BYTES], True
    return b"".join(chunks), False


def _page(url: str, response: Any, body: bytes, truncated: bool) -> ToolOutput:
    status = response.status_code
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and not kind.startswith(_TEXT_TYPES):
        raise ToolError(f"{url} returned {kind} ({len(body)} bytes), which is not text.")
    text = body.decode(response.encoding or "utf-8", errors="replace")
    if kind in _HTML_TYPES or (not kind and "<html" in text[:1000].lower()):
        text = html_to_markdown(text)
    cut = len(text) > MAX_CHARS
    # A page is the least trusted text a model reads: it must not read as the runtime's own
    # messages (entities in HTML come out of the conversion as ``<``), as an MCP server's not.
    text = escape_runtime_tags(text[:MAX_CHARS])[0]
    notes = []
    if truncated or cut:
        notes.append(f"[content truncated at {MAX_BYTES} bytes / {MAX_CHARS} characters]")
    head = f"URL: {url}\nStatus: {status}\nContent-Type: {kind or 'unknown'}\n\n"
    content = head + text + ("\n\n" + "\n".join(notes) if notes else "")
    return ToolOutput(
        content=content,
        is_error=status >= 400,
        metadata={"url": url, "status": status, "content_type": kind},
    )


def html_to_markdown(html: str) -> str:
    try:
        from bs4 import BeautifulSoup
        from markdownify import MarkdownConverter
    except ImportError:
        raise ToolError(
            "WebFetch needs markdownify for HTML: pip install 'subagents[web]'"
        ) from None
    soup = BeautifulSoup(html, "html.parser")
    for element in soup(["script", "style", "noscript", "template", "iframe"]):
        element.decompose()  # code and styling are not content; their text would be noise
    markdown: str = MarkdownConverter(heading_style="ATX").convert_soup(soup)
    lines = [line.rstrip() for line in markdown.splitlines()]
    compact: list[str] = []
    for line in lines:
        if line or (compact and compact[-1]):
            compact.append(line)
    return "\n".join(compact).strip()
