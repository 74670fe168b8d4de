"""The docs name only what exists: every file, folder, module, class, function and method
written in backticks in ``docs/*.md`` is found in the source.

A name is checked when it is a path (``notebook/_help.py``, ``charts/``, ``loom_nb/_*.py``), a
call (``store_from_env()``), a dotted name (``Agent.check_thread``, ``_loop_thread.run_sync``,
``thread.charts``) or a class (``ThreadView``). Plain lowercase words (``on_event``,
``max_rows``) and constants are options and variables: left alone. The source is read with
``ast``, so nothing is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))

#: The words the docs use for an instance of a class: ``agent.export`` is ``Agent.export``.
INSTANCES = {
    "agent": "Agent",
    "thread": "Thread",
    "result": "RunResult",
    "ctx": "RunContext",
    "store": "Store",
    "view": "View",
    "session": "Session",
}

_PATH = re.compile(r"^[\w.*/-]+(\.(py|toml|md|ipynb)|/)$")
_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\(\))?$")


class Source:
    """What the repository's Python defines: each module's names and each class's members."""

    def __init__(self, root: Path) -> None:
        self.modules: dict[str, set[str]] = {}
        self.classes: dict[str, set[str]] = {}
        self.bases: dict[str, set[str]] = {}
        for path in [
            *sorted((root / "loom_nb").rglob("*.py")),
            *sorted((root / "tests").rglob("*.py")),
        ]:
            parts = path.relative_to(root).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            self.modules[module] = self._read(ast.parse(path.read_text(encoding="utf-8")))

    def _read(self, tree: ast.Module) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                members = self.classes.setdefault(node.name, set())
                self.bases.setdefault(node.name, set()).update(
                    ast.unparse(b).split("[")[0].rpartition(".")[2] for b in node.bases
                )
                for item in ast.walk(node):
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        members.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        members.add(item.target.id)
                    elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store):
                        members.add(item.attr)  # self.name = ...
                    elif isinstance(item, ast.Assign):
                        members.update(t.id for t in item.targets if isinstance(t, ast.Name))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
        return names

    def members(self, cls: str) -> set[str]:
        """A class's members, its bases' included."""
        found, todo, seen = set(), [cls], set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            found |= self.classes.get(name, set())
            todo.extend(self.bases.get(name, ()))
        return found

    def module(self, name: str) -> str | None:
        """A module written as ``loom_nb.charts``, ``_loop_thread`` or ``cell``."""
        if name in self.modules:
            return name
        found = [m for m in self.modules if m.rpartition(".")[2] == name]
        return found[0] if found else None

    def defined(self, name: str) -> bool:
        return any(name in names for names in self.modules.values()) or any(
            name in members for members in self.classes.values()
        )

    def missing(self, written: str) -> str | None:
        """Why ``written`` names nothing, or None."""
        parts = written.removesuffix("()").split(".")
        if len(parts) == 1:
            return None if self.defined(parts[0]) else "not defined anywhere"
        for cut in range(len(parts) - 1, 0, -1):  # the longest module prefix
            module = self.module(".".join(parts[:cut]))
            if module is not None:
                break
        else:
            module, cut = None, 0
        if module is not None:
            rest = parts[cut:]
            if rest[0] not in self.modules[module] and self.module(f"{module}.{rest[0]}") is None:
                return f"{module} has no {rest[0]}"
            owner, rest = rest[0], rest[1:]
        else:
            owner, rest = INSTANCES.get(parts[0], parts[0]), parts[1:]
            if owner not in self.classes:
                return f"no class or module {parts[0]}"
        for attr in rest:
            if attr not in self.members(owner):
                return f"{owner} has no {attr}"
            owner = attr
        return None


SOURCE = Source(ROOT)


def named_in(doc: Path) -> list[str]:
    """The backticked words of ``doc`` that name a path or a piece of code."""
    words = re.findall(r"`([^`\n]+)`", doc.read_text(encoding="utf-8"))
    return [w for w in dict.fromkeys(words) if "NAME" not in w]


def path_missing(word: str) -> bool:
    for base in (ROOT, ROOT / "loom_nb"):
        if "*" in word and list(base.glob(word)):
            return False
        if (base / word).exists():
            return False
    return True


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_the_docs_name_exists(doc: Path):
    paths = [w for w in named_in(doc) if _PATH.match(w)]
    assert paths  # the pattern finds what the page names
    assert [p for p in paths if path_missing(p)] == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_module_class_and_function_the_docs_name_exists(doc: Path):
    names = [
        w
        for w in named_in(doc)
        if _NAME.match(w)
        and not _PATH.match(w)
        and ("." in w or w.endswith("()") or (w[0].isupper() and not w.isupper()))
    ]
    assert names
    assert {n: SOURCE.missing(n) for n in names if SOURCE.missing(n)} == {}


def test_the_check_finds_a_name_that_is_gone():
    assert SOURCE.missing("Agent.check_thread") is None
    assert SOURCE.missing("LoomMagics.loom_cell") is None
    assert SOURCE.missing("LoomMagics.loom") == "LoomMagics has no loom"
    assert SOURCE.missing("_loop_thread.run_sync") is None
    assert SOURCE.missing("_loop_thread.run_soon") == "loom_nb._loop_thread has no run_soon"
    assert SOURCE.missing("agent.thread") is None and SOURCE.missing("thread.pages") is not None
    assert SOURCE.missing("store_from_env()") is None
    assert SOURCE.missing("store_from_url()") == "not defined anywhere"
    assert path_missing("DESIGN.md") and not path_missing("notebook/_help.py")


def test_no_page_refers_to_a_file_outside_the_repository():
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#]+)", doc.read_text(encoding="utf-8")):
            if not target.startswith("http"):
                assert (doc.parent / target).exists(), (doc.name, target)
