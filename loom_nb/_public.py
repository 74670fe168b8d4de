"""Public names carry the name of the module users import them from, as httpx's do.

``Agent`` is defined in ``loom_nb._agent``; once :func:`publish` sets its ``__module__`` to
``"loom_nb"``, reprs, tracebacks, docs and pickles say ``loom_nb.Agent``, the path that stays.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Iterable

__all__ = ["is_private_module", "publish"]


def publish(module: str, objects: Iterable[object]) -> None:
    """Give the classes and functions among ``objects`` that a private module defined the
    public ``module`` as their ``__module__``. Type aliases (``RunEvent``) have no module of
    their own and are left alone."""
    for obj in objects:
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not is_private_module(obj.__module__):
            continue
        if inspect.isclass(obj):
            _resolve_annotations(obj)
        obj.__module__ = module


def is_private_module(module: str) -> bool:
    """``loom_nb._agent`` and ``loom_nb.sqlite._rows`` are private; ``loom_nb.models`` is not."""
    return any(part.startswith("_") for part in module.split("."))


def _resolve_annotations(cls: type) -> None:
    # Under ``from __future__ import annotations`` a class's annotations are strings that
    # typing.get_type_hints and pydantic evaluate in ``sys.modules[cls.__module__]``. Evaluate
    # them now, while that is still the defining module, so they resolve after the rename too.
    own = inspect.get_annotations(cls)
    if not own:
        return
    hints = typing.get_type_hints(cls, include_extras=True)
    resolved = {name: hints[name] for name in own}
    cls.__annotations__ = resolved
    fields: dict[str, dataclasses.Field[typing.Any]] = cls.__dict__.get("__dataclass_fields__", {})
    for name, f in fields.items():
        if name in resolved:
            f.type = resolved[name]
