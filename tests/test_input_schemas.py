"""The built-in tools' input schemas served from the generated table (tools/input_schemas.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field
from pydantic.version import VERSION as PYDANTIC_VERSION

from cli_helpers import recorded, run_cli, tool_call, write_script
from subagents.tools import input_schemas, schema_table
from subagents.tools.base import LazyInput, Tool, ToolInput, built_json_schema, input_json_schema
from subagents.tools.inputs.read import ReadInput
from subagents.tools.read import ReadTool

STALE = f"out of date: run {input_schemas.WRITE_COMMAND}"


def test_every_built_in_input_model_has_a_current_entry() -> None:
    table = json.loads(input_schemas.TABLE_PATH.read_text(encoding="utf-8"))
    if table["pydantic"] != PYDANTIC_VERSION:
        # Another pydantic release than the table's: runs build every schema (correct, slower)
        # and the fingerprints may differ by design; a release is not this change's failure.
        pytest.skip(
            f"table made with pydantic {table['pydantic']}, not {PYDANTIC_VERSION}: {STALE}"
        )
    models = schema_table.builtin_input_models()
    assert len(models) >= 20
    assert sorted(table["models"]) == sorted(map(input_schemas.model_key, models)), STALE
    lazy = set(schema_table.input_modules())
    assert len(lazy) >= 14
    for model in models:
        entry = table["models"][input_schemas.model_key(model)]
        assert entry["fingerprint"] == input_schemas.model_fingerprint(model), STALE
        if model.__module__ in lazy:
            imports = schema_table.subagents_imports(model.__module__)
            assert entry["imports"] == imports, STALE
            source = input_schemas.source_fingerprint(model.__module__, imports)
            assert entry["source"] == source, STALE
        assert entry["schema"] == built_json_schema(model), STALE
        assert input_json_schema(model) == built_json_schema(model)
    assert schema_table.main(["--check"]) == 0


def _table_with(model: type[BaseModel], schema: dict[str, Any], **top: Any) -> dict[str, Any]:
    entry = {"fingerprint": input_schemas.model_fingerprint(model), "schema": schema}
    return {"pydantic": PYDANTIC_VERSION, "models": {input_schemas.model_key(model): entry}, **top}


def test_an_entry_is_served_only_while_its_sources_and_pydantic_are_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marked = {"type": "object", "properties": {"marker": {"type": "string"}}}
    monkeypatch.setattr(input_schemas, "_table", _table_with(ReadInput, marked))
    served = input_json_schema(ReadInput)
    assert served == marked  # the table is what a run sends
    served["properties"].clear()  # a caller may change its copy (AgentTool does)
    assert input_json_schema(ReadInput) == marked

    monkeypatch.setattr(input_schemas, "_table", _table_with(ReadInput, marked, pydantic="2.0.0"))
    assert input_json_schema(ReadInput) == built_json_schema(ReadInput)

    stale = _table_with(ReadInput, marked)
    stale["models"][input_schemas.model_key(ReadInput)]["fingerprint"] = "0" * 64
    monkeypatch.setattr(input_schemas, "_table", stale)
    assert input_json_schema(ReadInput) == built_json_schema(ReadInput)

    monkeypatch.setattr(input_schemas, "_table", {})
    assert input_json_schema(ReadInput) == built_json_schema(ReadInput)


def test_a_lazy_input_is_served_by_name_while_its_source_is_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tool whose input is a ``LazyInput`` gets its schema from the table by the module's
    name and source, before its model is imported; a changed source builds it as before."""
    module, name = "subagents.tools.inputs.read", "ReadInput"
    table = json.loads(input_schemas.TABLE_PATH.read_text(encoding="utf-8"))
    entry = table["models"][f"{module}.{name}"]
    marked = {"type": "object", "properties": {"marker": {"type": "string"}}}
    monkeypatch.setattr(Tool, "_schema_cache", {})
    monkeypatch.setattr(
        input_schemas,
        "_table",
        {**table, "models": {f"{module}.{name}": {**entry, "schema": marked}}},
    )
    assert isinstance(vars(ReadTool)["input_model"], LazyInput) or ReadTool.input_model is ReadInput
    assert ReadTool().schema().input_schema == marked

    # A changed source: the model is imported, and its own fingerprint decides as for any model.
    for fingerprint, expected in ((entry["fingerprint"], marked), ("0" * 64, None)):
        monkeypatch.setattr(Tool, "_schema_cache", {})
        stale = {**entry, "schema": marked, "source": "0" * 64, "fingerprint": fingerprint}
        models = {f"{module}.{name}": stale}
        monkeypatch.setattr(input_schemas, "_table", {**table, "models": models})
        assert ReadTool().schema().input_schema == (expected or built_json_schema(ReadInput))
    assert vars(ReadTool)["input_model"] is ReadInput  # read once: now a plain attribute


