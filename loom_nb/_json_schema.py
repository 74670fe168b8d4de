"""JSON Schema checks for tool arguments, without the ``jsonschema`` package.

Importing ``jsonschema`` in a Jupyter environment costs most of a second (it builds the format
grammars of its extras), which the first ``define_agent`` paid. Tool schemas use a small part
of JSON Schema (draft 2020-12), checked here with the messages ``jsonschema`` writes, which
are what the model reads when its arguments do not fit:

- ``type``, ``enum``, ``const``, ``properties``, ``required``, ``additionalProperties``,
  ``patternProperties``, ``propertyNames``, ``minProperties``/``maxProperties``,
  ``dependentRequired``, ``items``, ``prefixItems``, ``minItems``/``maxItems``,
  ``uniqueItems``, ``contains`` (with ``minContains``/``maxContains``), ``minLength``/
  ``maxLength``, ``pattern``, ``minimum``/``maximum``, ``exclusiveMinimum``/
  ``exclusiveMaximum``, ``multipleOf``, ``allOf``/``anyOf``/``oneOf``/``not``,
  ``if``/``then``/``else``, ``$ref`` to ``#...`` in the same schema (``$defs``,
  ``definitions``), and ``true``/``false`` schemas;
- annotations (``title``, ``description``, ``default``, ``format``, ...) and keywords JSON
  Schema does not define are ignored, as ``jsonschema`` ignores them;
- a schema that uses a keyword of the rest (``unevaluatedProperties``, ``$dynamicRef``, a
  remote ``$ref``, ...) is refused when the tool is made, rather than checked loosely.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

__all__ = ["Issue", "SchemaError", "Validator"]

Path = tuple[str | int, ...]


class Issue(NamedTuple):
    """One way an instance does not fit, as jsonschema reports it."""

    #: Where in the instance (keys and indexes from its root).
    path: Path
    message: str
    #: The keyword that failed ("type", "enum", ...).
    keyword: str
    #: For a failed anyOf/oneOf: the issues of each alternative (paths from the root too).
    context: tuple[Issue, ...] = ()
    #: The (sub)schema whose keyword failed, for a "type" or "enum" issue: what was expected.
    schema: Any = None


Errors = Iterator[Issue]

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}

#: Keywords of JSON Schema this module does not check.
_UNSUPPORTED = ("unevaluatedProperties", "unevaluatedItems", "dependentSchemas", "$dynamicRef")


class SchemaError(Exception):
    """The schema itself is not valid (or uses what is not checked here)."""


class Validator:
    """Checks instances against one schema, checked itself when made."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        _check(schema, schema, ())

    def iter_errors(self, instance: Any) -> Errors:
        """``(path, message)`` for each way ``instance`` does not fit."""
        return self._errors(instance, self.schema, ())

    def is_valid(self, instance: Any, schema: Any) -> bool:
        return next(self._errors(instance, schema, ()), None) is None

    def _errors(self, v: Any, s: Any, path: Path) -> Errors:
        if s is True:
            return
        if s is False:
            yield Issue(path, f"False schema does not allow {v!r}", "false")
            return
        for key, arg in s.items():
            if key == "$ref":
                yield from self._errors(v, self._resolve(arg), path)
            elif key == "type":
                types = [arg] if isinstance(arg, str) else arg
                if not any(_TYPES[t](v) for t in types):
                    message = f"{v!r} is not of type {', '.join(repr(t) for t in types)}"
                    yield Issue(path, message, key, (), s)
            elif key == "enum":
                if all(not _equal(each, v) for each in arg):
                    yield Issue(path, f"{v!r} is not one of {arg!r}", key, (), s)
            elif key == "const":
                if not _equal(v, arg):
                    yield Issue(path, f"{arg!r} was expected", key)
            elif key in ("allOf", "anyOf", "oneOf", "not", "if"):
                yield from self._combined(key, arg, v, s, path)
            elif isinstance(v, dict):
                yield from self._object(key, arg, v, s, path)
            elif isinstance(v, list):
                yield from self._array(key, arg, v, s, path)
            elif isinstance(v, str):
                yield from _string(key, arg, v, path)
            elif _TYPES["number"](v):
                yield from _number(key, arg, v, path)

    def _combined(self, key: str, arg: Any, v: Any, s: Mapping[str, Any], path: Path) -> Errors:
        if key == "allOf":
            for sub in arg:
                yield from self._errors(v, sub, path)
        elif key in ("anyOf", "oneOf"):
            # Each alternative in turn until one fits; if none does, what each found.
            found: list[Issue] = []
            first = None
            for i, sub in enumerate(arg):
                issues = list(self._errors(v, sub, path))
                if not issues:
                    first = i
                    break
                found += issues
            if first is None:
                message = f"{v!r} is not valid under any of the given schemas"
                yield Issue(path, message, key, tuple(found))
            elif key == "oneOf":
                more = [sub for sub in arg[first + 1 :] if self.is_valid(v, sub)]
                if more:
                    reprs = ", ".join(repr(sub) for sub in [*more, arg[first]])
                    yield Issue(path, f"{v!r} is valid under each of {reprs}", key)
        elif key == "not":
            if self.is_valid(v, arg):
                yield Issue(path, f"{v!r} should not be valid under {arg!r}", key)
        elif self.is_valid(v, arg):  # if / then / else
            if "then" in s:
                yield from self._errors(v, s["then"], path)
        elif "else" in s:
            yield from self._errors(v, s["else"], path)

    def _object(
        self, key: str, arg: Any, v: dict[str, Any], s: Mapping[str, Any], path: Path
    ) -> Errors:
        if key == "properties":
            for name, sub in arg.items():
                if name in v:
                    yield from self._errors(v[name], sub, (*path, name))
        elif key == "patternProperties":
            for pattern, sub in arg.items():
                for name, item in v.items():
                    if re.search(pattern, name):
                        yield from self._errors(item, sub, (*path, name))
        elif key == "additionalProperties":
            extras = [k for k in v if not _declared(k, s)]
            if isinstance(arg, dict):
                for name in extras:
                    yield from self._errors(v[name], arg, (*path, name))
            elif not arg and extras:
                if "patternProperties" in s:
                    verb = "does" if len(extras) == 1 else "do"
                    joined = ", ".join(repr(e) for e in sorted(extras))
                    patterns = ", ".join(repr(p) for p in sorted(s["patternProperties"]))
                    yield Issue(
                        path, f"{joined} {verb} not match any of the regexes: {patterns}", key
                    )
                else:
                    names = sorted(extras, key=str)
                    verb = "was" if len(names) == 1 else "were"
                    listed = ", ".join(repr(n) for n in names)
                    message = f"Additional properties are not allowed ({listed} {verb} unexpected)"
                    yield Issue(path, message, key)
        elif key == "propertyNames":
            for name in v:
                yield from self._errors(name, arg, path)
        elif key == "required":
            for name in arg:
                if name not in v:
                    yield Issue(path, f"{name!r} is a required property", key)
        elif key == "minProperties" and len(v) < arg:
            message = "should be non-empty" if arg == 1 else "does not have enough properties"
            yield Issue(path, f"{v!r} {message}", key)
        elif key == "maxProperties" and len(v) > arg:
            message = "is expected to be empty" if arg == 0 else "has too many properties"
            yield Issue(path, f"{v!r} {message}", key)
        elif key == "dependentRequired":
            for name, needed in arg.items():
                if name in v:
                    for each in needed:
                        if each not in v:
                            yield Issue(path, f"{each!r} is a dependency of {name!r}", key)

    def _array(self, key: str, arg: Any, v: list[Any], s: Mapping[str, Any], path: Path) -> Errors:
        if key == "items":
            prefix = len(s.get("prefixItems", []))
            extra = len(v) - prefix
            if extra <= 0:
                return
            if arg is False:
                rest = v[prefix:] if extra != 1 else v[prefix]
                item = "items" if prefix != 1 else "item"
                yield Issue(
                    path, f"Expected at most {prefix} {item} but found {extra} extra: {rest!r}", key
                )
            else:
                for i in range(prefix, len(v)):
                    yield from self._errors(v[i], arg, (*path, i))
        elif key == "prefixItems":
            for i, (item, sub) in enumerate(zip(v, arg, strict=False)):
                yield from self._errors(item, sub, (*path, i))
        elif key == "minItems" and len(v) < arg:
            yield Issue(path, f"{v!r} {'should be non-empty' if arg == 1 else 'is too short'}", key)
        elif key == "maxItems" and len(v) > arg:
            yield Issue(
                path, f"{v!r} {'is expected to be empty' if arg == 0 else 'is too long'}", key
            )
        elif key == "uniqueItems" and arg and not _unique(v):
            yield Issue(path, f"{v!r} has non-unique elements", key)
        elif key == "contains":
            yield from self._contains(arg, v, s, path)

    def _contains(self, arg: Any, v: list[Any], s: Mapping[str, Any], path: Path) -> Errors:
        least, most = s.get("minContains", 1), s.get("maxContains", len(v))
        matches = 0
        for each in v:
            if self.is_valid(each, arg):
                matches += 1
                if matches > most:
                    message = f"Too many items match the given schema (expected at most {most})"
                    yield Issue(path, message, "maxContains")
                    return
        if matches < least:
            if not matches:
                message = f"{v!r} does not contain items matching the given schema"
                yield Issue(path, message, "contains")
            else:
                message = (
                    "Too few items match the given schema (expected at least "
                    f"{least} but only {matches} matched)"
                )
                yield Issue(path, message, "minContains")

    def _resolve(self, ref: str) -> Any:
        return _pointer(self.schema, ref)


