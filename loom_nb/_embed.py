"""Modules an export carries as code: the helpers exported code calls (``postgrest_frame``,
``bucket_start``, ``draw_chart``) are real modules, read by ruff, mypy and the tests and used
by the tools themselves where they can, and an export writes their source into its first cell.

An embedded module imports the standard library, numpy, pandas and matplotlib as any module
does, and from loom_nb only constants (written as their values) and functions (written as
their source, with the constants, functions and modules they use in turn), so the export needs
no loom_nb. Its docstring and ``from __future__`` are left out (its annotations are evaluated,
so they name only what it imports), and each name it binds is given by ``CodeContext.name``,
so a table called like a helper keeps its frame.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import importlib.util
import inspect
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loom_nb._code import CodeContext


def embed(module: str, ctx: CodeContext) -> dict[str, str]:
    """Set up the module named ``module`` in ``ctx``: its imports, one setup each, then its
    code. Returns each name the code binds -> the name the export gives it. The module's file
    is read, not imported (a module that draws with pyplot imports pyplot; the kernel need
    not)."""
    imports, code, bound = _bundled(module)
    for line in imports:
        ctx.setup(line)
    names = {name: ctx.name(name) for name in bound}
    ctx.setup(_renamed(code, tuple((old, new) for old, new in names.items() if old != new)))
    return names


@functools.cache
def _bundled(module: str) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """The module's imports, its code (with what it borrows from loom_nb first), and the
    names that code binds."""
    bundle = _Bundle()
    source = _source(module)
    body = ast.parse(source).body
    lines = source.splitlines()
    start = 0
    for stmt in body:
        end = stmt.end_lineno or stmt.lineno
        if _is_docstring(stmt) or (
            isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        ):
            start = end
        elif isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("loom_nb"):
            assert stmt.module is not None and stmt.level == 0
            for alias in stmt.names:
                assert alias.asname is None, f"{module}: import {alias.name} under its name"
                bundle.borrow(importlib.import_module(stmt.module), alias.name)
            start = end
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            bundle.imports.append(ast.unparse(stmt))
            start = end
        else:  # with the comments above it
            bundle.own.append("\n".join(lines[start:end]).strip("\n"))
            start = end
    code = _joined([*bundle.borrowed, *bundle.own])
    return tuple(dict.fromkeys(bundle.imports)), code, tuple(_bound(code))


def _source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return Path(spec.origin).read_text(encoding="utf-8")


class _Bundle:
    def __init__(self) -> None:
        self.imports: list[str] = []
        self.borrowed: list[str] = []
        self.own: list[str] = []
        self._done: set[str] = set()

    def borrow(self, module: types.ModuleType, name: str) -> None:
        """``module.name`` as code: a constant's value, a function's source (after what it
        uses)."""
        if name in self._done:
            return
        self._done.add(name)
        value = getattr(module, name)
        if inspect.isfunction(value):
            self._function(value, name)
        elif isinstance(value, types.ModuleType):
            package, _, leaf = value.__name__.rpartition(".")
            if leaf != name:
                self.imports.append(f"import {value.__name__} as {name}")
            else:
                self.imports.append(
                    f"from {package} import {leaf}" if package else f"import {leaf}"
                )
        elif _is_literal(value):
            self.borrowed.append(f"{name} = {value!r}")
        elif getattr(inspect.getmodule(value), name, None) is value and not _ours(value):
            self.imports.append(f"from {inspect.getmodule(value).__name__} import {name}")  # type: ignore[union-attr]
        else:
            raise TypeError(f"cannot embed {module.__name__}.{name} ({type(value).__name__})")

    def _function(self, function: Callable[..., Any], name: str) -> None:
        assert function.__name__ == name, f"embed {function.__name__} under its own name"
        source = textwrap.dedent(inspect.getsource(function))
        module = importlib.import_module(function.__module__)
        tree = ast.parse(source)
        local = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)} | {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id not in local and node.id != name:
                if node.id in vars(module):
                    self.borrow(module, node.id)
                else:
                    assert hasattr(builtins, node.id), f"{name} uses {node.id}, defined nowhere"
        self.borrowed.append(source.strip("\n"))


def _joined(pieces: list[str]) -> str:
    """Statements as a module has them: two blank lines around a function or class."""
    code, last_block = "", False
    for piece in pieces:
        block = isinstance(ast.parse(piece).body[0], (ast.FunctionDef, ast.ClassDef))
        if code:
            code += "\n\n\n" if block or last_block else "\n"
        code, last_block = code + piece, block
    return code


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _is_literal(value: Any) -> bool:
    try:
        return bool(ast.literal_eval(repr(value)) == value)
    except (ValueError, SyntaxError):
        return False


def _ours(value: Any) -> bool:
    return str(getattr(inspect.getmodule(value), "__name__", "")).startswith("loom_nb")


def _bound(code: str) -> list[str]:
    """The names the module's top level binds (functions, classes, assignments)."""
    names: list[str] = []
    for stmt in ast.parse(code).body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(stmt.name)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        if isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        names += [t.id for t in targets if isinstance(t, ast.Name)]
    return list(dict.fromkeys(names))


@functools.lru_cache(maxsize=64)
def _renamed(code: str, renames: tuple[tuple[str, str], ...]) -> str:
    """``code`` with every use and definition of a top-level name renamed as ``renames``
    says."""
    changes = dict(renames)
    if not changes:
        return code
    lines = code.splitlines()
    edits: list[tuple[int, int, int, str]] = []  # line, start, end, text
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name) and node.id in changes:
            edits.append((node.lineno, node.col_offset, node.end_col_offset or 0, node.id))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in changes:
            keyword = "def " if isinstance(node, ast.FunctionDef) else "class "
            line = node.lineno + len(node.decorator_list)
            column = lines[line - 1].index(keyword + node.name) + len(keyword)
            edits.append((line, column, column + len(node.name), node.name))
        elif isinstance(node, (ast.arg, ast.Global, ast.Nonlocal)):
            shadowed = {node.arg} if isinstance(node, ast.arg) else set(node.names)
            assert not shadowed & changes.keys(), f"a local name shadows {shadowed}"
    for line, start, end, old in sorted(edits, reverse=True):
        text = lines[line - 1]
        assert text[start:end] == old
        lines[line - 1] = text[:start] + changes[old] + text[end:]
    return "\n".join(lines)
