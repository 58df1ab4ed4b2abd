"""What an SDK's ``initialize`` adds to the command line's options (``SessionRequest``).

Its own module so that ``subagents -p`` with a text prompt, which builds its session from an
empty request, does not import the stream-json session and its control channel
(``cli/stream_session.py``, ``cli/control.py``, ``mcp/sdk_bridge.py``) to get it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from subagents.hooks.config import HookConfig
    from subagents.mcp.sdk_bridge import SdkMessenger
    from subagents.permissions.checker import AskCallback


@dataclass(frozen=True, kw_only=True)
class SessionRequest:
    """What the SDK's ``initialize`` adds to the command line's options."""

    agents: dict[str, Any] | None = None
    hooks: HookConfig | None = None
    ask: AskCallback | None = None
    mcp_sdk: SdkMessenger | None = None
    """Reaches the SDK program's in-process MCP servers (``mcp_message`` requests)."""
