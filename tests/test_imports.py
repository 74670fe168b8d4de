"""How loom_nb's modules import each other: layers that point one way, no cycle, and
``import loom_nb`` stays light.

The graph is read from the source with ``ast`` and holds every import: at module level, under
``if TYPE_CHECKING:`` (what mypy follows), and inside function bodies (a lazy import is still a
dependency). Importing ``a.b.c`` also runs ``a.b``'s ``__init__`` when the importer is not
inside ``a.b``, so that edge is in the graph too.

One module may point up: the composition root, ``loom_nb._compose``. It opens the default
store, the model adapter a string names, a chart's drawing and the notebook layer for
``%load_ext``, each inside a function, so importing it imports none of them. Those edges, named
in ``COMPOSITION_ROOT``, are the only ones left out of the checks below.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import loom_nb

PACKAGE = Path(loom_nb.__file__).parent

#: What ``import loom_nb`` must not import (docs/design.md, "Layers").
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

#: The composition root and the integrations it may import, each inside a function body.
COMPOSITION_ROOT = (
    "loom_nb._compose",
    {
        "loom_nb.sqlite",  # the default store (LOOM_STORE, else .loom/loom.db)
        "loom_nb.postgres",  # LOOM_STORE=postgresql://...
        "loom_nb.models.openai",  # "openai:..." and "ollama:..."
        "loom_nb.models.anthropic",  # "anthropic:..."
        "loom_nb.models",  # the adapters' package: already imported, it is the one asking
        "loom_nb.charts",  # a saved chart's drawing
        "loom_nb.charts._chart",
        "loom_nb.notebook",  # %load_ext loom_nb
        "loom_nb.notebook._evals",  # an eval report's HTML summary
    },
)

#: The layers, lowest first. A module imports its own layer and the ones below, never above.
LAYERS = ["core", "shared", "integrations", "face", "notebook", "servers"]

#: The packages of the shared layer: what the table connectors share, what the SQL stores share.
SHARED = {"_tables", "_sql_stores"}


def layer(module: str) -> str:
    """The layer of one of loom_nb's modules."""
    parts = module.split(".")
    if module == "loom_nb":
        return "face"  # the public names: the core's, and the test models
    if parts[1] in SHARED:
        return "shared"
    if len(parts) == 2 and parts[1].startswith("_"):
        return "core"  # loom_nb/_*.py
    if module == "loom_nb.models":
        return "core"  # the model contract; its adapters are integrations
    if parts[1] == "notebook":
        return "notebook"
    if parts[1] == "http":
        return "servers"  # threads over HTTP, drawn by the notebook's one renderer
    return "integrations"  # sqlite, postgres, supabase, frames, charts, the model adapters


