"""Every public function and class has a docstring, and so do the public methods of the
classes loom_nb defines; the reference a user reads with help() is never empty."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator

import pytest

PUBLIC_MODULES = [
    "loom_nb",
    "loom_nb.sqlite",
    "loom_nb.postgres",
    "loom_nb.supabase",
    "loom_nb.frames",
    "loom_nb.charts",
    "loom_nb.models",
    "loom_nb.models.openai",
    "loom_nb.models.anthropic",
    "loom_nb.models.testing",
    "loom_nb.notebook",
]


def _public_objects() -> Iterator[tuple[str, object]]:
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue  # constants and type aliases
            yield f"{module_name}.{name}", obj
            if inspect.isclass(obj) and obj.__module__.startswith("loom_nb"):
                for attr, member in vars(obj).items():
                    if attr.startswith("_"):
                        continue
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    if isinstance(member, property):
                        member = member.fget
                    if inspect.isfunction(member):
                        yield f"{module_name}.{name}.{attr}", member


def _doc(obj: object) -> str:
    if inspect.isclass(obj):
        # its own docstring, not a base class's nor the signature @dataclass writes in its place
        doc = vars(obj).get("__doc__") or ""
        return "" if doc.startswith(f"{obj.__name__}(") else doc.strip()
    return (inspect.getdoc(obj) or "").strip()  # a method may say it once, in its base class


def _missing() -> list[str]:
    return sorted({name for name, obj in _public_objects() if not _doc(obj)})


def test_every_public_function_class_and_method_has_a_docstring() -> None:
    assert _missing() == []


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_each_public_module_is_covered(module_name: str) -> None:
    assert importlib.import_module(module_name).__all__
