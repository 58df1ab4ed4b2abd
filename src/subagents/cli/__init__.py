"""The ``subagents`` command."""
