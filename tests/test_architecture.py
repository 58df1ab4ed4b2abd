"""The import graph of ``src/subagents`` is acyclic and layered as docs/architecture.md says.

Every import counts: module level, inside functions and under ``TYPE_CHECKING`` alike, since an
import hidden in a function still ties two modules together (it only moves the cycle to run
time). A module may import only from its own layer or the layers below it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "shared leaves",
        (
            "subagents.abort",
            "subagents.config",
            "subagents.config_files",
            "subagents.config_yaml",
            "subagents.descriptors",
            "subagents.events",
            "subagents.frozen",
            "subagents.gc_heap",
            "subagents.ids",
            "subagents.json_codec",
            "subagents.messages",
            "subagents.process_waiter",
            "subagents.processes",
            "subagents.runtime_tags",
            "subagents.settings",
            "subagents.state",
        ),
    ),
    ("providers and storage", ("subagents.models", "subagents.store", "subagents.observe")),
    ("the tool contract", ("subagents.tools.base", "subagents.tools.input_schemas")),
    ("hooks", ("subagents.hooks",)),
    ("worktrees", ("subagents.worktrees",)),
    ("tools and permissions", ("subagents.tools", "subagents.permissions")),
    ("MCP servers", ("subagents.mcp",)),
    ("the loop", ("subagents.loop",)),
    ("the sub-agent system", ("subagents.agents",)),
    ("telemetry", ("subagents.telemetry",)),
    (
        "session and test helpers",
        (
            "subagents.session",
            "subagents.session_turns",
            "subagents.session_compact",
            "subagents.session_core",
            "subagents.session_options",
            "subagents.session_setup",
            "subagents.session_background",
            "subagents.session_history",
            "subagents.session_result",
            "subagents.session_teams",
            "subagents.session_tools",
            "subagents.session_watch",
            "subagents.teammate",
            "subagents.testing",
        ),
    ),
    ("beyond one machine", ("subagents.distributed",)),
    ("the public API", ("subagents",)),
    ("the command line", ("subagents.cli", "subagents.tui", "subagents.__main__")),
)
"""Lowest first. A module belongs to the layer of its longest matching prefix."""


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((SRC / "subagents").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _target(name: str) -> str | None:
    """The module an imported name lives in (``subagents.x.y`` → the longest known prefix)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path) -> Iterator[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [f"{base}.{alias.name}" for alias in node.names] or [base]
        else:
            continue
        for name in names:
            target = _target(name) if name.startswith("subagents") else None
            if target is not None and target != module:
                yield target


def _graph() -> dict[str, set[str]]:
    return {module: set(_imported(module, path)) for module, path in MODULES.items()}


def _layer(module: str) -> int:
    best, best_len = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the list of modules on it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_the_graph_sees_function_level_and_type_checking_imports() -> None:
    """The checker itself: the imports it must count are counted (else it proves nothing)."""
    graph = _graph()
    assert len(graph) > 80
    assert "subagents.tools.bash" in graph["subagents.tools"]  # inside ``core_tools``
    assert "subagents.session" in graph["subagents"]  # under ``TYPE_CHECKING``
    assert "subagents.tools" in graph["subagents.session_tools"]  # inside ``_builtin_tools``
    assert "subagents.models.anthropic" in graph["subagents.models.resolve"]  # in a function


def test_the_import_graph_is_acyclic() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checker_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_has_a_layer() -> None:
    assert [module for module in sorted(MODULES) if _layer(module) < 0] == []


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{module} ({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
        for module, targets in sorted(_graph().items())
        for target in sorted(targets)
        if _layer(target) > _layer(module)
    ]
    assert upward == []
