"""The CLI's stand-in for pydantic's plugin loader (``cli/pydantic_plugins.py``): it answers
``get_plugins`` with nothing, and any other name a pydantic 2.x imports from its loader comes
from the real module, so a pydantic release that imports more from it keeps working."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import sys
    from subagents.cli import pydantic_plugins
    assert "pydantic.plugin._loader" not in sys.modules
    assert pydantic_plugins.install(), "no plugin here: the stand-in should be installed"
    from pydantic.plugin._loader import get_plugins, _loading_plugins, _plugins
    assert tuple(get_plugins()) == ()
    assert _loading_plugins is False and _plugins is None   # the real loader's own names
    from pydantic import BaseModel
    class M(BaseModel):
        x: int
    assert M(x=1).x == 1
    try:
        from pydantic.plugin._loader import no_such_name  # noqa: F401
    except ImportError as exc:
        print("missing:", exc)
    print("ok")
    """
)


def test_the_stand_in_answers_no_plugins_and_forwards_other_names() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "ok"
    assert any(line.startswith("missing:") and "no_such_name" in line for line in lines)
