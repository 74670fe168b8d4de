"""``MODULE`` or ``MODULE:NAME``, the way a command line names an object of the user's (``python
-m loom_nb.mcp``, ``python -m loom_nb.http``), as ``python -m`` and uvicorn read it.

The one place loom_nb imports a module by a computed name: the user's, never one of loom_nb's own
(``tests/test_imports.py`` reads every import of the package, and could not see such a one).
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any

from loom_nb._errors import UserError


def user_object(target: str) -> tuple[ModuleType, Any]:
    """The module ``target`` names and the object after its ``:`` (dotted attributes allowed),
    or ``None`` when it names only a module. The current folder is importable, as it is for
    ``python -m``."""
    module_name, sep, attribute = target.partition(":")
    if not module_name or (sep and not attribute):
        raise UserError(f"{target!r}: name it as MODULE or MODULE:NAME, e.g. served:server")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import {module_name!r}: {exc}") from None
    if not attribute:
        return module, None
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise UserError(f"module {module_name!r} has no {attribute!r}")
        value = getattr(value, part)
    return module, value
