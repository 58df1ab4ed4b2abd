"""The interactive session: ``subagents`` without ``-p`` (``docs/interactive.md``).

Only ``app.py`` and the widget modules import Textual (the optional extra ``tui``); this
package's other modules — the conversation driver, the permission queue, slash commands — are
plain asyncio and importable without it.
"""
