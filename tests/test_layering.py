"""The house's layering, read from the import graph: a package never imports one above it, the
packages' graph has no cycle, and neither has the modules' graph (lazy imports included).
`python -m tests.test_layering` prints the diagram that docs/architecture.md shows (the test
checks that the two agree)."""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
# Bottom to top; a module belongs to the unit with the longest matching prefix.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("topologies",),
    ("p2pfl.errors", "p2pfl.options", "p2pfl.data"),
    ("p2pfl.core",),
    ("p2pfl.scale",),
    ("p2pfl.context", "p2pfl.callbacks"),
    ("algorithms",),
    ("p2pfl.config",),
    ("p2pfl.report",),
    ("p2pfl.objects",),
    ("p2pfl.engine",),
    ("analysis",),
    ("bench",),
    ("p2pfl.cli", "p2pfl"),
)
PACKAGES = ("p2pfl", "topologies", "algorithms", "analysis", "bench")
UNITS = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str:
    """The layer unit that holds `module` (the longest prefix in LAYERS)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in UNITS:
            return name
    raise KeyError(f"{module} is in no layer: add it to LAYERS")


def _runtime_imports(tree: ast.AST) -> list[tuple[str, int]]:
    """(module, line) of every import that runs (anywhere, functions included), not those under
    `if TYPE_CHECKING:` (annotations only)."""
    found = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
            for alias in node.names:  # `from p2pfl import engine` imports p2pfl.engine
                found.append((f"{node.module}.{alias.name}", node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_edges() -> dict[tuple[str, str], list[str]]:
    """(unit, imported unit) -> the places ('path:line') that import across units."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            source = unit_of(module.removesuffix(".__init__"))
            for name, line in _runtime_imports(ast.parse(path.read_text())):
                if name.split(".")[0] not in PACKAGES:
                    continue
                try:
                    target = unit_of(name)
                except KeyError:
                    continue  # `from p2pfl import run`: a name of a unit, not a module
                if target != source:
                    edges[source, target].append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def _modules() -> dict[str, Path]:
    """Every library module by dotted name (a package by its own name) -> its file."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(
                ".__init__")] = path
    return found


def module_edges() -> dict[tuple[str, str], int]:
    """(module, module it imports) -> the line of the first such import, for every import that
    runs (function bodies included). `from package import submodule` imports the submodule;
    `from module import name` the module."""
    modules = _modules()
    edges: dict[tuple[str, str], int] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        for name, line in _runtime_imports(tree):
            if name.split(".")[0] not in PACKAGES:
                continue
            parts = name.split(".")
            target = next((".".join(parts[:end]) for end in range(len(parts), 0, -1)
                           if ".".join(parts[:end]) in modules), None)
            if target is not None and target != module:
                edges.setdefault((module, target), line)
    # `from p2pfl.engine import run` also lists p2pfl.engine.run: a name, not a module, dropped
    # above; `from topologies import builders` lists both the package and the submodule: the
    # package's own edge only counts if a name other than a submodule is imported from it.
    return {e: line for e, line in edges.items() if not _only_submodules(e, modules)}


def _only_submodules(edge: tuple[str, str], modules: dict[str, Path]) -> bool:
    """Whether every import of package `edge[1]` in module `edge[0]` names submodules."""
    source, target = edge
    if not (ROOT / target.replace(".", "/") / "__init__.py").exists():
        return False
    tree = ast.parse(modules[source].read_text())
    froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == target]
    plain = [n for n in ast.walk(tree) if isinstance(n, ast.Import)
             and any(a.name == target for a in n.names)]
    return not plain and bool(froms) and all(f"{target}.{a.name}" in modules
                                             for n in froms for a in n.names)


def module_cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The import cycles among modules (each as the modules in import order)."""
    graph = nx.DiGraph(list(edges))
    return [c for c in nx.simple_cycles(graph)]


def diagram() -> str:
    """The units bottom to top with the units each imports (a Mermaid flowchart)."""
    edges = import_edges()
    lines = ["flowchart BT"]
    for units in LAYERS:
        for unit in units:
            lines.append(f"    {unit.replace('.', '_')}[\"{unit}\"]")
    for (source, target) in sorted(edges, key=lambda e: (UNITS[e[0]], e[0], UNITS[e[1]], e[1])):
        lines.append(f"    {source.replace('.', '_')} --> {target.replace('.', '_')}")
    return "\n".join(lines)


