"""Pydantic's plugin discovery, answered without ``importlib.metadata`` when no plugin exists.

Pydantic builds every model's validator through its plugin loader, which on the first build
looks for the ``pydantic`` entry-point group: it imports ``importlib.metadata`` (and with it
``email``, ``zipfile``, ``csv``, ``importlib.resources``, ``tempfile``…) and reads the metadata
of every installed distribution — ~9 % of the instructions of a ``subagents -p`` start-up
(callgrind), for an answer that is "none" on nearly every machine.

``install()`` asks the question itself, the way ``importlib.metadata``'s path finder would
answer it: a distribution is a ``*.dist-info`` or ``*.egg-info`` folder in a ``sys.path``
folder (``""`` is the current folder), and it declares a plugin when its ``entry_points.txt``
has a ``[pydantic]`` section. Only when that finds none, and nothing could hide one (a
``sys.path`` entry that is a file, such as a zip, or an ``.egg``; a finder on ``sys.meta_path``
other than the standard one that can list distributions), does pydantic get its loader's "no
plugins" answer: a stand-in ``pydantic.plugin._loader`` whose ``get_plugins()`` returns nothing,
as the real one does under ``PYDANTIC_DISABLE_PLUGINS``. With a plugin installed, or with the
real loader already imported, nothing changes — plugins load as they always do.

Only the ``subagents`` command does this, for its own process; importing ``subagents`` as a
library never does. ``SUBAGENTS_PYDANTIC_PLUGIN_SCAN=full`` leaves discovery to pydantic.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import types
from collections.abc import Iterable
from typing import Final

LOADER: Final = "pydantic.plugin._loader"
GROUP: Final = "pydantic"


def install() -> bool:
    """Give pydantic the stand-in loader when no plugin can be installed; True if it did."""
    if LOADER in sys.modules or os.environ.get("SUBAGENTS_PYDANTIC_PLUGIN_SCAN") == "full":
        return False
    if not _only_the_path_finder() or plugins_may_exist(sys.path):
        return False
    sys.modules[LOADER] = _stand_in()
    return True


def plugins_may_exist(path: Iterable[str]) -> bool:
    """Whether a distribution on ``path`` declares the ``pydantic`` group, or could without
    this scan seeing it."""
    for entry in path:
        root = entry or "."
        if root.endswith(".egg") or (os.path.exists(root) and not os.path.isdir(root)):
            return True  # an egg or a zip: its metadata is not plain folders
        try:
            names = os.listdir(root)
        except OSError:
            continue  # what importlib.metadata cannot list yields nothing there either
        for name in names:
            if name.lower().endswith((".dist-info", ".egg-info")) and _declares_group(
                os.path.join(root, name, "entry_points.txt")
            ):
                return True
    return False


def _declares_group(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return False  # no entry points (or an .egg-info file): nothing to declare
    if GROUP not in text:
        return False
    # Sections as ``importlib.metadata.Sectioned`` reads them: stripped lines, ``[name]``.
    return any(
        line.startswith("[") and line.endswith("]") and line.strip("[]") == GROUP
        for line in map(str.strip, text.splitlines())
    )


def _only_the_path_finder() -> bool:
    """Distributions come from ``sys.meta_path`` finders that can list them; the standard
    path finder is the only one this scan stands in for."""
    return all(
        finder is importlib.machinery.PathFinder
        or getattr(finder, "find_distributions", None) is None
        for finder in sys.meta_path
    )


def _stand_in() -> types.ModuleType:
    module = types.ModuleType(LOADER, "Stand-in: no pydantic plugin is installed (subagents).")

    def get_plugins() -> tuple[()]:
        return ()

    def __getattr__(name: str) -> object:
        # pyproject allows any pydantic 2.x: one that imports another name from its loader
        # gets the real module's (loaded aside, never run for plugins), not an ImportError.
        # Dunders (``__path__``, ``__file__``…) are what the import system and inspection ask
        # every module: they must not load it.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(real_loader(), name)

    module.get_plugins = get_plugins  # type: ignore[attr-defined]
    module.PYDANTIC_ENTRY_POINT_GROUP = GROUP  # type: ignore[attr-defined]
    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


def real_loader() -> types.ModuleType:
    """Pydantic's own loader module, loaded from its file beside the stand-in (once)."""
    loaded = _REAL.get(LOADER)
    if loaded is None:
        import importlib.util

        import pydantic.plugin

        spec = importlib.machinery.PathFinder.find_spec(LOADER, list(pydantic.plugin.__path__))
        if spec is None or spec.loader is None:
            raise ImportError(f"{LOADER}: not found beside pydantic.plugin")
        loaded = _REAL[LOADER] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
    return loaded


_REAL: dict[str, types.ModuleType] = {}