def _string(key: str, arg: Any, v: str, path: Path) -> Errors:
    if key == "minLength" and len(v) < arg:
        yield Issue(path, f"{v!r} {'should be non-empty' if arg == 1 else 'is too short'}", key)
    elif key == "maxLength" and len(v) > arg:
        yield Issue(path, f"{v!r} {'is expected to be empty' if arg == 0 else 'is too long'}", key)
    elif key == "pattern" and not re.search(arg, v):
        yield Issue(path, f"{v!r} does not match {arg!r}", key)


def _number(key: str, arg: Any, v: float, path: Path) -> Errors:
    if key == "minimum" and v < arg:
        yield Issue(path, f"{v!r} is less than the minimum of {arg!r}", key)
    elif key == "maximum" and v > arg:
        yield Issue(path, f"{v!r} is greater than the maximum of {arg!r}", key)
    elif key == "exclusiveMinimum" and v <= arg:
        yield Issue(path, f"{v!r} is less than or equal to the minimum of {arg!r}", key)
    elif key == "exclusiveMaximum" and v >= arg:
        yield Issue(path, f"{v!r} is greater than or equal to the maximum of {arg!r}", key)
    elif key == "multipleOf":
        if isinstance(arg, float):
            try:
                failed = int(v / arg) != v / arg
            except OverflowError:
                from fractions import Fraction  # rare, and it imports decimal

                failed = (Fraction(v) / Fraction(arg)).denominator != 1
        else:
            failed = bool(v % arg)
        if failed:
            yield Issue(path, f"{v!r} is not a multiple of {arg}", key)


