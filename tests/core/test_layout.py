"""The package's layering, read from every import statement it holds (module level, inside functions
and under ``if TYPE_CHECKING``) by ``grimp``, the graph builder behind import-linter.

From the bottom up (``LAYERS`` lists them top first):

- the data model and its kernel: records, errors, filters, settings, the hook specs and plugin manager,
  how text is read (``language``: tokens, entities, what memories state and when two are the same)
  and the embedders (``embedding``);
- ``storage`` (record store, schema, keyword index, vector index, dialects, the vault) and, independent of it,
  ``models`` (the chat model client);
- ``components``: the parts of one open store the stages are handed;
- ``write`` and ``read``, independent of each other;
- ``background`` (the indexer runs the write path's review);
- ``lifecycle``, then ``portable``;
- the entry points: the ``Memory`` facade, ``RemoteMemory``, recall and messages over either, the
  CLI (with its store connection and migration), the evaluators (``scenarios``: the scenario suites and
  LoCoMo) and the server.

An import may only go down (or stay within its own package); no module imports in a circle; and
``portamem.memory`` is imported by entry points only, never by the stages it is built from.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

import portamem

ROOT = Path(portamem.__file__).resolve().parent

ENTRY_POINTS = grimp.Layer("memory", "recall", "messages", "client", "scenarios", "cli", "__main__", "server",
                           independent=False)
KERNEL = grimp.Layer("errors", "records", "filters", "language", "config", "embedding", "pipeline", "hookspecs",
                     "plugins", independent=False)
#: top first: a module may import from its own layer's package or any layer below it
LAYERS: list[grimp.Layer | str] = [
    ENTRY_POINTS,
    "portable",
    "lifecycle",
    "background",
    grimp.Layer("write", "read", independent=True),
    "components",
    grimp.Layer("storage", "models", independent=True),
    KERNEL,
]


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("portamem", exclude_type_checking_imports=False, cache_dir=None)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return _graph()


def _layer_of(module: str) -> tuple[int, str]:
    """(rank from the bottom, the package it stands for) of a module of the package."""
    tail = module.split(".")[1]
    for rank, layer in enumerate(reversed(LAYERS)):
        tails = layer.module_tails if isinstance(layer, grimp.Layer) else {layer}
        if tail in tails:
            return rank, tail
    raise AssertionError(f"{module} has no layer in LAYERS")


def violations(graph: grimp.ImportGraph) -> list[str]:
    """Every direct import against ``LAYERS``, as 'importer -> imported (line n)', after checking that
    grimp's layer contract (which follows indirect routes too) agrees there is something to report."""
    illegal = graph.find_illegal_dependencies_for_layers(layers=LAYERS, containers={"portamem"})
    out = set()
    for importer in graph.modules - {"portamem"}:
        rank, package = _layer_of(importer)
        for imported in graph.find_modules_directly_imported_by(importer) - {"portamem"}:
            their_rank, their_package = _layer_of(imported)
            sibling = their_rank == rank and their_package != package and not _shares_layer(package, their_package)
            if their_rank > rank or sibling:
                for detail in graph.get_import_details(importer=importer, imported=imported):
                    out.add(f"{importer} -> {imported} (line {detail['line_number']})")
    assert bool(out) == bool(illegal), (sorted(out), illegal)
    return sorted(out)


def _shares_layer(a: str, b: str) -> bool:
    """Both in one layer whose members may import each other (not ``independent``)."""
    return any(isinstance(layer, grimp.Layer) and not layer.independent and {a, b} <= set(layer.module_tails)
               for layer in LAYERS)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (each a circle of imports)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_every_module_has_a_layer(graph: grimp.ImportGraph) -> None:
    tails = {t for layer in LAYERS for t in (layer.module_tails if isinstance(layer, grimp.Layer) else {layer})}
    placed = {m for m in graph.modules if m == "portamem" or m.split(".")[1] in tails}
    assert graph.modules - placed == set(), "give each new module a layer in LAYERS"


