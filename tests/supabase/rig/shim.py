"""A strict PostgREST subset on 127.0.0.1, for the Supabase integration tests.

It speaks only the grammar the loom_nb connector is meant to emit (``/rest/v1/<table>``), and
reads it as the real PostgREST does (``postgrest.py`` holds that reading, each piece naming the
PostgREST source function it follows; ``tests/supabase/test_rig.py`` lists them in a table):

- GET and HEAD: ``select=`` plain column names or ``*``; filters ``col=[not.]op.value`` with op
  in eq, neq, gt, gte, lt, lte, like, ilike (``*`` is ``%``), in.(...) (``in.()`` is the empty
  list; items are cut at a NUL), is.null/not_null/true/false/unknown; ``order=col.asc|desc``
  (optionally ``.nullsfirst|.nullslast``), ``limit``, ``offset`` (``limit=0`` with an offset
  is a 416, as is an offset past the counted rows); ``Prefer: count=exact`` (``Content-Range``,
  206 for a partial page). Aggregates in a GET's ``select=``
  (``status,sum_total:total.sum(),count:count()``, grouped by the plain columns) when
  ``pgrst.db_aggregates_enabled`` is on (``postgrest.parse_select_items``).
- POST: insert a JSON object or array (``columns=``, ``select=`` for the returned columns,
  ``Prefer: return=representation|minimal``, ``missing=default``).
- PATCH: update with the same filters; refused without one (pg-safeupdate, error 21000);
  ``Prefer: handling=strict, max-affected=n`` rolls back an update of more than n rows.

- To-one embeds along a foreign key named by its hint, as the connector builds them from a
  declared relationship: ``select=id,customers!customer_id(tier)``, ``!inner`` after the hint,
  filters on the embed (``customers.tier=eq.gold``) inside its subquery, and ``order=
  customers(tier).desc`` (``_embedded`` cites the PostgREST functions it follows).

Anything else -- embeds without a hint, spreads, aliases, JSON paths, casts, ``or=``/``and=``,
reserved names as filter columns, unknown parameters, headers asking for other features,
unknown paths -- gets a 400 with a PostgREST-style body and is recorded in ``refused``, so a
test can fail when the connector sent something outside what this shim reads like PostgREST.

Each request is checked like Supabase does: an HS256 JWT in ``apikey`` and ``Authorization``.
It then runs in one transaction as ``authenticator`` with the JWT's role and claims set through
``set_config(..., true)`` and ``SET LOCAL ROLE``, so row level security applies as in Supabase.
Identifiers are quoted with psycopg.sql; every value is a query parameter.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import jwt
import psycopg
from psycopg import sql

from . import postgrest
from .postgrest import Outside, PostgrestError, Preferences, SelectItem

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
#: Query names PostgREST reads itself; as filter columns they would rewrite the query.
RESERVED = {"select", "order", "limit", "offset", "columns", "on_conflict", "or", "and", "not"}
#: ``simpleOperator`` / ``quantOperator`` in ``Query/SqlFragment.hs``.
OPERATORS = {
    "eq": "=",
    "neq": "<>",
    "gt": ">",
    "gte": ">=",
    "lt": "<",
    "lte": "<=",
    "like": "like",
    "ilike": "ilike",
}
IS_SQL = {
    "null": "NULL",
    "not_null": "NOT NULL",
    "true": "TRUE",
    "false": "FALSE",
    "unknown": "UNKNOWN",
}
ROLES = {"anon", "authenticated", "service_role"}


class Refused(Exception):
    """A request outside the subset (or a bad JWT): answered with a PostgREST-style error."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: str | None = None,
        hint: str | None = None,
        kind: str = "grammar",
    ) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind
        self.body = {"code": code, "message": message, "details": details, "hint": hint}


@dataclass
class Seen:
    """One request the shim answered."""

    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: Any
    table: str | None = None
    role: str | None = None
    status: int = 0
    #: "ok", "auth", "database", "postgrest" (an error the real PostgREST gives too), or
    #: "grammar" (outside the subset) or "crash" (a shim bug): the last two count as test
    #: failures.
    kind: str = "ok"
    error: dict[str, Any] | None = None
    #: Every ``Prefer`` header, in order (PostgREST reads them all).
    prefer: list[str] = field(default_factory=list)


# ---- parsing ------------------------------------------------------------------------------------


def _ident(name: str, what: str) -> str:
    if not IDENT.match(name):
        raise Refused(
            400,
            "PGRST100",
            f"the test shim only accepts plain identifiers as {what}",
            f"got {name!r}: embeds, '!inner', spreads, aliases, JSON paths, casts "
            "and quoted names are outside the subset",
        )
    return name


#: A to-one embed as the connector writes it: ``customers!customer_id(tier,id)``, with
#: ``!inner`` after the hint (``pRelationSelect``/``pEmbedParams`` in ApiRequest/QueryParams.hs
#: read ``rel!hint!inner(...)``). The shim takes only hinted embeds: the hint names the
#: foreign key, as the connector always sends it.
EMBED = re.compile(
    r"(?P<rel>[A-Za-z_][A-Za-z0-9_]*)!(?P<hint>[A-Za-z_][A-Za-z0-9_]*)(?P<inner>!inner)?"
    r"\((?P<cols>[^()]*)\)"
)