def test_no_module_imports_itself_through_others() -> None:
    edges = module_edges()
    cycles = [" -> ".join([*c, c[0]]) + " (lines " + ", ".join(
        str(edges[c[i], c[(i + 1) % len(c)]]) for i in range(len(c))) + ")"
        for c in module_cycles(edges)]
    assert not cycles, "\n".join(cycles)


def private_imports() -> list[str]:
    """'path:line imports module' for every import of another package's private module (a
    module path with a part starting with '_', like topologies._common)."""
    found = []
    for module, path in _modules().items():
        for name, line in _runtime_imports(ast.parse(path.read_text())):
            parts = name.split(".")
            if (parts[0] in PACKAGES and parts[0] != module.split(".")[0]
                    and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return found


def test_no_module_imports_another_packages_private_module() -> None:
    found = private_imports()
    assert not found, "\n".join(found)


def test_an_injected_module_cycle_would_be_caught() -> None:
    """The graph is real: the engine's builder imports the stacked trainer; a lazy import of the
    builder inside the stacked module would close a cycle."""
    edges = module_edges()
    assert ("p2pfl.engine.builder", "p2pfl.engine.stacked") in edges
    assert not module_cycles(edges)
    injected = [*edges, ("p2pfl.engine.stacked", "p2pfl.engine.builder")]
    assert ["p2pfl.engine.builder", "p2pfl.engine.stacked"] in [sorted(c) for c in
                                                                module_cycles(injected)]
    lazy = ast.parse("def f():\n    from p2pfl.engine.builder import build\n")
    assert _runtime_imports(lazy)[0][0] == "p2pfl.engine.builder"


def test_no_unit_imports_one_above_it() -> None:
    upward = [f"{s} (layer {UNITS[s]}) imports {t} (layer {UNITS[t]}) at {', '.join(where)}"
              for (s, t), where in import_edges().items() if UNITS[t] > UNITS[s]]
    assert not upward, "\n".join(upward)


def test_units_of_one_layer_do_not_import_each_other_in_a_circle() -> None:
    edges = import_edges()
    same = {(s, t) for s, t in edges if UNITS[s] == UNITS[t]}
    assert not {(s, t) for s, t in same if (t, s) in same}, same


def test_an_upward_import_would_be_caught() -> None:
    tree = ast.parse("def f():\n    from p2pfl.engine import run\n")
    [(name, _), _] = _runtime_imports(tree)
    assert UNITS[unit_of(name)] > UNITS[unit_of("p2pfl.core.trainer")]
    typed = ast.parse("if TYPE_CHECKING:\n    import p2pfl.engine\n")
    assert all(not n.startswith("p2pfl") for n, _ in _runtime_imports(typed))


def test_the_architecture_page_shows_the_import_graph() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    shown = re.search(r"```mermaid\n(.*?)\n```", page, re.S)
    assert shown is not None and shown.group(1) == diagram(), (
        "docs/architecture.md is out of date: paste `python -m tests.test_layering` there")


def code_lines(source: str) -> int:
    """Lines of a module outside its docstrings (module, class and function ones): the size of
    its code, which the numpydoc sections (tests/test_docstrings.py) do not inflate."""
    tree = ast.parse(source)
    documented = [node.body[0] for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                                | ast.AsyncFunctionDef)
                  and ast.get_docstring(node, clean=False) is not None]
    return len(source.splitlines()) - sum(d.end_lineno - d.lineno + 1 for d in documented)


def test_no_library_module_is_over_350_lines() -> None:
    long = [f"{p.relative_to(ROOT)} ({n} lines of code)" for package in PACKAGES
            for p in (ROOT / package).rglob("*.py")
            if (n := code_lines(p.read_text())) > 350]
    assert not long, long
    assert code_lines('"""Doc\n\ntext."""\n\ndef f():\n    """One."""\n    return 1\n') == 3


if __name__ == "__main__":
    sys.stdout.write(diagram() + "\n")


def test_the_flat_layouts_paths_still_import_with_a_warning() -> None:
    import importlib

    import pytest

    from p2pfl import _moved
    from p2pfl.core.trainer import VectorizedTrainer
    from p2pfl.engine import builder

    for old in ("p2pfl.local", "p2pfl.build"):
        sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match="p2pfl.local is now p2pfl.core.solver"):
        local = importlib.import_module("p2pfl.local")
    assert local.VectorizedTrainer is VectorizedTrainer
    assert local.LocalTerms.__name__ == "LocalTerms"
    with pytest.warns(DeprecationWarning, match="p2pfl.engine.builder"):
        assert importlib.import_module("p2pfl.build") is builder
    assert all(importlib.util.find_spec(new) for homes in _moved.MOVED.values() for new in homes)