def test_few_modules_stand_outside_a_room() -> None:
    """The package's top level holds the facade and the data model; every stage, and every group of
    modules that serve one purpose, has a room (a subpackage) of its own."""
    flat = sorted(p.stem for p in ROOT.glob("*.py"))
    assert len(flat) <= 15, flat


def test_imports_only_go_down(graph: grimp.ImportGraph) -> None:
    assert violations(graph) == []


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    assert cycles(graph) == []


def test_a_planted_back_edge_is_found() -> None:
    """The checks see a lazy back edge from the bottom to the top, a write -> read edge, and the circle
    either makes."""
    graph = _graph()
    assert violations(graph) == []
    graph.add_import(importer="portamem.storage.sql", imported="portamem.memory", line_number=1,
                     line_contents="from ..memory import Memory")
    assert violations(graph) == ["portamem.storage.sql -> portamem.memory (line 1)"]
    assert any("portamem.storage.sql" in c and "portamem.memory" in c for c in cycles(graph))
    graph = _graph()
    graph.add_import(importer="portamem.write.save", imported="portamem.read.scoring", line_number=2,
                     line_contents="from ..read.scoring import rank")
    assert violations(graph) == ["portamem.write.save -> portamem.read.scoring (line 2)"]


def test_the_graph_counts_lazy_and_type_checking_imports(graph: grimp.ImportGraph, tmp_path: Path) -> None:
    """A function-level import and one under ``if TYPE_CHECKING`` are edges like any other."""
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import X\n"
                                "def f():\n    from . import other\n")
    (pkg / "high.py").write_text("X = 1\n")
    (pkg / "other.py").write_text("")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        planted = grimp.build_graph("planted", exclude_type_checking_imports=False, cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert planted.find_modules_directly_imported_by("planted.low") == {"planted.high", "planted.other"}
    # and in the package: the stages reach the replica only through portamem.components' protocols
    assert "portamem.components" in graph.find_modules_directly_imported_by("portamem.background.indexer")


def test_only_entry_points_import_memory(graph: grimp.ImportGraph) -> None:
    importers = graph.find_modules_that_directly_import("portamem.memory")
    top = {f"portamem.{t}" for t in ENTRY_POINTS.module_tails} | {"portamem"}
    assert {m for m in importers if not any(m == t or m.startswith(t + ".") for t in top)} == set()


def test_calibration_does_not_depend_on_the_evaluation(graph: grimp.ImportGraph) -> None:
    assert not graph.chain_exists(importer="portamem.read.calibration", imported="portamem.scenarios.locomo")
    assert not graph.chain_exists(importer="portamem.config", imported="portamem.read.calibration")


def _imports() -> Iterator[tuple[str, int, str, list[str]]]:
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        package = parts[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                elif (node.module or "").split(".")[0] == "portamem":
                    base = node.module or ""
                else:
                    continue
                yield str(path.relative_to(ROOT)), node.lineno, base, [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "portamem":
                        yield str(path.relative_to(ROOT)), node.lineno, alias.name, []


def test_every_import_of_the_package_resolves() -> None:
    """A lazy import of a module that moved fails only when its function runs: catch it here."""
    broken = []
    for where, line, module, names in _imports():
        try:
            target = importlib.import_module(module)
        except ImportError as error:
            if not _ours(error):
                continue  # an optional extra (fastapi, mcp, ...) this environment does not install
            broken.append(f"{where}:{line} {module}")
            continue
        for name in names:
            if not hasattr(target, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError as error:
                    if _ours(error):
                        broken.append(f"{where}:{line} {module}.{name}")
    assert broken == []


def _ours(error: ImportError) -> bool:
    """True when the import failed on a portamem module, not on a third-party package missing here."""
    missing = getattr(error, "name", None)
    return not isinstance(error, ModuleNotFoundError) or (missing or "portamem").split(".")[0] == "portamem"
