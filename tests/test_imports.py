"""How loom_nb's modules import each other: no cycles, and ``import loom_nb`` stays light.

The graph is read from the source with ``ast``, so it holds the imports a type checker follows
(``if TYPE_CHECKING:``) as well as the ones that run. Imports inside functions are left out on
purpose: a lazy import is how the core reaches an optional layer only when asked (``%load_ext``
imports the notebook layer, ``resolve_model`` an adapter), and a package's public face may hand
out a module that imports the package's contract back. What runs when a module is imported,
and what mypy reads, must point one way.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import loom_nb

#: What ``import loom_nb`` must not import (DESIGN.md, "Layers").
HEAVY = [
    "pandas",
    "numpy",
    "IPython",
    "ipywidgets",
    "supabase",
    "openai",
    "anthropic",
    "psycopg",
    "psycopg_pool",
    "mcp",
]


def import_graph(package: Path) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of ``package`` it imports at import time."""
    paths = {_module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        needed = {
            target
            for node in _import_time_imports(tree)
            for target in _targets(node, name, is_package, paths)
        }
        graph[name] = needed - {name}
    return graph


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_time_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports at module level, in class bodies and under ``if``/``try`` (``TYPE_CHECKING``,
    optional extras), but not inside function bodies."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        for child in ast.iter_child_nodes(todo.pop()):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            todo.append(child)
    return found


def _targets(
    node: ast.Import | ast.ImportFrom, name: str, is_package: bool, modules: dict[str, Path]
) -> set[str]:
    """The package's modules one import needs: ``from loom_nb import _codec`` needs the module
    ``loom_nb._codec``; ``from loom_nb import Agent`` needs ``loom_nb`` itself."""
    if isinstance(node, ast.Import):
        targets = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:  # from . import x, from ..y import z
            here = name if is_package else name.rpartition(".")[0]
            for _ in range(node.level - 1):
                here = here.rpartition(".")[0]
            base = f"{here}.{base}" if base else here
        targets = {
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
            for alias in node.names
        }
    return targets & modules.keys()


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        path.append(module)
        for target in sorted(graph[module]):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return None


LOOM_NB = import_graph(Path(loom_nb.__file__).parent)


def test_loom_nb_modules_import_each_other_without_a_cycle():
    cycle = find_cycle(LOOM_NB)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_agent_loop_and_its_events_never_import_the_agent():
    assert "loom_nb._run" in LOOM_NB["loom_nb._agent"]
    assert "loom_nb._events" in LOOM_NB["loom_nb._run"]
    assert "loom_nb._agent" not in LOOM_NB["loom_nb._run"] | LOOM_NB["loom_nb._events"]


def test_the_reader_counts_type_checking_and_relative_imports_not_lazy_ones(tmp_path):
    # The cycle check is only as good as this reader: prove it on a made-up package.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("VALUE = 1\n")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n"
    )
    (pkg / "b.py").write_text("from . import a\n\ndef later():\n    from pkg import c\n")
    (pkg / "c.py").write_text("import pkg.b\nfrom pkg import VALUE\n")
    graph = import_graph(pkg)
    assert graph == {
        "pkg": set(),
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.a"},
        "pkg.c": {"pkg", "pkg.b"},
    }
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]


def test_import_loom_nb_imports_no_heavy_package_nor_the_notebook_layer():
    unwanted = [*HEAVY, "loom_nb.notebook"]
    code = (
        f"import sys, json, loom_nb; print(json.dumps([m for m in {unwanted} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
