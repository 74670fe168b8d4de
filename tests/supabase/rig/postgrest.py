"""How PostgREST reads a request, written out from its own source (PostgREST v12.2 to v14,
``src/library/PostgREST/``); each function names the Haskell function it follows.

The shim builds its SQL from these readings, and the connector's request-capture tests read
what a real supabase-py client sent through them: a captured request means what the real
server would make of it, not what it looks like. Only the grammar the connector can emit is
covered; anything else raises :class:`Outside`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes


class Outside(Exception):
    """Outside the subset this module reads (the shim answers it with a 400)."""


class PostgrestError(Exception):
    """An error the real PostgREST answers with: its status, code, message and details."""

    def __init__(self, status: int, code: str, message: str, details: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.details = status, code, details


# ---- the query string ------------------------------------------------------------------------


def parse_query(raw: str) -> list[tuple[str, str | None]]:
    """``QueryParams.parse`` reads the query with http-types' ``parseQueryReplacePlus True``:
    pairs split on ``&`` and ``;``, ``+`` is a space, ``%XX`` decoded; a pair without ``=``
    has no value (and ``nonemptyParams`` then drops it)."""
    pairs: list[tuple[str, str | None]] = []
    for piece in re.split(r"[&;]", raw):
        if not piece:
            continue
        key, eq, value = piece.partition("=")
        pairs.append((_url_decode(key), _url_decode(value) if eq else None))
    return pairs


def _url_decode(text: str) -> str:
    # http-types' urlDecode True, then T.decodeUtf8
    return unquote_to_bytes(text.replace("+", " ")).decode("utf-8", "replace")


# ---- one filter: pOpExpr ---------------------------------------------------------------------

#: ``quantOperator`` and ``simpleOperator``, as far as the subset goes (no quantifiers).
SINGLE_OPERATORS = ("eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike")
IS_VALUES = ("null", "not_null", "true", "false", "unknown")


@dataclass(frozen=True)
class OpExpr:
    """``OpExpr hasNot operation``: the operator, and its value as PostgREST holds it: the
    text after ``op.`` (``pSingleVal``), the items of an ``in`` list (``pListVal``), or the
    ``is`` keyword (``pIsVal``)."""

    negate: bool
    op: str
    value: str | tuple[str, ...]


def parse_op_expr(raw: str) -> OpExpr:
    """``pOpExpr pSingleVal``: ``[not.]op.value``. Parsec's ``parse`` does not ask for the end
    of input, so text after an ``in`` list or an ``is`` keyword is ignored, as there."""
    negate = raw.startswith("not.")
    rest = raw[4:] if negate else raw
    op, dot, value = rest.partition(".")
    if not dot:
        raise PostgrestError(400, "PGRST100", f'"failed to parse filter ({raw})"')
    if op == "in":
        return OpExpr(negate, "in", parse_list_val(value, raw))
    if op == "is":
        for name in IS_VALUES:  # pIsVal tries them in this order; ciString: either case
            head = value[: len(name)]
            if len(head) == len(name) and all(
                h in (c, c.upper()) for h, c in zip(head, name, strict=True)
            ):
                return OpExpr(negate, "is", name)
        raise PostgrestError(400, "PGRST100", f'"failed to parse filter ({raw})"')
    if op in SINGLE_OPERATORS:
        return OpExpr(negate, op, value)  # pSingleVal = many anyChar: verbatim
    raise Outside(f"operator {op!r} in {raw!r}")


def parse_list_val(text: str, raw: str) -> tuple[str, ...]:
    """``pListVal = lexeme (char '(') *> pListElement `sepBy1` char ',' <* lexeme (char ')')``.

    ``lexeme`` skips spaces and tabs around the parentheses; ``pListElement`` is a quoted value
    (``pQuotedValue``: backslash escapes the next character) when a ``,`` or ``)`` follows
    its closing quote, else the text up to the next ``,`` or ``)`` taken as it is. So ``()``
    is the list of one empty item, ``[""]``."""
    i = _skip_blanks(text, 0)
    if text[i : i + 1] != "(":
        raise PostgrestError(400, "PGRST100", f'"failed to parse filter ({raw})"')
    i += 1
    i = _skip_blanks(text, i)
    items = []
    while True:
        item, i = _list_element(text, i)
        items.append(item)
        if text[i : i + 1] == ",":
            i += 1
            continue
        i = _skip_blanks(text, i)
        if text[i : i + 1] != ")":
            raise PostgrestError(400, "PGRST100", f'"failed to parse filter ({raw})"')
        return tuple(items)


def _list_element(text: str, i: int) -> tuple[str, int]:
    if text[i : i + 1] == '"':  # try (pQuotedValue <* notFollowedBy (noneOf ",)"))
        out, j = [], i + 1
        while j < len(text) and text[j] != '"':
            if text[j] == "\\":
                j += 1
                if j == len(text):
                    break
            out.append(text[j])
            j += 1
        if j < len(text) and text[j + 1 : j + 2] in ("", ",", ")"):
            return "".join(out), j + 1
    j = i  # many (noneOf ",)")
    while j < len(text) and text[j] not in ",)":
        j += 1
    return text[i:j], j


def _skip_blanks(text: str, i: int) -> int:
    while text[i : i + 1] in (" ", "\t"):  # ws = many (oneOf " \t")
        i += 1
    return i


# ---- what a filter means: pgFmtFilter ----------------------------------------------------------


@dataclass(frozen=True)
class Meaning:
    """What ``pgFmtFilter`` makes of one filter: the SQL operator and the values PostgreSQL
    receives (``None`` for ``in`` on the empty list, which matches no row)."""

    negate: bool
    op: str
    values: tuple[str, ...] | None


def meaning(expr: OpExpr) -> Meaning:
    """``pgFmtFilter``: like/ilike map every ``*`` to ``%`` (``star``); ``In [""]`` is
    ``= ANY('{}')``, the empty list; other ``in`` items go through ``pgBuildArrayLiteral``,
    which cuts each at its first NUL (``trimNullChars``). Single values are sent as they are
    (``unknownLiteral``): PostgreSQL refuses a NUL in them."""
    if expr.op == "is":
        assert isinstance(expr.value, str)
        return Meaning(expr.negate, "is", (expr.value,))
    if expr.op == "in":
        items = expr.value
        assert isinstance(items, tuple)
        if items == ("",):
            return Meaning(expr.negate, "in", None)
        return Meaning(expr.negate, "in", tuple(trim_null_chars(v) for v in items))
    assert isinstance(expr.value, str)
    if expr.op in ("like", "ilike"):
        return Meaning(expr.negate, expr.op, (expr.value.replace("*", "%"),))
    return Meaning(expr.negate, expr.op, (expr.value,))


def trim_null_chars(text: str) -> str:
    """``trimNullChars = T.takeWhile (/= '\\x0')`` (SchemaCache/Identifiers.hs)."""
    return text.split("\x00", 1)[0]


# ---- Prefer: Preferences.fromHeaders ---------------------------------------------------------

ACCEPTED = {
    "resolution": ("merge-duplicates", "ignore-duplicates"),
    "return": ("representation", "minimal", "headers-only"),
    "count": ("exact", "planned", "estimated"),
    "tx": ("commit", "rollback"),
    "missing": ("default", "null"),
    "handling": ("strict", "lenient"),
}


@dataclass
class Preferences:
    """``Preferences``: the first value of each kind wins; unknown ones are ``invalidPrefs``."""

    values: dict[str, str]
    max_affected: int | None
    invalid: list[str]

    @property
    def strict(self) -> bool:
        return self.values.get("handling") == "strict"

    def check_invalid(self) -> None:
        """``Plan.mutateReadPlan`` / ``wrappedReadPlan``: with ``handling=strict`` an invalid
        preference fails the request (PGRST122); otherwise it is ignored."""
        if self.invalid and self.strict:
            raise PostgrestError(
                400,
                "PGRST122",
                "Invalid preferences given with handling=strict",
                "Invalid preferences: " + ", ".join(self.invalid),
            )

    def applied(self, *, max_affected_applies: bool) -> str | None:
        """``prefAppliedHeader``: what ``Preference-Applied`` echoes, in its order
        (``max-affected`` only with ``handling=strict``, and only for an update)."""
        order = ("resolution", "missing", "return", "count", "tx", "handling")
        out = [f"{k}={self.values[k]}" for k in order if k in self.values]
        if self.strict and self.max_affected is not None and max_affected_applies:
            out.append(f"max-affected={self.max_affected}")
        return ", ".join(out) or None


def parse_prefer(headers: list[str]) -> Preferences:
    """``fromHeaders``: every ``Prefer`` header split on commas, each item stripped. A
    ``max-affected=`` that is not an integer is read as absent (``readMaybe``), not invalid."""
    items = [p.strip() for header in headers for p in header.split(",")]
    values: dict[str, str] = {}
    max_affected: int | None = None
    max_affected_seen = False
    invalid = []
    for item in items:
        name, _, value = item.partition("=")
        if name in ACCEPTED and value in ACCEPTED[name]:
            values.setdefault(name, value)
        elif name == "max-affected":
            if not max_affected_seen:
                max_affected_seen = True
                max_affected = int(value) if re.fullmatch(r"-?\d+", value) else None
        elif name != "timezone":
            invalid.append(item)
    return Preferences(values, max_affected, invalid)


def fail_exceeds_max_affected(prefs: Preferences, affected: int) -> None:
    """``MainTx.failExceedsMaxAffectedPref``: with ``handling=strict``, an update that touches
    more rows than ``max-affected`` is rolled back (``SQL.condemn``) and fails (PGRST124)."""
    if prefs.max_affected is not None and prefs.strict and affected > prefs.max_affected:
        raise PostgrestError(
            400,
            "PGRST124",
            "Query result exceeds max-affected preference constraint",
            f"The query affects {affected} rows",
        )


# ---- limit and offset: QueryParams.ranges, ApiRequest.getRanges, RangeQuery ---------------------


@dataclass(frozen=True)
class Window:
    """The rows a read returns: ``OFFSET offset LIMIT limit`` (no limit when None)."""

    offset: int
    limit: int | None


def window(limit: int | None, offset: int | None) -> Window:
    """``ranges`` then ``getRanges``: ``limit=L`` is the range ``[0, L-1]``, an offset moves it
    to ``[O, O+L-1]``. ``limit=0`` alone is the allowed ``limitZeroRange`` ``[0, -1]``;
    ``limit=0`` with an offset is ``[O, O-1]``, an empty range that is not it, so the request
    fails with 416 (``InvalidRange NegativeLimit``)."""
    if limit is None:
        return Window(offset or 0, None)
    lower = offset or 0
    upper = lower + limit - 1
    if upper < lower and upper != -1:  # isInvalidRange: empty and not hasLimitZero
        raise PostgrestError(
            416,
            "PGRST103",
            "Requested range not satisfiable",
            "Limit should be greater than or equal to zero.",
        )
    return Window(lower, limit)


def range_status(lower: int, returned: int, total: int | None) -> tuple[int, str]:
    """``rangeStatusHeader``: the status and ``Content-Range`` of a read. With a count, an
    offset past the last row is 416, a page shorter than the count 206."""
    upper = lower + returned - 1
    status = 200
    if total is not None:
        if lower > total:
            status = 416
        elif 1 + upper - lower < total:
            status = 206
    return status, content_range(lower, upper, total)


def content_range(lower: int, upper: int, total: int | None) -> str:
    """``contentRangeH``: ``lower-upper/total``, ``*`` for an empty span or an unknown total."""
    span = f"{lower}-{upper}" if total != 0 and lower <= upper else "*"
    return f"{span}/{'*' if total is None else total}"


def out_of_bounds(offset: int, total: int) -> PostgrestError:
    """The body ``Response.hs`` sends with a 416 from :func:`range_status`."""
    return PostgrestError(
        416,
        "PGRST103",
        "Requested range not satisfiable",
        f"An offset of {offset} was requested, but there are only {total} rows.",
    )


# ---- select= with aggregates: pFieldSelect, groupF, Config.coerceBool ----------------------------

#: ``data AggregateFunction`` (ApiRequest/Types.hs), by the names ``pAggregation`` reads.
AGGREGATE_FUNCTIONS = ("sum", "avg", "count", "max", "min")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
#: The subset of ``pFieldSelect`` (ApiRequest/QueryParams.hs) the connector emits:
#: ``[alias:]count()`` (the branch tried before a field, so a column named ``count`` stays a
#: column) or ``[alias:]field.fn()``; the alias is ``pFieldName <* aliasSeparator``.
_AGGREGATE_ITEM = re.compile(
    rf"(?:(?P<alias>{_NAME}):)?"
    rf"(?:(?P<count>count\(\))|(?P<column>{_NAME})\.(?P<fn>{'|'.join(AGGREGATE_FUNCTIONS)})\(\))"
)


@dataclass(frozen=True)
class SelectItem:
    """``SelectField``: a column (None: the whole row, for ``count()``), its aggregate (None:
    a plain column) and its alias."""

    column: str | None
    fn: str | None = None
    alias: str | None = None


def parse_select_items(raw: str) -> list[SelectItem] | None:
    """``select=`` read item by item (``pFieldSelect``, items split on ``,``) when one of them
    has an aggregate; None when none does (a plain select). Casts (``::``), aliases of plain
    columns and ``*`` beside an aggregate (``expandStars`` in Plan.hs would expand it into
    group columns) are outside the subset."""
    items = raw.split(",")
    matches = [_AGGREGATE_ITEM.fullmatch(item) for item in items]
    if not any(matches):
        return None
    out = []
    for item, match in zip(items, matches, strict=True):
        if match is None:
            if item == "*" or ":" in item:
                raise Outside(f"select item {item!r} beside an aggregate")
            out.append(SelectItem(item))
        elif match["count"]:
            out.append(SelectItem(None, "count", match["alias"]))
        else:
            out.append(SelectItem(match["column"], match["fn"], match["alias"]))
    return out


def group_items(items: list[SelectItem]) -> list[SelectItem]:
    """``groupF`` (Query/QueryBuilder.hs): an aggregated read groups by every select item
    without an aggregate (``pgFmtGroup``), and by nothing when there is none."""
    return [item for item in items if item.fn is None]


def aggregates_not_allowed() -> PostgrestError:
    """``Plan.validateAggFunctions``: aggregates while ``db-aggregates-enabled`` is off
    (``ApiRequestError AggregatesNotAllowed``)."""
    return PostgrestError(400, "PGRST123", "Use of aggregate functions is not allowed")


def coerce_bool(text: str) -> bool | None:
    """``coerceBool`` (Config.hs), how an in-database setting such as
    ``pgrst.db_aggregates_enabled`` is read: ``readMaybe`` of its letters only, title-cased
    (``TRUE``, ``"true"``), else an integer (``> 0`` is true); None otherwise (unset)."""
    word = "".join(ch for ch in text if ch.isalpha()).title()
    if word in ("True", "False"):
        return word == "True"
    return int(text) > 0 if re.fullmatch(r"-?\d+", text) else None