#: A spread embed of an aggregated read, as the connector writes it:
#: ``...customers!customer_id!inner(tier,sum_x:credit.sum())`` (``pSpreadRelationSelect``).
SPREAD = re.compile(
    r"\.\.\.(?P<rel>[A-Za-z_][A-Za-z0-9_]*)!(?P<hint>[A-Za-z_][A-Za-z0-9_]*)(?P<inner>!inner)?"
    r"\((?P<cols>.*)\)"
)


@dataclass
class Embed:
    """One embedded to-one resource of a read (``Plan.hs``: a ``JsonEmbed`` in ``JsonObject``
    mode, joined by ``getJoin`` in ``Query/QueryBuilder.hs``), or a spread of one
    (``Spread``: its columns are the top level's)."""

    relation: str
    hint: str
    inner: bool
    columns: list[str] | None
    #: A spread's items (plain columns and aliased aggregates); None for a JSON embed.
    spread: list[SelectItem] | None = None
    #: Filters on the embed (``customers.tier=eq.gold``): inside its subquery, as PostgREST
    #: puts an embedded filter in the embed's own read plan.
    where: list[sql.Composable] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)

    @property
    def alias(self) -> str:
        return f"{self.relation}_1"


def _split_select(raw: str) -> tuple[str, list[Embed]]:
    """The plain items of ``select=`` and its embeds (``pFieldForest``: items split on the
    commas outside parentheses)."""
    depth, start, items = 0, 0, []
    for i, ch in enumerate(raw):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(raw[start:i])
            start = i + 1
    items.append(raw[start:])
    plain, embeds = [], []
    for item in items:
        if "(" not in item or (item.endswith("()") and not item.startswith("...")):
            plain.append(item)  # a column, or an aggregate like total.sum()
            continue
        spread = SPREAD.fullmatch(item)
        if spread is not None and spread["hint"] != "inner":
            embeds.append(_spread(spread))
            continue
        found = EMBED.fullmatch(item)
        if found is None or found["hint"] == "inner":  # rel!inner(...): no hint
            raise Refused(
                400,
                "PGRST100",
                f"the embed {item!r} is outside the subset",
                "the shim reads only rel!fk_column(columns) and rel!fk_column!inner(columns)",
            )
        cols = found["cols"]
        names = None if cols == "*" else [_ident(c, "embedded columns") for c in cols.split(",")]
        embeds.append(Embed(found["rel"], found["hint"], bool(found["inner"]), names))
    return ",".join(plain), embeds


def _spread(found: re.Match[str]) -> Embed:
    """A spread's items: plain columns (its group columns) and ``alias:column.fn()``
    aggregates, which ``hoistSpreadAggFunctions`` (Plan.hs) applies at the top level; an
    aggregate without an alias, casts and stars are outside the subset."""
    try:
        items = postgrest.parse_select_items(found["cols"]) or [
            SelectItem(c) for c in found["cols"].split(",")
        ]
    except Outside as exc:
        raise Refused(400, "PGRST100", f"{exc} is outside the subset") from None
    for item in items:
        _ident(item.column or "", "spread columns")
        if item.fn is not None and item.alias is None:
            raise Refused(400, "PGRST100", "an aggregate in a spread needs an alias in the subset")
    return Embed(found["rel"], found["hint"], bool(found["inner"]), None, spread=items)


def _select_list(raw: str) -> list[str] | None:
    """``None`` means ``*``."""
    items = raw.split(",")
    names = [_ident(item, "select columns") for item in items if item != "*"]
    if "*" not in items:
        return names
    if names:
        raise Refused(400, "PGRST100", "'*' mixed with column names is outside the subset")
    return None


#: ``pgFmtApplyAggregate`` (Query/SqlFragment.hs): each function's SQL, its name upper-cased.
AGGREGATES = {fn: fn.upper() for fn in postgrest.AGGREGATE_FUNCTIONS}


def _select_items(raw: str) -> list[SelectItem] | None:
    """An aggregated ``select=`` as PostgREST reads it (``postgrest.parse_select_items``),
    plain items checked like any select column; None when it holds no aggregate."""
    try:
        items = postgrest.parse_select_items(raw)
    except Outside as exc:
        raise Refused(400, "PGRST100", f"{exc} is outside the subset") from None
    for item in items or ():
        if item.fn is None:
            _ident(item.column or "", "select columns")
    return items


def _columns_param(raw: str) -> list[str]:
    """``columns=`` as supabase-py sends it: each name in double quotes."""
    names = []
    for item in raw.split(","):
        if len(item) >= 2 and item[0] == item[-1] == '"':
            item = item[1:-1]
        names.append(_ident(item, "insert columns"))
    return names


