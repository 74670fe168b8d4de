"""``{name}`` interpolation for ``%%loom`` cells that leaves code and JSON alone.

Only ``{identifier}`` or ``{identifier.attr}`` is replaced, and only when the name exists in
the user's namespace (and the attribute can be read). Everything else stays as written:
``{"a": 1}``, ``{x + 1}``, ``{unknown}``, ``{ spaced }``. ``{{name}}`` keeps ``{name}`` as it
is, for text that must name a variable literally.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_NAME = r"[^\W\d]\w*(?:\.[^\W\d]\w*)?"
_PATTERN = re.compile(r"\{\{(" + _NAME + r")\}\}|\{(" + _NAME + r")\}")


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """``text`` with each ``{name}`` / ``{name.attr}`` found in ``namespace`` replaced."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return "{" + match.group(1) + "}"
        name, _, attr = match.group(2).partition(".")
        if name not in namespace:
            return match.group(0)
        value = namespace[name]
        if attr:
            try:
                value = getattr(value, attr)
            except Exception:
                return match.group(0)
        return str(value)

    return _PATTERN.sub(replace, text)
