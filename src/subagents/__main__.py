"""``python -m subagents``: the same as the ``subagents`` command."""

from __future__ import annotations

import sys

from subagents.cli.main import main

sys.exit(main())
