"""The DataFrames of the user's namespace, when ``frame_tools(namespace=...)`` opts in: by
variable name, read-only, listed afresh for each run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from loom_nb._errors import UserError
from loom_nb._tables.options import IDENTIFIER, RESERVED

#: At most this many of the namespace's DataFrames are listed (and usable), by name.
NAMESPACE_FRAMES = 20

Namespace = Callable[[], Mapping[str, Any]]


def namespace_source(namespace: Any) -> Namespace | None:
    """``namespace=``: False (off), True (IPython's user namespace), or a mapping read live
    (``globals()`` in a script)."""
    if namespace is False or namespace is None:
        return None
    if namespace is True:
        from IPython import get_ipython

        shell = get_ipython()  # type: ignore[no-untyped-call]
        if shell is None:
            raise UserError(
                "frame_tools(namespace=True) reads IPython's namespace, and this is not IPython; "
                "in a script pass the mapping to read: frame_tools(namespace=globals())"
            )
        return lambda: shell.user_ns  # type: ignore[no-any-return]
    if isinstance(namespace, Mapping):
        return lambda: namespace
    raise UserError(
        "namespace= takes True (the notebook's variables) or a mapping such as globals(), "
        f"got {type(namespace).__name__}"
    )


def namespace_frames(
    namespace: Mapping[str, Any], taken: Mapping[str, Any]
) -> tuple[dict[str, pd.DataFrame], int]:
    """The DataFrames ``namespace`` holds under plain names (not starting with ``_``, not
    already in ``taken``), the first :data:`NAMESPACE_FRAMES` by name; and how many more there
    were."""
    found = sorted(
        name
        for name, value in list(namespace.items())
        if isinstance(value, pd.DataFrame)
        and isinstance(name, str)
        and not name.startswith("_")
        and IDENTIFIER.match(name)
        and name.lower() not in RESERVED
        and name not in taken
        and value.columns.is_unique
    )
    listed = found[:NAMESPACE_FRAMES]
    return {name: namespace[name] for name in listed}, len(found) - len(listed)