def _declared(name: str, s: Mapping[str, Any]) -> bool:
    if name in s.get("properties", {}):
        return True
    patterns = "|".join(s.get("patternProperties", {}))
    return bool(patterns) and re.search(patterns, name) is not None


def _plain(value: Any) -> Any:
    """``value`` with booleans apart from 1 and 0, as JSON compares them."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, list):
        return ("list", tuple(_plain(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted(((k, _plain(v)) for k, v in value.items()), key=repr)))
    return value


def _equal(one: Any, two: Any) -> bool:
    return bool(_plain(one) == _plain(two))


def _unique(items: list[Any]) -> bool:
    seen: list[Any] = []
    for item in items:
        plain = _plain(item)
        if plain in seen:
            return False
        seen.append(plain)
    return True


# ---- checking the schema itself --------------------------------------------------------------

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    "additionalProperties",
    "propertyNames",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
)
_COUNTS = (
    "minProperties",
    "maxProperties",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minContains",
    "maxContains",
)
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def _check(s: Any, root: Any, at: Path) -> None:
    where = "/".join(map(str, at)) or "the schema"
    if isinstance(s, bool):
        return
    if not isinstance(s, dict):
        raise SchemaError(f"{s!r} is not of type 'object', 'boolean' (at {where})")
    for key, arg in s.items():
        here = (*at, key)
        if key in _UNSUPPORTED:
            raise SchemaError(f"{key!r} is not supported by loom_nb's checks (at {where})")
        if key == "type":
            types = [arg] if isinstance(arg, str) else arg
            if not isinstance(types, list) or not types or any(t not in _TYPES for t in types):
                raise SchemaError(f"{arg!r} is not a JSON Schema type (at {where})")
        elif key == "$ref":
            if not isinstance(arg, str) or not arg.startswith("#"):
                raise SchemaError(f"$ref {arg!r}: only refs within the schema (#...) are supported")
            try:
                _pointer(root, arg)
            except (KeyError, IndexError, ValueError, TypeError):
                raise SchemaError(f"$ref {arg!r} points at nothing in the schema") from None
        elif key in _SCHEMA_MAPS:
            if not isinstance(arg, dict):
                raise SchemaError(f"{key} must be an object of schemas (at {where})")
            for name, sub in arg.items():
                if key == "patternProperties":
                    _check_pattern(name, where)
                _check(sub, root, (*here, name))
        elif key in _SCHEMA_LISTS:
            if not isinstance(arg, list) or (key != "prefixItems" and not arg):
                raise SchemaError(f"{key} must be a non-empty array of schemas (at {where})")
            for i, sub in enumerate(arg):
                _check(sub, root, (*here, i))
        elif key in _SCHEMA_ONE:
            _check(arg, root, here)
        elif key in _COUNTS:
            if not isinstance(arg, int) or isinstance(arg, bool) or arg < 0:
                raise SchemaError(f"{key} must be a non-negative integer, not {arg!r}")
        elif key in _NUMBERS:
            if not _TYPES["number"](arg) or (key == "multipleOf" and arg <= 0):
                raise SchemaError(f"{key} must be a number, not {arg!r}")
        elif key == "required":
            if not isinstance(arg, list) or not all(isinstance(n, str) for n in arg):
                raise SchemaError(f"required must be an array of names, not {arg!r}")
        elif key == "enum":
            if not isinstance(arg, list):
                raise SchemaError(f"enum must be an array, not {arg!r}")
        elif key == "pattern":
            _check_pattern(arg, where)
        elif key == "uniqueItems":
            if not isinstance(arg, bool):
                raise SchemaError(f"uniqueItems must be true or false, not {arg!r}")
        elif key == "dependentRequired" and not (
            isinstance(arg, dict)
            and all(
                isinstance(v, list) and all(isinstance(n, str) for n in v) for v in arg.values()
            )
        ):
            raise SchemaError(f"dependentRequired must map names to arrays of names, not {arg!r}")


def _check_pattern(pattern: Any, where: str) -> None:
    try:
        re.compile(pattern)
    except (re.error, TypeError):
        raise SchemaError(f"{pattern!r} is not a regular expression (at {where})") from None


def _pointer(root: Any, ref: str) -> Any:
    """What ``ref`` (``#`` then a JSON pointer) names in ``root``."""
    found: Any = root
    for token in ref[1:].lstrip("/").split("/") if ref != "#" else []:
        token = token.replace("~1", "/").replace("~0", "~")
        found = found[int(token)] if isinstance(found, list) else found[token]
    return found