def _filter(table: str, column: str, raw: str, params: list[Any]) -> sql.Composable:
    """One ``col=[not.]op.value`` filter as the SQL ``pgFmtFilter`` builds; its value is
    appended to ``params``."""
    if column.lower() in RESERVED:
        raise Refused(
            400,
            "PGRST100",
            f"{column!r} is a reserved query name, not a column",
            "reserved names used as filter columns rewrite the query in PostgREST",
        )
    ident = sql.Identifier(table, _ident(column, "filter columns"))  # qualified, as PostgREST does
    try:
        meant = postgrest.meaning(postgrest.parse_op_expr(raw))
    except Outside:
        raise Refused(
            400,
            "PGRST100",
            f"the operator in {column}={raw!r} is outside the subset",
            "supported: eq neq gt gte lt lte like ilike in is, not.",
        ) from None
    if meant.op == "is":
        assert meant.values is not None
        clause = sql.SQL("{} IS {}").format(ident, sql.SQL(IS_SQL[meant.values[0]]))
    elif meant.op == "in" and meant.values is None:
        clause = sql.SQL("{} = ANY('{{}}')").format(ident)  # pgFmtFilter: In [""]
    elif meant.op == "in":
        assert meant.values is not None
        clause = sql.SQL("{} = ANY(%s)").format(ident)
        params.append(pg_array_literal(meant.values))
    else:
        assert meant.values is not None
        (value,) = meant.values
        if "\x00" in value:
            # unknownLiteral sends the text as it is; PostgreSQL refuses a NUL in text input.
            raise DatabaseError("22021", 'invalid byte sequence for encoding "UTF8": 0x00')
        clause = sql.SQL("{} {} %s").format(ident, sql.SQL(OPERATORS[meant.op]))
        params.append(value)
    return sql.SQL("NOT {}").format(clause) if meant.negate else clause


