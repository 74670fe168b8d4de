"""The package's promises: a public surface that is exactly ``__all__``, names that show the
path to import them from, one version, and type information."""

from __future__ import annotations

import importlib
import inspect
import pickle
import typing
from pathlib import Path
from types import ModuleType

import pydantic
import pytest

import loom_nb
import loom_nb.models

ROOT = Path(__file__).resolve().parents[1]
EXPORTS = [getattr(loom_nb, name) for name in loom_nb.__all__]


def public_names(module: ModuleType) -> list[str]:
    """What a user sees in ``dir(module)``: no underscore names, no submodules."""
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    )


def defined_in(module: ModuleType, obj: object) -> bool:
    return getattr(obj, "__module__", None) == module.__name__


def test_all_is_every_public_name_sorted():
    assert loom_nb.__all__ == public_names(loom_nb)


def test_the_names_custom_models_and_tools_need_are_exported():
    for name in ["ModelRequest", "ToolInputError", "Model", "TextDelta", "ToolOutput", "tool"]:
        assert name in loom_nb.__all__


@pytest.mark.parametrize("module", [loom_nb, loom_nb.models])
def test_exports_live_in_a_public_module_that_finds_them_by_name(module):
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # a type alias (RunEvent) has no module of its own
        home = obj.__module__
        assert not any(part.startswith("_") for part in home.split(".")), (name, home)
        # pickle and reprs find the object again by module and qualified name
        assert getattr(importlib.import_module(home), obj.__qualname__) is obj, name


def test_every_public_class_and_function_of_loom_nb_models_is_exported():
    mine = [
        n
        for n in public_names(loom_nb.models)
        if defined_in(loom_nb.models, vars(loom_nb.models)[n])
    ]
    assert set(mine) <= set(loom_nb.models.__all__)


def test_tracebacks_and_reprs_name_loom_nb():
    with pytest.raises(loom_nb.UserError, match="prompt is empty") as caught:
        loom_nb.define_agent(name="a", model=loom_nb.ReplayModel([])).run_sync(" ")
    assert caught.exconly().startswith("loom_nb.UserError: the prompt is empty")
    assert repr(loom_nb.Decision(True)) == "Decision(approve=True, digest=None)"


def test_exports_still_pickle_and_resolve_their_type_hints():
    message = loom_nb.Message.user("hi")
    assert pickle.loads(pickle.dumps(message)) == message
    error = pickle.loads(pickle.dumps(loom_nb.ThreadNotFound("gone")))
    assert type(error) is loom_nb.ThreadNotFound and str(error) == "gone"
    for obj in EXPORTS:
        if inspect.isclass(obj) or inspect.isfunction(obj):
            typing.get_type_hints(obj)  # annotations resolve although __module__ changed
    # pydantic reads the same annotations, e.g. for a tool parameter typed with a loom_nb class
    usage = pydantic.TypeAdapter(loom_nb.Usage).validate_python({"input_tokens": 3})
    assert usage == loom_nb.Usage(input_tokens=3)


def test_the_version_is_written_once():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python 3.11+")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    source = ROOT / project["tool"]["hatch"]["version"]["path"]
    assert f'__version__ = "{loom_nb.__version__}"' in source.read_text(encoding="utf-8")


def test_the_package_ships_type_information():
    from importlib.resources import files

    assert files("loom_nb").joinpath("py.typed").is_file()
