"""A strict PostgREST subset on 127.0.0.1, for the Supabase integration tests.

It speaks only the grammar the loom_nb connector is meant to emit (``/rest/v1/<table>``):

- GET: ``select=`` plain column names or ``*``; filters ``col=[not.]op.value`` with op in
  eq, neq, gt, gte, lt, lte, like, ilike, in.(...), is.null/true/false; ``order=col.asc|desc``
  (optionally ``.nullsfirst|.nullslast``), ``limit``, ``offset``; ``Prefer: count=exact``.
  Aggregates in ``select=`` (``status,sum_total:total.sum(),count:count()``), as PostgREST
  reads them, when ``pgrst.db_aggregates_enabled`` is on (see ``_select_items``).
- POST: insert a JSON object or array (``columns=``, ``select=`` for the returned columns,
  ``Prefer: return=representation|minimal``).
- PATCH: update with the same filters; refused without one (pg-safeupdate, error 21000).

Anything else -- embeds, ``!inner``, spreads, aliases, JSON paths, casts, ``or=``/``and=``,
reserved names as filter columns, unknown parameters, headers asking for other features,
unknown paths -- gets a 400 with a PostgREST-style body and is recorded in ``refused``, so a
test can fail when the connector sent something the real PostgREST would have read
differently.

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
from urllib.parse import parse_qsl, urlsplit

import jwt
import psycopg
from psycopg import sql

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
#: Query names PostgREST reads itself; as filter columns they would rewrite the query.
RESERVED = {"select", "order", "limit", "offset", "columns", "on_conflict", "or", "and", "not"}
OPERATORS = {
    "eq": "=",
    "neq": "<>",
    "gt": ">",
    "gte": ">=",
    "lt": "<",
    "lte": "<=",
    "like": "LIKE",
    "ilike": "ILIKE",
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
    #: "ok", "auth", "database", "config" (refused by PostgREST's configuration, like
    #: aggregates when they are off), or "grammar" (outside the subset) or "crash" (a shim
    #: bug): the last two count as test failures.
    kind: str = "ok"
    error: dict[str, Any] | None = None


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


def _select_list(raw: str) -> list[str] | None:
    """``None`` means ``*``."""
    items = raw.split(",")
    names = [_ident(item, "select columns") for item in items if item != "*"]
    if "*" not in items:
        return names
    if names:
        raise Refused(400, "PGRST100", "'*' mixed with column names is outside the subset")
    return None


#: PostgREST's aggregate functions (ApiRequest/Types.hs, ``data AggregateFunction``), as the
#: SQL each becomes: pgFmtApplyAggregate (Query/SqlFragment.hs) upper-cases the name.
AGGREGATES = {"sum": "SUM", "avg": "AVG", "count": "COUNT", "max": "MAX", "min": "MIN"}
#: One select item with an aggregate, the subset of pFieldSelect (ApiRequest/QueryParams.hs)
#: the connector emits: ``[alias:]count()`` or ``[alias:]column.fn()``, no casts.
_AGGREGATE_ITEM = re.compile(
    r"^(?:(?P<alias>[A-Za-z_][A-Za-z0-9_]{0,62}):)?"
    r"(?:(?P<count>count\(\))|(?P<column>[A-Za-z_][A-Za-z0-9_]{0,62})\.(?P<fn>sum|avg|count|max|min)\(\))$"
)


@dataclass(frozen=True)
class SelectItem:
    """``column`` (None: the whole row, for ``count()``), its aggregate and its alias."""

    column: str | None
    fn: str | None = None
    alias: str | None = None


def _select_items(raw: str) -> list[SelectItem] | None:
    """A ``select=`` holding aggregates, as PostgREST's pFieldSelect reads it, or None when
    it holds none (then :func:`_select_list` reads it). ``count()`` comes first, as in
    pFieldSelect, so a column named ``count`` stays a column; an alias is ``name:`` before the
    item (aliasSeparator); casts (``::``) are outside the subset."""
    items = raw.split(",")
    parsed = [_AGGREGATE_ITEM.match(item) for item in items]
    if not any(parsed):
        return None
    out = []
    for item, match in zip(items, parsed, strict=True):
        if match is None:
            if item == "*":  # expandStars (Plan.hs) would expand it beside an aggregate
                raise Refused(400, "PGRST100", "'*' beside an aggregate is outside the subset")
            out.append(SelectItem(_ident(item, "select columns")))
        elif match["count"]:
            out.append(SelectItem(None, "count", match["alias"]))
        else:
            out.append(SelectItem(match["column"], match["fn"], match["alias"]))
    return out


def _columns_param(raw: str) -> list[str]:
    """``columns=`` as supabase-py sends it: each name in double quotes."""
    names = []
    for item in raw.split(","):
        if len(item) >= 2 and item[0] == item[-1] == '"':
            item = item[1:-1]
        names.append(_ident(item, "insert columns"))
    return names


def _in_list(raw: str) -> list[str]:
    """``(a,"b,c",d)``, parsed as PostgREST does: items are split on commas; a double-quoted
    item may hold commas and parentheses (backslash escapes the next character). Input that
    PostgREST would read differently from the obvious reading is refused."""
    if not (raw.startswith("(") and raw.endswith(")")) or raw == "()":
        raise Refused(400, "PGRST100", f"'in' needs a non-empty parenthesised list, got {raw!r}")
    body, values, i = raw[1:-1], [], 0
    if body[0] in " \t":
        raise Refused(
            400,
            "PGRST100",
            f"'in' list {raw!r} starts with a blank",
            "PostgREST drops the blanks before the first item",
        )
    while True:
        if body[i : i + 1] == '"':
            item, i = [], i + 1
            while i < len(body) and body[i] != '"':
                i += body[i] == "\\"
                item.append(body[i : i + 1])
                i += 1
            if i >= len(body):
                raise Refused(400, "PGRST100", f"unterminated quote in 'in' list {raw!r}")
            values.append("".join(item))
            i += 1
        else:
            end = i
            while end < len(body) and body[end] not in ",)":
                end += 1
            values.append(body[i:end])
            i = end
        if i == len(body):
            return values
        if body[i] != ",":
            raise Refused(
                400,
                "PGRST100",
                f"unexpected {body[i]!r} in 'in' list {raw!r}",
                "quote items that contain commas, parentheses or quotes",
            )
        i += 1


def _filter(table: str, column: str, raw: str, params: list[Any]) -> sql.Composable:
    """One ``col=[not.]op.value`` filter as SQL; its value(s) are appended to ``params``."""
    if column.lower() in RESERVED:
        raise Refused(
            400,
            "PGRST100",
            f"{column!r} is a reserved query name, not a column",
            "reserved names used as filter columns rewrite the query in PostgREST",
        )
    ident = sql.Identifier(table, _ident(column, "filter columns"))  # qualified, as PostgREST does
    negate = raw.startswith("not.")
    if negate:
        raw = raw[4:]
    op, dot, value = raw.partition(".")
    if not dot:
        raise Refused(400, "PGRST100", f"filter {column}={raw!r} is not 'operator.value'")
    if op in OPERATORS:
        if op in ("like", "ilike"):
            value = value.replace("*", "%")  # PostgREST accepts * as the wildcard too
        clause = sql.SQL("{} {} %s").format(ident, sql.SQL(OPERATORS[op]))
        params.append(value)
    elif op == "in":
        items = _in_list(value)
        placeholders = sql.SQL(", ").join(sql.Placeholder() * len(items))
        clause = sql.SQL("{} IN ({})").format(ident, placeholders)
        params.extend(items)
    elif op == "is" and value in ("null", "true", "false"):
        clause = sql.SQL("{} IS {}").format(ident, sql.SQL(value.upper()))
    else:
        raise Refused(
            400,
            "PGRST100",
            f"operator {op!r} in {column}={raw!r} is outside the subset",
            "supported: eq neq gt gte lt lte like ilike in is(null|true|false), not.",
        )
    return sql.SQL("NOT ({})").format(clause) if negate else clause


def _order(raw: str) -> list[sql.Composable]:
    terms = []
    for term in raw.split(","):
        parts = term.split(".")
        if not 1 <= len(parts) <= 3:
            raise Refused(400, "PGRST100", f"order term {term!r} is outside the subset")
        name, *mods = parts
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
    offset: int = 0
    columns: list[str] | None = None
    #: A select with aggregates (None: none), grouped by its plain columns.
    aggregated: list[SelectItem] | None = None


def parse(method: str, table: str, params: list[tuple[str, str]]) -> Query:
    q = Query(_ident(table, "table names"))
    allowed = {
        "GET": {"select", "order", "limit", "offset"},
        "POST": {"select", "columns"},
        "PATCH": {"select"},
    }[method]
    seen: set[str] = set()
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
                q.aggregated = _select_items(value) if method == "GET" else None
                if q.aggregated is None:
                    q.select = _select_list(value)
            elif key == "order":
                q.order = _order(value)
            elif key == "limit":
                q.limit = _int(value, "limit")
            elif key == "offset":
                q.offset = _int(value, "offset")
            else:
                q.columns = _columns_param(value)
        elif method == "POST":
            raise Refused(400, "PGRST100", f"query parameter {key!r} is not allowed on an insert")
        else:
            q.where.append(_filter(q.table, key, value, q.params))
    return q


def _prefer(header: str, method: str) -> dict[str, str]:
    allowed = {"count": {"exact"}, "return": {"representation", "minimal"}, "missing": {"default"}}
    out = {}
    for item in filter(None, (p.strip() for p in header.split(","))):
        name, _, value = item.partition("=")
        if value not in allowed.get(name, ()) or (name != "count" and method == "GET"):
            raise Refused(
                400,
                "PGRST100",
                f"Prefer: {item} is outside the subset",
                "supported: count=exact, return=representation|minimal, missing=default",
            )
        out[name] = value
    return out


def _aggregated(table: str, items: list[SelectItem]) -> tuple[sql.Composable, sql.Composable]:
    """The select list and the GROUP BY of an aggregated read, as PostgREST writes them:
    pgFmtSelectItem applies ``FN(field)`` and ``AS alias`` (pgFmtApplyAggregate, pgFmtAs),
    ``count()`` counts the whole row (pgFmtColumn's ``table.*``); groupF groups by every
    select item without an aggregate (pgFmtGroup: its alias, else the qualified column), and
    by nothing when there is none. Without an alias, PostgreSQL names the column after the
    function, as it does for PostgREST."""
    qualified = sql.Identifier(table)
    selects, groups = [], []
    for item in items:
        if item.fn is None:
            column = sql.SQL("{}.{}").format(qualified, sql.Identifier(item.column or ""))
            selects.append(column)
            groups.append(column)
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
    group = sql.SQL(" GROUP BY ") + sql.SQL(", ").join(groups) if groups else sql.SQL("")
    return sql.SQL(", ").join(selects), group


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
    if row is None:
        return False
    text = "".join(ch for ch in row[0] if ch.isalpha()).title()  # coerceBool (Config.hs)
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(row[0]) > 0
    except ValueError:
        return False


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
            if seen.method not in ("GET", "POST", "PATCH"):
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
            prefer = _prefer(seen.headers.get("prefer", ""), seen.method)
            query = parse(seen.method, seen.table, seen.query)
            status, headers, payload = self._execute(seen, query, claims, prefer)
        except Refused as exc:
            seen.kind, seen.error = exc.kind, exc.body
            status, headers, payload = exc.status, {}, json.dumps(exc.body)
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
        self, seen: Seen, q: Query, claims: dict[str, Any], prefer: dict[str, str]
    ) -> tuple[int, dict[str, str], str]:
        table = sql.Identifier("public", q.table)
        where = sql.SQL(" AND ").join(q.where) if q.where else sql.SQL("true")
        returned = (
            sql.SQL("*") if q.select is None else sql.SQL(", ").join(map(sql.Identifier, q.select))
        )
        group = sql.SQL("")
        if q.aggregated is not None:
            if prefer.get("count") == "exact":
                raise Refused(
                    400, "PGRST100", "Prefer: count=exact with aggregates is outside the subset"
                )
            returned, group = _aggregated(q.table, q.aggregated)
        headers: dict[str, str] = {}
        with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            if q.aggregated is not None and not _aggregates_enabled(cur):  # as authenticator
                raise Refused(
                    400, "PGRST123", "Use of aggregate functions is not allowed", kind="config"
                )
            # What PostgREST does at the start of every request.
            cur.execute(
                "SELECT set_config('role', %s, true), "
                "set_config('request.jwt.claims', %s, true), "
                "set_config('request.method', %s, true), "
                "set_config('request.path', %s, true)",
                (claims["role"], json.dumps(claims), seen.method, seen.path),
            )
            cur.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(claims["role"])))
            if seen.method == "GET":
                query = sql.SQL("SELECT {} FROM {} WHERE {}{}").format(
                    returned, table, where, group
                )
                params = list(q.params)
                if q.order:
                    query += sql.SQL(" ORDER BY ") + sql.SQL(", ").join(q.order)
                if q.limit is not None:
                    query += sql.SQL(" LIMIT %s")
                    params.append(q.limit)
                if q.offset:
                    query += sql.SQL(" OFFSET %s")
                    params.append(q.offset)
                rows, n = self._json(cur, query, params)
                if prefer.get("count") == "exact":
                    cur.execute(
                        sql.SQL("SELECT count(*) FROM {} WHERE {}").format(table, where), q.params
                    )
                    total = str(cur.fetchone()[0])
                else:
                    total = "*"
                span = f"{q.offset}-{q.offset + n - 1}" if n else "*"
                headers["Content-Range"] = f"{span}/{total}"
                return 200, headers, rows
            if seen.method == "POST":
                rows = seen.body if isinstance(seen.body, list) else [seen.body]
                status = 201
                changed, params = self._insert(rows, q, prefer.get("missing") == "default")
            else:
                status = 200
                changed, params = self._update(seen.body, q, where)
            query = sql.SQL("SELECT {} FROM changed").format(returned)
            rows, n = self._json(cur, query, params, changed=changed)
            headers["Content-Range"] = f"*/{n}"
            if prefer.get("return") != "representation":
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
                parse_qsl(url.query, keep_blank_values=True),
                {k.lower(): v for k, v in self.headers.items()},
                body,
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
