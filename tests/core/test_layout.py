"""The package's layering, read from its import statements: storage sits below everything that uses it.

- no cycle among the modules' import-time imports;
- the storage package (record store, schema, keyword index, vector index, dialects) imports only the data
  model below it, never the retrieval, indexing or ``Memory`` layers above it;
- ``portamem.memory`` is imported at run time by entry points only (the package, the CLI, the evaluator,
  the server, the ``migrate`` command), never by the helpers ``Memory`` itself is built from.
"""

from __future__ import annotations

import ast
from pathlib import Path

import portamem

ROOT = Path(portamem.__file__).resolve().parent
#: what the storage package may import from the rest of portamem: the data model and its text helpers
STORAGE_MAY_USE = {"portamem.errors", "portamem.filters", "portamem.records", "portamem.text", "portamem.entities",
                   "portamem.audit"}
ENTRY_POINTS = {"portamem", "portamem.cli", "portamem.evaluation", "portamem.storage.commands"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _targets(mods: dict[str, Path], module: str, node: ast.ImportFrom) -> set[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        package = module.split(".") if mods[module].name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    found = set()
    for alias in node.names:
        name = f"{base}.{alias.name}"
        found.add(name if name in mods else base)
    return {t for t in found if t in mods and t != module}


def import_graph() -> dict[str, set[str]]:
    """Each module's imports made when it is imported (top level, outside ``if TYPE_CHECKING``)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom):
                graph[module] |= _targets(mods, module, node)
            elif isinstance(node, ast.Import):
                graph[module] |= {a.name for a in node.names if a.name in mods and a.name != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_graph_reader_sees_known_edges_and_cycles():
    graph = import_graph()
    assert "portamem.storage.sql" in graph["portamem.memory"]
    assert "portamem.storage.schema" in graph["portamem.storage.sql"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_cycle():
    assert _cycles(import_graph()) == []


def test_storage_imports_only_the_data_model():
    graph = import_graph()
    for module, deps in graph.items():
        if module.startswith("portamem.storage") and module != "portamem.storage.commands":
            above = {d for d in deps if not d.startswith("portamem.storage")} - STORAGE_MAY_USE
            assert not above, f"{module} imports {sorted(above)}"


def test_only_entry_points_import_memory():
    importers = {m for m, deps in import_graph().items() if "portamem.memory" in deps}
    assert importers - ENTRY_POINTS - {m for m in importers if m.startswith("portamem.server")} == set()
