"""Writes and checks ``input_schemas.json``, the built-in tools' input schemas as pydantic
builds them (``tools/input_schemas.py`` says why and when an entry is used).

    python -m subagents.tools.schema_table --write    # after changing a built-in input model
    python -m subagents.tools.schema_table --check    # exit 1 when the table is out of date
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.version import VERSION as PYDANTIC_VERSION

from subagents.tools import inputs
from subagents.tools.base import BuiltinToolInput, built_json_schema
from subagents.tools.input_schemas import (
    TABLE_PATH,
    WRITE_COMMAND,
    Imports,
    model_fingerprint,
    model_key,
    source_fingerprint,
)


def builtin_input_models() -> list[type[BaseModel]]:
    """Every built-in input model, with the modules that define them imported."""
    for name in (*_BUILTIN_MODULES, *input_modules()):
        importlib.import_module(name)
    found: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [BuiltinToolInput]
    while pending:
        for sub in pending.pop().__subclasses__():
            found.append(sub)
            pending.append(sub)
    return sorted(found, key=model_key)


_BUILTIN_MODULES = (
    "subagents.session",
    "subagents.tools.bash",
    "subagents.tools.edit",
    "subagents.tools.glob",
    "subagents.tools.grep",
    "subagents.tools.notebook_edit",
    "subagents.tools.read",
    "subagents.tools.web_fetch",
    "subagents.tools.write",
    "subagents.agents.team_tools",
    "subagents.mcp.resource_tools",
)
"""Importing these defines every built-in tool (``builtin_input_models`` finds the rest by
subclass, and the test checks no built-in model is missing from the table)."""


def input_modules() -> list[str]:
    """The modules of ``tools/inputs/``, each a tool's input imported at its first call."""
    folder = Path(inputs.__file__).parent
    return sorted(f"{inputs.__name__}.{path.stem}" for path in folder.glob("[!_]*.py"))


def generate() -> dict[str, Any]:
    """The table as pydantic builds it now."""
    models = {model_key(model): _entry(model) for model in builtin_input_models()}
    return {"pydantic": PYDANTIC_VERSION, "models": models}


def _entry(model: type[BaseModel]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "fingerprint": model_fingerprint(model),
        "schema": built_json_schema(model),
    }
    if model.__module__ in input_modules():  # served before its module is imported
        imports = subagents_imports(model.__module__)
        entry["imports"] = imports
        entry["source"] = source_fingerprint(model.__module__, imports)
    return entry


def subagents_imports(module: str) -> Imports:
    """``[[module, name], ...]`` for each name ``module`` imports from ``subagents`` (its
    source's top-level ``from subagents... import`` statements, in order)."""
    source = inspect.getsource(importlib.import_module(module))
    found: Imports = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("subagents"):
            found.extend([str(node.module), alias.name] for alias in node.names)
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = json.dumps(generate(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if args == ["--write"]:
        TABLE_PATH.write_text(text, encoding="utf-8")
        return 0
    if args == ["--check"]:
        current = TABLE_PATH.read_text(encoding="utf-8") if TABLE_PATH.exists() else ""
        if current != text:
            print(f"{TABLE_PATH} is out of date: run {WRITE_COMMAND}", file=sys.stderr)
            return 1
        return 0
    print(f"usage: {WRITE_COMMAND} | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
