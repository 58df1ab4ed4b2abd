"""``WebSearch``: a query in, a list of results out, through a pluggable backend.

The runtime ships no search engine (there is no key-less public one to rely on): a session is
given a ``SearchBackend`` (``SessionOptions.web_search``), any object with an async ``search``.
Without one the tool is still offered — the tool array does not depend on configuration — and a
call returns a clear error saying that no backend is configured, so the model moves on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable
from urllib.parse import urlsplit

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
    from subagents.tools.inputs.web_search import WebSearchInput

MAX_RESULTS = 10
NO_BACKEND = (
    "WebSearch is not available: no search backend is configured for this session "
    "(SessionOptions(web_search=...)). Answer from what you know or fetch a known URL "
    "with WebFetch."
)


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """One hit of a web search."""

    title: str
    url: str
    snippet: str = ""


@runtime_checkable
class SearchBackend(Protocol):
    async def search(
        self,
        query: str,
        *,
        allowed_domains: Sequence[str],
        blocked_domains: Sequence[str],
        limit: int,
    ) -> list[SearchResult]: ...


class WebSearchTool(Tool["WebSearchInput"]):
    name = "WebSearch"
    description = descriptions.WEB_SEARCH
    input_model = LazyInput["WebSearchInput"]("subagents.tools.inputs.web_search", "WebSearchInput")

    def __init__(self, backend: SearchBackend | None = None) -> None:
        self.backend = backend

    def is_read_only(self, args: WebSearchInput) -> bool:
        return True

    def is_concurrency_safe(self, args: WebSearchInput) -> bool:
        return True

    async def call(self, args: WebSearchInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        if self.backend is None:
            raise ToolError(NO_BACKEND)
        try:
            results = await self.backend.search(
                args.query,
                allowed_domains=args.allowed_domains or (),
                blocked_domains=args.blocked_domains or (),
                limit=MAX_RESULTS,
            )
        except Exception as exc:  # a broken backend is one failed call, not a dead agent
            raise ToolError(f"WebSearch failed: {type(exc).__name__}: {exc}") from None
        # The backend is asked to filter; the result list is filtered again, whatever it did.
        results = [
            r for r in results if _domain_ok(r.url, args.allowed_domains, args.blocked_domains)
        ][:MAX_RESULTS]
        if not results:
            return ToolOutput(content=f"No results for {args.query!r}.")
        lines = [f"Results for {args.query!r}:"]
        for index, result in enumerate(results, 1):
            lines.append(f"{index}. {result.title}\n   {result.url}\n   {result.snippet}".rstrip())
        urls = [r.url for r in results]
        # Titles and snippets are the web's text: no runtime tag may be forged in them.
        text = escape_runtime_tags("\n".join(lines))[0]
        return ToolOutput(content=text, metadata={"urls": urls})


def _domain_ok(url: str, allowed: Sequence[str] | None, blocked: Sequence[str] | None) -> bool:
    host = (urlsplit(url).hostname or "").lower()

    def under(domain: str) -> bool:
        domain = domain.lower().strip().lstrip(".")
        return bool(domain) and (host == domain or host.endswith("." + domain))

    if blocked and any(under(d) for d in blocked):
        return False
    return not allowed or any(under(d) for d in allowed)