def import_graph(package: Path) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of ``package`` it imports, anywhere in it."""
    paths = {_module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[name] = {
            target
            for node, _lazy in imports(tree)
            for target in _targets(node, name, path.name == "__init__.py", paths)
        } - {name}
    return graph


def imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, with whether it sits inside a function body (runs only when
    the function is called)."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, lazy = todo.pop()
        for child in ast.iter_child_nodes(node):
            inside = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, lazy))
            todo.append((child, inside))
    return found


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _packages(module: str) -> list[str]:
    """``a.b.c`` -> ``["a.b", "a"]``: the packages whose ``__init__`` runs first."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def _targets(
    node: ast.Import | ast.ImportFrom, name: str, is_package: bool, modules: dict[str, Path]
) -> set[str]:
    """The package's modules one import runs: ``from loom_nb.charts import _draw`` runs
    ``loom_nb.charts._draw`` and, from outside ``loom_nb.charts``, ``loom_nb.charts`` itself;
    ``from loom_nb import Agent`` needs ``loom_nb`` (its ``__init__`` done), even from inside."""
    if isinstance(node, ast.Import):
        named = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:  # from . import x, from ..y import z
            here = name if is_package else name.rpartition(".")[0]
            for _ in range(node.level - 1):
                here = here.rpartition(".")[0]
            base = f"{here}.{base}" if base else here
        named = {
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
            for alias in node.names
        }
    running = set(_packages(name))  # their __init__ already runs when ``name`` does
    parents = {p for target in named for p in _packages(target) if p not in running}
    return ((named | parents) - {name}) & modules.keys()


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


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import that points to a higher layer, as ``"a -> b (core -> charts)"``."""
    return [
        f"{a} -> {b} ({layer(a)} -> {layer(b)})"
        for a in sorted(graph)
        for b in sorted(graph[a])
        if LAYERS.index(layer(b)) > LAYERS.index(layer(a))
    ]


def problems(package: Path) -> list[str]:
    """What is wrong with ``package``'s imports: the composition root importing a module of
    the package when it is imported, a cycle, an import that points up. The root's named
    edges are left out of the last two: they run only when its functions are called."""
    root, allowed = COMPOSITION_ROOT
    graph = import_graph(package)
    path = package / (root.rpartition(".")[2] + ".py")
    modules = {m: path for m in graph}
    found = [
        f"{root} imports {target} when imported"
        for node, lazy in imports(ast.parse(path.read_text(encoding="utf-8")))
        if not lazy
        for target in sorted(_targets(node, root, False, modules))
    ]
    graph[root] -= allowed
    cycle = find_cycle(graph)
    return found + (["import cycle: " + " -> ".join(cycle)] if cycle else []) + upward(graph)


LOOM_NB = import_graph(PACKAGE)


def test_loom_nb_imports_point_down_without_a_cycle():
    assert problems(PACKAGE) == []


def test_the_composition_root_uses_each_edge_it_is_allowed_and_no_other():
    root, allowed = COMPOSITION_ROOT
    assert LOOM_NB[root] == allowed


def test_no_module_imports_by_a_computed_name():
    # importlib.import_module("loom_nb.x") would be an import this reader cannot see. Two
    # exceptions: _target.py imports the user's module a command line names (python -m
    # loom_nb.mcp M:OBJ), and _embed.py the modules an embedded file's own `from loom_nb...
    # import` statements name (edges this reader sees in that file).
    for path in PACKAGE.rglob("*.py"):
        if path in (PACKAGE / "_target.py", PACKAGE / "_embed.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "import_module":
                pytest.fail(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports by name")
            if isinstance(node, ast.Name) and node.id == "__import__":
                pytest.fail(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} uses __import__")


def private_names_of_the_core(package: Path) -> set[str]:
    """The underscore names the core defines: its functions, methods and attributes."""
    core = [p for p in package.glob("_*.py")] + [package / "models" / "__init__.py"]
    names: set[str] = set()
    for path in core:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)  # self._kept = ...
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_uses(package: Path, layer_folder: str) -> list[str]:
    """Where ``layer_folder``'s modules use a private name of the core: an attribute
    (``agent._checked``) or an imported name (``from loom_nb._agent import _refuse_waiting``)."""
    private = private_names_of_the_core(package)
    found = []
    for path in sorted((package / layer_folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in private:
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    found.append(f"{path.name}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.ImportFrom):
                found += [
                    f"{path.name}:{node.lineno} {alias.name}"
                    for alias in node.names
                    if alias.name in private
                ]
    return found


def test_the_notebook_layer_uses_only_public_names_of_the_core():
    assert private_uses(PACKAGE, "notebook") == []


def test_a_deliberate_private_call_from_the_notebook_fails_the_check(copy_of_loom_nb: Path):
    add_line(
        copy_of_loom_nb / "notebook" / "commands" / "cell.py",
        "def peek(agent):\n    return agent._load_for_run('t', None), result._snapshot",
    )
    add_line(
        copy_of_loom_nb / "notebook" / "history.py",
        "from loom_nb._agent import _refuse_waiting",
    )
    found = sorted(use.split(" ")[1] for use in private_uses(copy_of_loom_nb, "notebook"))
    assert found == ["._load_for_run", "._snapshot", "_refuse_waiting"]


def test_the_agent_loop_and_its_events_never_import_the_agent():
    assert "loom_nb._run" in LOOM_NB["loom_nb._agent"]
    assert "loom_nb._events" in LOOM_NB["loom_nb._run"]
    assert "loom_nb._agent" not in LOOM_NB["loom_nb._run"] | LOOM_NB["loom_nb._events"]


def test_the_reader_follows_type_checking_function_bodies_relatives_and_parents(tmp_path):
    # The checks are only as good as this reader: prove it on a made-up package.
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 1\n")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n"
    )
    (pkg / "b.py").write_text("from . import a\n\ndef later():\n    from pkg import c\n")
    (pkg / "c.py").write_text("import pkg.b\nfrom pkg import VALUE\nfrom pkg.sub import d\n")
    (pkg / "sub" / "__init__.py").write_text("from pkg import a\n")
    (pkg / "sub" / "d.py").write_text("from . import e\nfrom pkg.sub import e as again\n")
    (pkg / "sub" / "e.py").write_text("")
    graph = import_graph(pkg)
    assert graph == {
        "pkg": set(),
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.a", "pkg.c"},
        "pkg.c": {"pkg", "pkg.b", "pkg.sub", "pkg.sub.d"},  # pkg.sub's __init__ runs first
        "pkg.sub": {"pkg.a"},
        "pkg.sub.d": {"pkg.sub.e"},  # inside pkg.sub: its __init__ already ran
        "pkg.sub.e": set(),
    }
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]


@pytest.fixture
def copy_of_loom_nb(tmp_path: Path) -> Path:
    copy = tmp_path / "loom_nb"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def add_line(module: Path, line: str) -> None:
    module.write_text(module.read_text(encoding="utf-8") + f"\n\n{line}\n", encoding="utf-8")


@pytest.mark.parametrize(
    "module, line, found",
    [
        # the import the issue found: the core building charts' Chart, lazily
        (
            "_messages.py",
            "def chart():\n    from loom_nb.charts import chart_tools",
            "loom_nb._messages -> loom_nb.charts (core -> integrations)",
        ),
        (
            "_store.py",
            "import typing\nif typing.TYPE_CHECKING:\n    from loom_nb.sqlite import SQLiteStore",
            "loom_nb._store -> loom_nb.sqlite (core -> integrations)",
        ),
        (
            "sqlite/_given.py",
            "def view():\n    from loom_nb.notebook import widgets",
            "loom_nb.sqlite._given -> loom_nb.notebook (integrations -> notebook)",
        ),
        # the core reaching into what only the SQL stores share
        (
            "_store.py",
            "def rows():\n    from loom_nb._sql_stores.rows import message_row",
            "loom_nb._store -> loom_nb._sql_stores.rows (core -> shared)",
        ),
        # through a parent package: loom_nb.charts' __init__ runs, which imports _messages
        (
            "_codec.py",
            "from loom_nb.charts._plot import KINDS",
            "loom_nb._codec -> loom_nb.charts (core -> integrations)",
        ),
    ],
)
def test_a_deliberate_upward_import_fails_the_check(
    copy_of_loom_nb: Path, module: str, line: str, found: str
):
    assert problems(copy_of_loom_nb) == []  # the copy passes as the package does
    add_line(copy_of_loom_nb / module, line)
    assert found in problems(copy_of_loom_nb)


def test_a_deliberate_cycle_inside_a_layer_fails_the_check(copy_of_loom_nb: Path):
    add_line(copy_of_loom_nb / "_errors.py", "def later():\n    from loom_nb import _loop_thread")
    found = problems(copy_of_loom_nb)
    assert found[0] in (
        "import cycle: loom_nb._errors -> loom_nb._loop_thread -> loom_nb._errors",
        "import cycle: loom_nb._loop_thread -> loom_nb._errors -> loom_nb._loop_thread",
    )


def test_the_composition_root_importing_an_integration_when_imported_fails_the_check(
    copy_of_loom_nb: Path,
):
    add_line(copy_of_loom_nb / "_compose.py", "from loom_nb.sqlite import DEFAULT_PATH")
    assert problems(copy_of_loom_nb)[0] == "loom_nb._compose imports loom_nb.sqlite when imported"


def test_import_loom_nb_imports_no_heavy_package_nor_an_integration():
    unwanted = [
        *HEAVY,
        "loom_nb.notebook",
        "loom_nb.sqlite",
        "loom_nb.postgres",
        "loom_nb.charts",
        "loom_nb.models.openai",
    ]
    code = (
        f"import sys, json, loom_nb; print(json.dumps([m for m in {unwanted} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_first_agent_with_a_plain_tool_imports_no_pydantic_zipfile_or_email(tmp_path: Path):
    # The default store (a SQLite file here, in the folder), a plain tool: what a first cell
    # does. pydantic is imported when a call is validated, or for a tool that needs a model.
    code = """