def pg_array_literal(values: tuple[str, ...]) -> str:
    """``pgBuildArrayLiteral``: every item double-quoted, backslashes and quotes escaped
    (the items were cut at a NUL already), sent as one untyped parameter for ``= ANY``."""
    quoted = ('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "{" + ",".join(quoted) + "}"


class DatabaseError(Exception):
    """An error PostgreSQL itself would raise for what PostgREST sent."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


#: ``pOrderRelationTerm`` (ApiRequest/QueryParams.hs): ``customers(tier).desc`` orders the
#: rows by a to-one embed's column (``pgFmtOrderTerm``: the embed's alias, then the field).
ORDER_RELATION = re.compile(r"(?P<rel>[A-Za-z_][A-Za-z0-9_]*)\((?P<col>[A-Za-z_][A-Za-z0-9_]*)\)")


def _order(raw: str, embeds: list[Embed] | None = None) -> list[sql.Composable]:
    terms = []
    for term in raw.split(","):
        parts = term.split(".")
        if not 1 <= len(parts) <= 3:
            raise Refused(400, "PGRST100", f"order term {term!r} is outside the subset")
        name, *mods = parts
        related = ORDER_RELATION.fullmatch(name)
        if related is not None:
            embed = next((e for e in embeds or () if e.relation == related["rel"]), None)
            if embed is None:
                raise Refused(
                    400, "PGRST100", f"order term {term!r} names no embed: outside the subset"
                )
            pieces = [sql.Identifier(embed.alias, related["col"])]
        else:
            pieces = [sql.Identifier(_ident(name, "order columns"))]
        for i, mod in enumerate(mods):
            allowed = ("asc", "desc") if i == 0 else ("nullsfirst", "nullslast")
            if mod not in allowed:
                raise Refused(400, "PGRST100", f"order modifier {mod!r} in {term!r} is not allowed")
            pieces.append(
                sql.SQL(
                    {"nullsfirst": "NULLS FIRST", "nullslast": "NULLS LAST"}.get(mod, mod.upper())
                )
            )
        terms.append(sql.SQL(" ").join(pieces))
    return terms


def _int(raw: str, name: str) -> int:
    if not raw.isdigit():
        raise Refused(
            400,
            "PGRST100",
            f"{name}={raw!r} is not a non-negative integer",
            "PostgREST silently ignores such a value, so the row cap would vanish",
        )
    return int(raw)


@dataclass
class Query:
    """A parsed request: what to run, on which table."""

    table: str
    select: list[str] | None = None
    where: list[sql.Composable] = field(default_factory=list)
    #: The filters' values, in the order of their placeholders in ``where``.
    params: list[Any] = field(default_factory=list)
    order: list[sql.Composable] = field(default_factory=list)
    limit: int | None = None
    offset: int | None = None
    columns: list[str] | None = None
    #: A select with aggregates (None: none), grouped by its plain columns.
    aggregated: list[SelectItem] | None = None
    #: The to-one embeds of a read.
    embeds: list[Embed] = field(default_factory=list)

    def window(self) -> postgrest.Window:
        return postgrest.window(self.limit, self.offset)


def parse(method: str, table: str, params: list[tuple[str, str]]) -> Query:
    q = Query(_ident(table, "table names"))
    allowed = {
        "GET": {"select", "order", "limit", "offset"},
        "HEAD": {"select", "order", "limit", "offset"},
        "POST": {"select", "columns"},
        "PATCH": {"select"},
    }[method]
    seen: set[str] = set()
    orders: list[str] = []
    for key, value in params:
        if key in seen and key in RESERVED:
            raise Refused(
                400,
                "PGRST100",
                f"query parameter {key!r} is repeated",
                "PostgREST keeps only one of them; the other is silently lost",
            )
        seen.add(key)
        if key in allowed:
            if key == "select":
                if method == "GET" and "!" in value:
                    value, q.embeds = _split_select(value)
                spreads = [e for e in q.embeds if e.spread is not None]
                q.aggregated = _select_items(value) if method == "GET" and value else None
                if spreads and q.aggregated is None:
                    if not any(i.fn for e in spreads for i in e.spread or ()):
                        raise Refused(
                            400,
                            "PGRST100",
                            "a spread outside an aggregated read is outside the subset",
                        )
                    # every total is a spread's: the top level's items are its group columns
                    names = value.split(",") if value else []
                    q.aggregated = [SelectItem(_ident(c, "select columns")) for c in names]
                if q.aggregated is not None and len(spreads) != len(q.embeds):
                    raise Refused(
                        400, "PGRST100", "an aggregate beside a JSON embed is outside the subset"
                    )
                if q.aggregated is None:
                    q.select = _select_list(value)
            elif key == "order":
                orders.append(value)
            elif key == "limit":
                q.limit = _int(value, "limit")
            elif key == "offset":
                q.offset = _int(value, "offset")
            else:
                q.columns = _columns_param(value)
        elif method == "POST":
            raise Refused(400, "PGRST100", f"query parameter {key!r} is not allowed on an insert")
        elif "." in key:  # customers.tier=eq.gold: a filter of the embed (QueryParams.hs)
            relation, _, column = key.partition(".")
            embed = next((e for e in q.embeds if e.relation == relation), None)
            if embed is None:
                raise Refused(
                    400,
                    "PGRST100",
                    f"the filter {key!r} names no embed of the select: outside the subset",
                )
            embed.where.append(_filter(embed.alias, column, value, embed.params))
        else:
            q.where.append(_filter(q.table, key, value, q.params))
    for value in orders:  # after the select: an order may name its embeds
        q.order = _order(value, q.embeds)
    return q


#: The preferences the subset takes, by method; PostgREST knows more (``ACCEPTED``).
SUBSET_PREFS = {
    "count": {"exact"},
    "return": {"representation", "minimal"},
    "missing": {"default"},
    "handling": {"strict", "lenient"},
}


def _prefer(headers: list[str], method: str) -> Preferences:
    """``Preferences.fromHeaders``, then the subset: a preference PostgREST knows but the
    connector never sends is refused; an unknown one is ``invalidPrefs`` (an error with
    ``handling=strict``, see ``Preferences.check_invalid``; the subset refuses it without)."""
    prefs = postgrest.parse_prefer(headers)
    for name, value in prefs.values.items():
        if value not in SUBSET_PREFS.get(name, ()) or (
            method in ("GET", "HEAD") and name not in ("count", "handling")
        ):
            raise Refused(
                400,
                "PGRST100",
                f"Prefer: {name}={value} is outside the subset",
                "supported: count=exact, return=representation|minimal, missing=default, "
                "handling=strict|lenient, max-affected (PATCH)",
            )
    if prefs.max_affected is not None and method != "PATCH":
        raise Refused(400, "PGRST100", "Prefer: max-affected is outside the subset here")
    if prefs.invalid and not prefs.strict:
        raise Refused(
            400,
            "PGRST100",
            f"Prefer: {', '.join(prefs.invalid)} is outside the subset",
            "PostgREST ignores unknown preferences without handling=strict",
        )
    return prefs


def _aggregated(
    table: str,
    items: list[SelectItem],
    embeds: list[Embed] = (),  # type: ignore[assignment]
) -> tuple[sql.Composable, sql.Composable]:
    """The select list and the GROUP BY of an aggregated read, as PostgREST writes them:
    pgFmtSelectItem applies ``FN(field)`` and ``AS alias`` (pgFmtApplyAggregate, pgFmtAs),
    ``count()`` counts the whole row (pgFmtColumn's ``table.*``); groupF groups by every
    select item without an aggregate (pgFmtGroup: its alias, else the qualified column), and
    by nothing when there is none. Without an alias, PostgreSQL names the column after the
    function, as it does for PostgREST.

    A spread's items follow (getJoinSelects' ``Spread``, pgFmtSpreadSelectItem): each read
    from the spread's lateral subquery by its name there (``customers_1.tier``), a hoisted
    aggregate applied at this level (``SUM(customers_1.sum_x) AS sum_x``,
    hoistSpreadAggFunctions in Plan.hs); its plain columns group too
    (groupTermFromRelSelectField)."""
    qualified = sql.Identifier(table)
    selects: list[sql.Composable] = []
    for item in items:
        if item.fn is None:
            selects.append(sql.SQL("{}.{}").format(qualified, sql.Identifier(item.column or "")))
            continue
        field = (
            sql.SQL("{}.*").format(qualified)
            if item.column is None
            else sql.SQL("{}.{}").format(qualified, sql.Identifier(item.column))
        )
        select = sql.SQL("{}({})").format(sql.SQL(AGGREGATES[item.fn]), field)
        if item.alias is not None:
            select = sql.SQL("{} AS {}").format(select, sql.Identifier(item.alias))
        selects.append(select)
    groups = [
        sql.SQL("{}.{}").format(qualified, sql.Identifier(item.column or ""))
        for item in postgrest.group_items(items)
    ]
    for e in embeds:
        for item in e.spread or ():
            name = sql.Identifier(e.alias, item.alias or item.column or "")
            if item.fn is None:
                selects.append(name)
                groups.append(name)
            else:
                selects.append(
                    sql.SQL("{}({}) AS {}").format(
                        sql.SQL(AGGREGATES[item.fn]), name, sql.Identifier(item.alias or "")
                    )
                )
    group = sql.SQL(" GROUP BY ") + sql.SQL(", ").join(groups) if groups else sql.SQL("")
    return sql.SQL(", ").join(selects), group


def _embedded(
    cur: psycopg.Cursor, q: Query, returned: sql.Composable
) -> tuple[sql.Composable, sql.Composable, list[Any]]:
    """The select list, the joins and their parameters of a read with to-one embeds, as
    ``readPlanToQuery``/``getJoin``/``getJoinSelects`` (Query/QueryBuilder.hs) build them:
    ``LEFT JOIN LATERAL (SELECT cols FROM target AS alias WHERE alias.key = parent.fk AND
    <embed filters>) AS alias ON TRUE`` (``INNER JOIN LATERAL`` for ``!inner``), and
    ``row_to_json(alias.*)::jsonb AS rel`` in the select list (NULL without a match). The
    subquery runs as the request's role, so the target's row level security applies. The
    relationship is found as ``findRel`` (Plan.hs) does for ``rel!hint``: a foreign key of the
    origin to ``rel`` whose single column (or constraint name) is the hint; none is
    PGRST200."""
    if q.aggregated is not None:  # the aggregated list, spreads' items included
        own = returned
    elif q.select is None:
        own = sql.SQL("{}.*").format(sql.Identifier(q.table))
    else:
        own = sql.SQL(", ").join(sql.Identifier(q.table, c) for c in q.select)
    selects, joins, params = [own], [], []
    for e in q.embeds:
        cur.execute(
            "SELECT a.attname, fa.attname FROM pg_constraint k "
            "JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1] "
            "JOIN pg_attribute fa ON fa.attrelid = k.confrelid AND fa.attnum = k.confkey[1] "
            "WHERE k.contype = 'f' AND cardinality(k.conkey) = 1 "
            "AND k.conrelid = %s::regclass AND k.confrelid = %s::regclass "
            "AND (a.attname = %s OR k.conname = %s)",
            (f"public.{q.table}", f"public.{e.relation}", e.hint, e.hint),
        )
        found = cur.fetchall()
        if len(found) != 1:
            raise PostgrestError(
                400,
                "PGRST200",
                f"Could not find a relationship between '{q.table}' and '{e.relation}' in the "
                "schema cache",
                f"Searched for a foreign key relationship between '{q.table}' and "
                f"'{e.relation}' using the hint '{e.hint}' in the schema 'public', but no "
                "matches were found.",
            )
        fk, key = found[0]
        alias = sql.Identifier(e.alias)
        if e.spread is not None:  # an aggregate's column under its alias, the aggregate hoisted
            columns = sql.SQL(", ").join(
                sql.Identifier(e.alias, i.column or "")
                if i.alias is None
                else sql.SQL("{} AS {}").format(
                    sql.Identifier(e.alias, i.column or ""), sql.Identifier(i.alias)
                )
                for i in e.spread
            )
        elif e.columns is None:
            columns = sql.SQL("{}.*").format(alias)
        else:
            columns = sql.SQL(", ").join(sql.Identifier(e.alias, c) for c in e.columns)
        where = [
            sql.SQL("{} = {}").format(sql.Identifier(e.alias, key), sql.Identifier(q.table, fk)),
            *e.where,
        ]
        joins.append(
            sql.SQL(" {} JOIN LATERAL (SELECT {} FROM {} AS {} WHERE {}) AS {} ON TRUE").format(
                sql.SQL("INNER" if e.inner else "LEFT"),
                columns,
                sql.Identifier("public", e.relation),
                alias,
                sql.SQL(" AND ").join(where),
                alias,
            )
        )
        params.extend(e.params)
        if e.spread is None:
            selects.append(
                sql.SQL("row_to_json({}.*)::jsonb AS {}").format(alias, sql.Identifier(e.relation))
            )
    return sql.SQL(", ").join(selects), sql.SQL("").join(joins), params


def _aggregates_enabled(cur: psycopg.Cursor) -> bool:
    """``pgrst.db_aggregates_enabled`` as PostgREST's in-database configuration reads it
    (Config/Database.hs, queryDbSettings): the authenticator role's settings, a
    database-specific one first; off by default (Config.hs). Read per request here, where
    PostgREST reads it at start and on ``NOTIFY pgrst, 'reload config'``."""
    cur.execute(
        "SELECT substr(setting, strpos(setting, '=') + 1) FROM ("
        "  SELECT setdatabase, unnest(setconfig) AS setting FROM pg_catalog.pg_db_role_setting"
        "  WHERE setrole = quote_ident(CURRENT_USER)::regrole::oid"
        "    AND setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database"
        "                            WHERE datname = CURRENT_CATALOG))"
        ") s WHERE substr(setting, 1, strpos(setting, '=') - 1) = 'pgrst.db_aggregates_enabled'"
        " ORDER BY setdatabase DESC LIMIT 1"
    )
    row = cur.fetchone()
    return row is not None and postgrest.coerce_bool(row[0]) is True


# ---- errors --------------------------------------------------------------------------------------


def pg_status(sqlstate: str, role: str) -> int:
    """PostgREST's mapping from a PostgreSQL error code to an HTTP status."""
    if sqlstate == "42501":
        return 401 if role == "anon" else 403
    exact = {
        "23503": 409,
        "23505": 409,
        "25006": 405,
        "42883": 404,
        "42P01": 404,
        "42P17": 500,
        "P0001": 400,
    }
    if sqlstate in exact:
        return exact[sqlstate]
    by_class = {
        "08": 503,
        "09": 500,
        "0L": 403,
        "0P": 403,
        "25": 500,
        "28": 403,
        "2D": 500,
        "38": 500,
        "39": 500,
        "3B": 500,
        "40": 500,
        "53": 503,
        "54": 500,
        "55": 500,
        "57": 500,
        "58": 500,
        "F0": 500,
        "HV": 500,
        "XX": 500,
    }
    return by_class.get(sqlstate[:2], 400)


# ---- the server ----------------------------------------------------------------------------------


class Shim:
    """``Shim(dsn, jwt_secret).start()``; ``url`` is the Supabase project URL to give clients."""

    def __init__(self, dsn: str, jwt_secret: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.dsn, self.jwt_secret = dsn, jwt_secret
        self.log: list[Seen] = []
        self._lock = threading.Lock()
        self._idle: list[psycopg.Connection] = []
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def refused(self) -> list[Seen]:
        """Requests outside the subset (and shim crashes): the connector's tests require none."""
        return [s for s in self.log if s.kind in ("grammar", "crash")]

    def tables_queried(self) -> set[str]:
        """Tables a query ran on (refused requests never reach the database)."""
        return {s.table for s in self.log if s.table and s.kind in ("ok", "database")}

    def clear(self) -> None:
        with self._lock:
            self.log.clear()

    def start(self) -> Shim:
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="postgrest-shim"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            for conn in self._idle:
                conn.close()
            self._idle.clear()

    # ---- one request ----

    def handle(self, seen: Seen) -> tuple[int, dict[str, str], bytes]:
        try:
            if seen.method not in ("GET", "HEAD", "POST", "PATCH"):
                raise Refused(405, "PGRST117", f"method {seen.method} is outside the subset")
            match = re.fullmatch(r"/rest/v1/([^/]+)", seen.path)
            if not match:
                raise Refused(
                    400,
                    "PGRST125",
                    f"invalid path {seen.path!r}",
                    "the test shim serves only /rest/v1/<table>",
                )
            seen.table = match.group(1)
            claims = self._claims(seen.headers)
            seen.role = claims["role"]
            for name in ("accept-profile", "content-profile"):
                if seen.headers.get(name, "public") != "public":
                    raise Refused(406, "PGRST106", "only the public schema is exposed")
            accept = seen.headers.get("accept", "application/json")
            if accept not in ("application/json", "*/*"):
                raise Refused(406, "PGRST107", f"Accept: {accept} is outside the subset")
            # In PostgREST's order: the query string and the range (ApiRequest), then the
            # preferences (Plan), then the statement (MainTx).
            query = parse(seen.method, seen.table, seen.query)
            window = query.window()
            prefer = _prefer(seen.prefer, seen.method)
            prefer.check_invalid()
            status, headers, payload = self._execute(seen, query, window, claims, prefer)
        except Refused as exc:
            seen.kind, seen.error = exc.kind, exc.body
            status, headers, payload = exc.status, {}, json.dumps(exc.body)
        except PostgrestError as exc:
            body = {"code": exc.code, "message": str(exc), "details": exc.details, "hint": None}
            seen.kind, seen.error = "postgrest", body
            status, headers, payload = exc.status, {}, json.dumps(body)
        except DatabaseError as exc:
            body = {"code": exc.sqlstate, "message": str(exc), "details": None, "hint": None}
            seen.kind, seen.error = "database", body
            status = pg_status(exc.sqlstate, seen.role or "anon")
            headers, payload = {}, json.dumps(body)
        except psycopg.Error as exc:
            diag = exc.diag
            code = diag.sqlstate or "XX000"
            body = {
                "code": code,
                "message": diag.message_primary or str(exc),
                "details": diag.message_detail,
                "hint": diag.message_hint,
            }
            seen.kind, seen.error = "database", body
            status, headers, payload = pg_status(code, seen.role or "anon"), {}, json.dumps(body)
        except Exception as exc:  # a bug in the shim: answer, so the client does not retry
            body = {
                "code": "SHIM",
                "message": f"{type(exc).__name__}: {exc}",
                "details": None,
                "hint": "a bug in tests/supabase/rig/shim.py",
            }
            seen.kind, seen.error = "crash", body
            status, headers, payload = 500, {}, json.dumps(body)
        seen.status = status
        with self._lock:
            self.log.append(seen)
        return status, headers, payload.encode() if isinstance(payload, str) else payload

    def _claims(self, headers: dict[str, str]) -> dict[str, Any]:
        """Check ``apikey`` (as Supabase's gateway does), then the bearer token (as PostgREST)."""
        apikey = headers.get("apikey")
        if not apikey:
            raise Refused(401, "PGRST301", "No API key found in request", kind="auth")
        token = apikey
        auth = headers.get("authorization")
        if auth is not None:
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer" or not token:
                raise Refused(401, "PGRST301", "Authorization must be 'Bearer <jwt>'", kind="auth")
        for value in (apikey, token):
            try:
                claims = jwt.decode(
                    value, self.jwt_secret, algorithms=["HS256"], options={"verify_aud": False}
                )
            except jwt.ExpiredSignatureError:
                raise Refused(401, "PGRST303", "JWT expired", kind="auth") from None
            except jwt.PyJWTError as exc:
                raise Refused(
                    401, "PGRST301", f"JWT could not be decoded: {exc}", kind="auth"
                ) from None
        if claims.get("role") not in ROLES:
            raise Refused(
                401, "PGRST301", f"JWT role {claims.get('role')!r} is not allowed", kind="auth"
            )
        return claims

    def _execute(
        self,
        seen: Seen,
        q: Query,
        window: postgrest.Window,
        claims: dict[str, Any],
        prefer: Preferences,
    ) -> tuple[int, dict[str, str], str]:
        table = sql.Identifier("public", q.table)
        where = sql.SQL(" AND ").join(q.where) if q.where else sql.SQL("true")
        returned = (
            sql.SQL("*") if q.select is None else sql.SQL(", ").join(map(sql.Identifier, q.select))
        )
        counted = prefer.values.get("count") == "exact"
        group = sql.SQL("")
        if q.aggregated is not None:
            if counted:
                raise Refused(
                    400, "PGRST100", "Prefer: count=exact with aggregates is outside the subset"
                )
            returned, group = _aggregated(q.table, q.aggregated, q.embeds)
        headers: dict[str, str] = {}
        with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            if q.aggregated is not None and not _aggregates_enabled(cur):  # as authenticator
                raise postgrest.aggregates_not_allowed()
            # What PostgREST does at the start of every request.
            cur.execute(
                "SELECT set_config('role', %s, true), "
                "set_config('request.jwt.claims', %s, true), "
                "set_config('request.method', %s, true), "
                "set_config('request.path', %s, true)",
                (claims["role"], json.dumps(claims), seen.method, seen.path),
            )
            cur.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(claims["role"])))
            if seen.method in ("GET", "HEAD"):
                joins, embed_params = sql.SQL(""), []
                if q.embeds:
                    returned, joins, embed_params = _embedded(cur, q, returned)
                query = sql.SQL("SELECT {} FROM {}{} WHERE {}{}").format(
                    returned, table, joins, where, group
                )
                params = [*embed_params, *q.params]
                if q.order:
                    query += sql.SQL(" ORDER BY ") + sql.SQL(", ").join(q.order)
                if window.limit is not None:
                    query += sql.SQL(" LIMIT %s")
                    params.append(window.limit)
                if window.offset:
                    query += sql.SQL(" OFFSET %s")
                    params.append(window.offset)
                rows, n = self._json(cur, query, params)
                total = None
                if counted:
                    cur.execute(
                        sql.SQL("SELECT count(*) FROM {}{} WHERE {}").format(table, joins, where),
                        [*embed_params, *q.params],
                    )
                    total = int(cur.fetchone()[0])
                status, headers["Content-Range"] = postgrest.range_status(window.offset, n, total)
                if status == 416:
                    assert total is not None
                    raise postgrest.out_of_bounds(window.offset, total)
                return status, headers, rows if seen.method == "GET" else ""
            if seen.method == "POST":
                rows = seen.body if isinstance(seen.body, list) else [seen.body]
                status = 201
                missing_default = prefer.values.get("missing") == "default"
                changed, params = self._insert(rows, q, missing_default)
            else:
                status = 200
                changed, params = self._update(seen.body, q, where)
            query = sql.SQL("SELECT {} FROM changed").format(returned)
            rows, n = self._json(cur, query, params, changed=changed)
            if seen.method == "PATCH":
                # raises inside the transaction, which rolls the update back
                postgrest.fail_exceeds_max_affected(prefer, n)
                span = postgrest.content_range(0, n - 1, n if counted else None)
            else:
                span = postgrest.content_range(1, 0, n if counted else None)
            headers["Content-Range"] = span
            applied = prefer.applied(max_affected_applies=seen.method == "PATCH")
            if applied:
                headers["Preference-Applied"] = applied
            if prefer.values.get("return") != "representation":
                return (status if seen.method == "POST" else 204), headers, ""
            return status, headers, rows

    @staticmethod
    def _json(
        cur: psycopg.Cursor,
        query: sql.Composable,
        params: list[Any],
        changed: sql.Composable | None = None,
    ) -> tuple[str, int]:
        """Rows encoded by PostgreSQL itself (json_agg), as PostgREST does. A write comes as
        ``changed``: top-level CTEs, the last one named ``changed`` that ``query`` reads."""
        outer = sql.SQL("SELECT coalesce(json_agg(r), '[]')::text, count(*) FROM ({}) r")
        outer = outer.format(query)
        if changed is not None:
            outer = sql.SQL("WITH {} ").format(changed) + outer
        cur.execute(outer, params)
        text, n = cur.fetchone()
        return text, n

    @staticmethod
    def _insert(
        rows: list[Any], q: Query, missing_default: bool
    ) -> tuple[sql.Composable, list[Any]]:
        """PostgREST's insert: rows go in as JSON parameters, typed by the table. A key missing
        from a row is NULL, or with ``Prefer: missing=default`` the column's default."""
        if not rows or not all(isinstance(r, dict) and r for r in rows):
            raise Refused(400, "PGRST102", "an insert body must be non-empty JSON object(s)")
        wanted = q.columns or list(dict.fromkeys(k for r in rows for k in r))
        for name in wanted:
            _ident(name, "insert columns")
        groups: dict[tuple[str, ...], list[Any]] = {}
        for row in rows:
            key = tuple(c for c in wanted if c in row) if missing_default else tuple(wanted)
            groups.setdefault(key, []).append(row)
        table, ctes, parts = sql.Identifier("public", q.table), [], []
        for i, names in enumerate(groups):
            cols = sql.SQL(", ").join(map(sql.Identifier, names))
            ctes.append(
                sql.SQL(
                    "{w} AS (INSERT INTO {t} ({c}) SELECT {c} "
                    "FROM json_populate_recordset(NULL::{t}, %s::json) RETURNING {n}.*)"
                ).format(w=sql.Identifier(f"w{i}"), t=table, c=cols, n=sql.Identifier(q.table))
            )
            parts.append(sql.SQL("SELECT * FROM {}").format(sql.Identifier(f"w{i}")))
        ctes.append(sql.SQL("changed AS ({})").format(sql.SQL(" UNION ALL ").join(parts)))
        return sql.SQL(", ").join(ctes), [json.dumps(g) for g in groups.values()]

    @staticmethod
    def _update(body: Any, q: Query, where: sql.Composable) -> tuple[sql.Composable, list[Any]]:
        """PostgREST's update: the new values come from one JSON parameter, typed by the table."""
        if not isinstance(body, dict) or not body:
            raise Refused(400, "PGRST102", "an update body must be a non-empty JSON object")
        if not q.where:  # hosted Supabase runs pg-safeupdate
            raise Refused(400, "21000", "UPDATE requires a WHERE clause", kind="database")
        sets = sql.SQL(", ").join(
            sql.SQL("{c} = pgrst_body.{c}").format(c=sql.Identifier(_ident(k, "update columns")))
            for k in body
        )
        change = sql.SQL(
            "changed AS (UPDATE {t} SET {s} FROM json_populate_record(NULL::{t}, %s::json) "
            "pgrst_body WHERE {w} RETURNING {n}.*)"
        ).format(t=sql.Identifier("public", q.table), s=sets, w=where, n=sql.Identifier(q.table))
        return change, [json.dumps(body), *q.params]

    # ---- connections as authenticator, reused across requests ----

    def _connection(self) -> _Lease:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None or conn.closed:
            conn = psycopg.connect(self.dsn, autocommit=True)
        return _Lease(self, conn)


