"""``{name}`` interpolation for ``%%loom`` cells that leaves code and JSON alone.

Only ``{identifier}`` or ``{identifier.attr}`` is replaced, and only when the name exists in
the user's namespace (and the attribute can be read). Everything else stays as written:
``{"a": 1}``, ``{x + 1}``, ``{unknown}``, ``{ spaced }``. ``{{name}}`` keeps ``{name}`` as it
is, for text that must name a variable literally.

What stays as written but looks meant to be replaced is reported (:func:`unreplaced`), so the
cell is still sent as written and the person knows: an unknown name, an attribute that cannot
be read, an expression over their variables (expressions are never evaluated).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

_NAME = r"[^\W\d]\w*(?:\.[^\W\d]\w*)?"
_PATTERN = re.compile(r"\{\{(" + _NAME + r")\}\}|\{(" + _NAME + r")\}")
#: A brace pair with no brace inside, not part of ``{{...}}``.
_GROUP = re.compile(r"(?<!\{)\{([^{}]+)\}(?!\})")


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """``text`` with each ``{name}`` / ``{name.attr}`` found in ``namespace`` replaced."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return "{" + match.group(1) + "}"
        value = _lookup(match.group(2), namespace)
        return match.group(0) if value is _MISSING else str(value)

    return _PATTERN.sub(replace, text)


def unreplaced(text: str, namespace: Mapping[str, Any]) -> str | None:
    """One line naming what :func:`interpolate` left as written though it looks meant for it,
    or None. Code and JSON in braces (``{"a": 1}``, ``{k: v for ...}``) are not named."""
    unknown: list[str] = []
    expressions: list[str] = []
    for match in _GROUP.finditer(text):
        inner = match.group(1)
        if re.fullmatch(_NAME, inner):
            name, _, attr = inner.partition(".")
            if name not in namespace:
                unknown.append(f"{{{inner}}} (no variable {name!r})")
            elif _lookup(inner, namespace) is _MISSING:
                unknown.append(f"{{{inner}}} ({name} has no attribute {attr!r})")
        elif _is_expression_over(inner, namespace):
            expressions.append(f"{{{inner.strip()}}}")
    if not unknown and not expressions:
        return None
    parts = []
    if unknown:
        parts.append(", ".join(unknown))
    if expressions:
        parts.append(
            f"{', '.join(expressions)} (expressions in braces are not evaluated: put the value "
            "in a variable and write {name})"
        )
    return (
        f"⚠ sent as written: {'; '.join(parts)}. Write {{{{...}}}} to keep braces without this "
        "note, or use --raw"
    )


_MISSING = object()


def _lookup(dotted: str, namespace: Mapping[str, Any]) -> Any:
    name, _, attr = dotted.partition(".")
    if name not in namespace:
        return _MISSING
    value = namespace[name]
    if attr:
        try:
            return getattr(value, attr)
        except Exception:
            return _MISSING
    return value


def _is_expression_over(source: str, namespace: Mapping[str, Any]) -> bool:
    """Whether ``source`` is a Python expression (not a dict, set or tuple of literals) that
    reads a variable of ``namespace``, like ``threshold * 2``."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return False
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return any(n in namespace for n in names)