import json, sys
from loom_nb import FunctionModel, Reply, define_agent

def lookup(city: str, days: int = 1, tags: list[str] | None = None) -> dict:
    "The weather in a city."
    return {"city": city}

agent = define_agent(name="a", model=FunctionModel(lambda r: Reply("hi")), tools=[lookup])
assert agent.tools["lookup"].parameters["required"] == ["city"]
unwanted = ("pydantic", "importlib.metadata", "zipfile", "email")
print(json.dumps([m for m in unwanted if m in sys.modules]))
"""
    env = {k: v for k, v in os.environ.items() if k != "LOOM_STORE"}
    env["PYTHONPATH"] = str(PACKAGE.parent)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
    assert (tmp_path / ".loom" / "loom.db").exists()  # the default store was opened


def run_fresh(code: str, cwd: Path) -> Any:
    """What ``code`` prints as JSON, run in a fresh interpreter on this checkout, in ``cwd``
    (the default store is a SQLite file there)."""
    env = {k: v for k, v in os.environ.items() if k != "LOOM_STORE"}
    env["PYTHONPATH"] = str(PACKAGE.parent)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


#: What ``import loom_nb`` leaves for first use: the agent loop (asyncio, and the ssl it
#: brings), pydantic, the tools, stores, numbers and evals, the models, and the stdlib modules
#: only they need.
NOT_ON_IMPORT = [
    "asyncio",
    "ssl",
    "pydantic",
    "secrets",
    "random",
    "hashlib",
    "json",
    "base64",
    "zipfile",
    "email",
    "importlib.metadata",
    "loom_nb._loop_thread",
    "loom_nb._agent",
    "loom_nb._run",
    "loom_nb._tools",
    "loom_nb._json_schema",
    "loom_nb._store",
    "loom_nb._numbers",
    "loom_nb._events",
    "loom_nb._eval",
    "loom_nb.models",
]


def test_import_loom_nb_leaves_the_loop_pydantic_and_the_tools_for_first_use(tmp_path: Path):
    code = f"""