class _Lease:
    def __init__(self, shim: Shim, conn: psycopg.Connection) -> None:
        self.shim, self.conn = shim, conn

    def __enter__(self) -> psycopg.Connection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        if self.conn.closed or self.conn.info.transaction_status != 0:  # 0: idle
            self.conn.close()
            return
        with self.shim._lock:
            self.shim._idle.append(self.conn)


def _handler(shim: Shim) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as httpx expects
        disable_nagle_algorithm = True  # else each answer waits ~40 ms for a delayed ACK

        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            seen = Seen(
                self.command,
                url.path,
                # QueryParams.parse keeps only the pairs that have a value (nonemptyParams)
                [(k, v) for k, v in postgrest.parse_query(url.query) if v is not None],
                {k.lower(): v for k, v in self.headers.items()},
                body,
                prefer=self.headers.get_all("Prefer") or [],
            )
            if isinstance(body, str):
                seen.status, seen.kind = 400, "grammar"
                status, headers, payload = (
                    400,
                    {},
                    json.dumps(
                        {
                            "code": "PGRST102",
                            "message": "Empty or invalid json",
                            "details": None,
                            "hint": None,
                        }
                    ).encode(),
                )
                with shim._lock:
                    shim.log.append(seen)
            else:
                status, headers, payload = shim.handle(seen)
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = do_HEAD = _serve

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read shim.log
            pass

    return Handler
