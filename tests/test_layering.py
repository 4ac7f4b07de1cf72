"""The package's import graph: no cycle, counting imports inside functions and the modules a module loads by name
at run time (`import_module("dictembed.x")`, or a "dictembed.x:Name" table it loads from), and the layers kept.

`python -m pytest tests/test_layering.py` is the check; on failure it names the modules of each cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "dictembed"


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module `name` (or an attribute imported from it) belongs to."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of a file but those under `if TYPE_CHECKING:` (imports for annotations only, never run)."""
    found: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        found.append(node)
        test = node.test if isinstance(node, ast.If) else None
        if test is not None and "TYPE_CHECKING" in (getattr(test, "id", None), getattr(test, "attr", None)):
            todo += node.orelse
            continue
        todo += list(ast.iter_child_nodes(node))
    return found


def runtime_targets(tree: ast.AST) -> list[str]:
    """The package's modules a file loads by name at run time: when it calls `import_module`, every string constant
    in it that names a module of the package ("dictembed.x" or "dictembed.x:Name")."""
    calls = any(
        isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("import_module", "__import__")
        for node in ast.walk(tree)
    )
    if not calls:
        return []
    constants = (node.value for node in ast.walk(tree) if isinstance(node, ast.Constant))
    return [value.split(":")[0] for value in constants if isinstance(value, str) and value.startswith(PACKAGE + ".")]


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere in its file (top level or inside a function) or loads by
    name (`runtime_targets`)."""
    modules = module_files()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges = {owner for target in runtime_targets(tree) if (owner := _owner(target, modules)) not in (None, name)}
        for node in runtime_nodes(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            edges |= {owner for target in targets if (owner := _owner(target, modules)) not in (None, name)}
        graph[name] = {edge for edge in edges if edge.startswith(PACKAGE)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_for_annotations_only_are_no_edges() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nelse:\n    import b\nimport c")
    names = [alias.name for node in runtime_nodes(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert sorted(names) == ["b", "c"]


def test_imports_by_name_are_edges() -> None:
    source = 'from importlib import import_module\nTABLE = {"a": "dictembed.encoder:Encoder"}\nimport_module(x)'
    tree = ast.parse(source)
    assert runtime_targets(tree) == ["dictembed.encoder"]
    assert runtime_targets(ast.parse('TABLE = {"a": "dictembed.encoder:Encoder"}')) == []  # no loading, no edge


def test_no_import_cycle_in_the_package() -> None:
    graph = import_graph()
    assert len(graph) > 50 and "dictembed.encoder" in graph["dictembed.recipes.run"]
    assert cycles(graph) == []


@pytest.mark.parametrize(
    "lower,upper",
    [
        ("dictembed.encoder", "dictembed.evaluation.mteb"),  # the MTEB adapter wraps an Encoder
        ("dictembed.backends.onnx.runtime", "dictembed.encoder"),  # the backend knows nothing of the Encoder
        ("dictembed.devices", "dictembed.encoder"),
        ("dictembed.model_card", "dictembed.entry_space"),
        ("dictembed.record", "dictembed.encoder"),
        ("dictembed.record", "dictembed.recipes.config"),  # a record is plain data: no recipe, no training stack
        ("dictembed.model_folder", "dictembed.recipes.registry"),
        ("dictembed.model_folder", "dictembed.encoder"),
        ("dictembed.model_card", "dictembed.recipes.registry"),
        ("dictembed.reverse_dictionary", "dictembed.recipes.registry"),  # serving imports no training code
    ],
)
def test_lower_layers_never_import_upper_ones(lower: str, upper: str) -> None:
    graph = import_graph()
    seen, todo = set(), [lower]
    while todo:  # everything `lower` reaches
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    assert upper not in seen