import sys
import loom_nb
early = [m for m in {NOT_ON_IMPORT} if m in sys.modules]
listed = sorted(set(loom_nb.__all__) - set(dir(loom_nb)))
from loom_nb import tool, MemoryStore, TracedNumber, EvalReport, Model, RunEvent
names = [n for n in loom_nb.__all__ if getattr(loom_nb, n, None) is None]
import json
print(json.dumps([early, listed, names, tool.__module__, MemoryStore.__module__]))
"""
    early, listed, missing, tool_home, store_home = run_fresh(code, tmp_path)
    assert early == []
    assert listed == []  # dir() lists every name before its module is imported
    assert missing == []  # and each is there on first use
    assert tool_home == store_home == "loom_nb"


def test_values_from_modules_the_package_imported_itself_name_loom_nb(tmp_path: Path):
    # No class named by the user: the tool, the events and the traced numbers of a run, the
    # report of an eval come from modules define_agent and agent.eval imported on their own.
    code = """
import json
from loom_nb import FunctionModel, Reply, define_agent

def lookup(city: str) -> dict:
    "The weather in a city."
    return {"city": city, "degrees": 21}

def reply(request):
    if request.messages[-1].role == "user":
        return Reply(tool_calls=[("lookup", {"city": "Oslo"})])
    return Reply("It is 21 degrees.")

agent = define_agent(name="a", model=FunctionModel(reply), tools=[lookup])
events = []
result = agent.run_sync("Weather in Oslo?", on_event=events.append)
added = [e for e in events if type(e).__name__ == "MessageAdded"]
numbers = [n for e in added for n in e.numbers]
report = agent.eval(result.thread_id)
values = [agent.tools["lookup"], added[0], numbers[0], result, report]
print(json.dumps({type(v).__name__: type(v).__module__ for v in values}))
"""
    assert run_fresh(code, tmp_path) == {
        "Tool": "loom_nb",
        "MessageAdded": "loom_nb",
        "TracedNumber": "loom_nb",
        "RunResult": "loom_nb",
        "EvalReport": "loom_nb",
    }