def test_the_source_fingerprint_sees_the_values_an_input_imports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from subagents.tools import shell_timeouts

    module = "subagents.tools.inputs.bash"
    imports = schema_table.subagents_imports(module)
    assert ["subagents.tools.shell_timeouts", "MAX_TIMEOUT_MS"] in imports
    before = input_schemas.source_fingerprint(module, imports)
    monkeypatch.setattr(shell_timeouts, "MAX_TIMEOUT_MS", 1)
    assert input_schemas.source_fingerprint(module, imports) != before
    assert input_schemas.source_fingerprint("subagents.tools.inputs.missing", []) is None


LAZY_PROBE = """
import sys
from subagents.tools.read import ReadTool
tool = ReadTool()
tool.schema()
assert "subagents.tools.inputs.read" not in sys.modules, "schema() imported the model"
tool.parse_input({"file_path": "x"})
assert "subagents.tools.inputs.read" in sys.modules
"""


def test_a_tools_input_module_is_imported_at_its_first_validation_not_for_its_schema() -> None:
    run = subprocess.run([sys.executable, "-c", LAZY_PROBE], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_the_fingerprint_sees_a_changed_field_and_a_nested_model() -> None:
    class Item(BaseModel):
        text: str = Field(description="one")

    class Outer(ToolInput):
        items: list[Item] = Field(description="all")

    before = input_schemas.model_fingerprint(Outer)
    Item.model_fields["text"].description = "two"
    assert input_schemas.model_fingerprint(Outer) != before
    Outer.__doc__ = "Now described."
    assert input_schemas.model_fingerprint(Outer) != before


def test_a_users_tool_input_is_built_with_its_class() -> None:
    class Mine(ToolInput):
        path: str = Field(description="where")

    assert Mine.__pydantic_complete__
    assert input_json_schema(Mine) == built_json_schema(Mine)


def test_a_run_sends_pydantics_schemas_and_validates_deferred_models(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n")
    bad = tool_call("Read", file_path=str(tmp_path / "notes.txt"), bogus=1)
    good = tool_call("Read", file_path=str(tmp_path / "notes.txt"))
    script = write_script(
        tmp_path, [{"turns": [{"tool_calls": [bad]}, {"tool_calls": [good]}, {"text": "done"}]}]
    )
    run = run_cli("-p", "go", "--model", f"scripted:{script}", cwd=tmp_path)
    assert run.code == 0, run.stderr
    first, second, third = recorded(tmp_path)
    from subagents.session import Session  # noqa: F401  (defines the session's tools)
    from subagents.tools.base import Tool

    by_name = {tool.name: tool for tool in _tool_classes(Tool)}
    compared = set()
    for sent in first["tools"]:
        tool = by_name.get(sent["name"])
        if tool is not None and tool.__name__ != "AgentTool":
            assert sent["input_schema"] == built_json_schema(tool.input_model), sent["name"]
            compared.add(sent["name"])
    assert {"Bash", "Read", "Edit", "Write", "Glob", "Grep", "TodoWrite"} <= compared
    rejected = second["messages"][-1]["content"][0]
    assert rejected["is_error"] and "bogus" in rejected["content"]
    accepted = third["messages"][-1]["content"][0]
    assert not accepted.get("is_error") and "alpha" in accepted["content"]


def _tool_classes(base: type) -> list[Any]:
    found, pending = [], [base]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            named = isinstance(getattr(sub, "name", None), str) and hasattr(sub, "input_model")
            if named and sub.__module__.startswith("subagents."):  # not other tests' tools
                found.append(sub)
    return found
