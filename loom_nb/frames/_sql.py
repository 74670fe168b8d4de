"""The DuckDB statements of the frames calls, built from the parsed call (``_tables.grammar``)
and never from the model's text: identifiers only after the allowlist check, always quoted;
every value a named parameter (``$p1``), converted to the column's dtype as the pandas
backend converts it (``_values.value_for`` on the column's zero-row sample).

The statements follow the pandas backend's rules: a missing value (NULL, and NaN, made NULL
as the table is read unless DuckDB's scan of a DataFrame has done it) matches only
``is_null``; sorting puts missing values last both ways and keeps the table's row order among
ties (``ROW``, each row's position); groups are ``GROUP BY``'s, the missing group last; a bins
group holds each bin's left edge, bins ``[left, right)``, the last ``[left, right]``. The tool
runs the very text the export shows (``_duck_code.py``), with the tables' names the connection
knows (``ref``), but for the NaN rules of a DuckDB table whose statistics show no NaN at the
call (``Source.nan_free``): the tool leaves them out, the export keeps them for the data it
will find.

No DuckDB import here: the text is built the same way whether or not it is run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from loom_nb._tables.grammar import Aggregate, AggregateQuery, Filter, GroupKey, Select
from loom_nb._tables.options import Relationship
from loom_nb._tools import ToolInputError
from loom_nb.frames._aggregate import check_aggregate, check_bins
from loom_nb.frames._buckets import check_bucket
from loom_nb.frames._filters import check_operator, check_ordered_value
from loom_nb.frames._values import BadValue, dtype_kind, value_for

# The statements' own columns are named with a space: a column a call names is a plain
# identifier (``IDENTIFIER``), so no column of the user's can take these names, in any case
# (DuckDB matches names case-insensitively).
#: Each row's position in its table: the index of a select's result, and its tie-break.
ROW = "__loom row"
#: Before a float column's name: the column as stored, NaN kept, which filters read.
RAW = "__loom raw "

_COMPARE = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_FUNCTIONS = {
    "mean": "avg",
    "median": "median",
    "min": "min",
    "max": "max",
    "std": "stddev_samp",
    "var": "var_samp",
}
#: The grammar's buckets as date_trunc's parts (constants: the grammar checked the name).
_PARTS = {"day": "'day'", "week": "'week'", "month": "'month'", "quarter": "'quarter'"}
_PARTS["year"] = "'year'"


def quote(name: str) -> str:
    """An identifier as SQL: always quoted (the allowlist has checked it already)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass
class Statement:
    """One statement: its text and its named parameters."""

    sql: str
    params: dict[str, Any] = field(default_factory=dict)

    def param(self, value: Any) -> str:
        """A placeholder for ``value``."""
        name = f"p{len(self.params) + 1}"
        self.params[name] = value
        return f"${name}"


@dataclass(frozen=True)
class Source:
    """What the statements read: each table's name on the connection (``ref``) and its
    zero-row sample (the dtypes DuckDB gives its columns)."""

    ref: Callable[[str], str]
    samples: Mapping[str, pd.DataFrame]
    #: The columns a call may name of each table, as the allowlist has them.
    allowed: Callable[[str], list[str]]
    #: Whether DuckDB reads no NaN in a table's float column (a DataFrame's scan makes NaN
    #: NULL itself; a DuckDB table's statistics may say it holds none): it is read as stored,
    #: without the NaN rules below.
    nan_free: Callable[[str, str], bool] = lambda _table, _column: False


@dataclass(frozen=True)
class Plan:
    """The FROM and WHERE of a call, the statement they were built in, and the zero-row frame
    the call reads (its own columns, and ``customers.tier`` for a joined one)."""

    statement: Statement
    from_: str
    where: str
    sample: pd.DataFrame


def _read(
    source: Source,
    table: str,
    columns: Sequence[str],
    *,
    with_row: bool = False,
    screened: Collection[str] = (),
) -> str:
    """A table with only ``columns``, its float NaN as NULL (Parquet keeps NaN apart from
    NULL; pandas calls both missing) and, ``with_row``, each row's position. A float column
    also comes as stored (``RAW``), for the filters: DuckDB pushes a comparison of a column
    into the scan (a Parquet file's row groups skipped by their statistics), not one of
    ``nullif`` over a glob or a DataFrame, whose NaN it cannot rule out. A table DuckDB reads
    no NaN in (``Source.nan_free``) is read as stored, and so is a ``screened`` column: a filter
    on it keeps no row whose value is NaN (``_filter``), so ``nullif`` would find none."""
    dtypes = source.samples[table].dtypes
    parts = []
    for c in dict.fromkeys(columns):
        if dtype_kind(dtypes[c]) == "float" and not source.nan_free(table, c):
            kept = quote(c) if c in screened else f"nullif({quote(c)}, 'NaN'::DOUBLE) AS {quote(c)}"
            parts.append(kept)
            parts.append(f"{quote(c)} AS {quote(RAW + c)}")
        else:
            parts.append(quote(c))
    if with_row:
        parts.append(f"row_number() OVER () - 1 AS {quote(ROW)}")
    return f"(SELECT {', '.join(parts) or '1'} FROM {source.ref(table)})"


def plan(
    source: Source,
    table: str,
    joins: Sequence[Relationship],
    names: Sequence[str],
    filters: Sequence[Filter],
    *,
    with_row: bool = False,
) -> Plan:
    """The FROM (the table, each join a LEFT JOIN or, when a filter names its columns, an
    INNER one, of its rows with a key) and the WHERE of ``filters``."""
    statement = Statement("")
    own = [n for n in names if "." not in n]
    base = [*own, *(r.column for r in joins)]
    # Every filter but is_null rules out NaN as it compares (``_filter``): the rows it keeps
    # hold none in its column. (A negated is_null reads the column with its NaN as NULL.)
    screened = [f.column for f in filters if f.op != "is_null"]
    own_screened = {c for c in screened if "." not in c}
    from_ = f'{_read(source, table, base, with_row=with_row, screened=own_screened)} AS "b"'
    # Zero rows each (a DataFrame's sample is the frame itself): side by side, rows would
    # align on the index and fill with NaN, turning a bool column into object.
    # Zero rows first: a joined DataFrame's sample is the frame itself, whose columns a
    # selection would copy.
    sample = source.samples[table].iloc[:0][list(dict.fromkeys(own))]
    inner = {f.column.partition(".")[0] for f in filters if "." in f.column}
    for i, r in enumerate(joins):
        used = [r.other_column]
        used += [n.partition(".")[2] for n in names if n.partition(".")[0] == r.other]
        alias = quote(f"j{i}")
        kind = "JOIN" if r.other in inner else "LEFT JOIN"
        right = _read(
            source,
            r.other,
            used,
            screened={c.partition(".")[2] for c in screened if c.partition(".")[0] == r.other},
        )
        from_ += (
            f" {kind} (SELECT * FROM {right} WHERE {quote(r.other_column)} IS NOT NULL) AS "
            f'{alias} ON "b".{quote(r.column)} = {alias}.{quote(r.other_column)}'
        )
        other = source.samples[r.other].iloc[:0][list(dict.fromkeys(used))]
        sample = pd.concat([sample, other.add_prefix(f"{r.other}.")], axis=1)
    where = [_filter(source, statement, table, sample, joins, f) for f in filters]
    return Plan(statement, from_, " AND ".join(where), sample)


def column(joins: Sequence[Relationship], name: str) -> str:
    """A column a call names, as SQL: ``"b"."total"``, or ``"j0"."tier"`` for
    ``customers.tier``."""
    other, _, col = name.partition(".")
    if not col:
        return f'"b".{quote(name)}'
    at = next(i for i, r in enumerate(joins) if r.other == other)
    return f"{quote(f'j{at}')}.{quote(col)}"


def _filter(
    source: Source,
    statement: Statement,
    table: str,
    sample: pd.DataFrame,
    joins: Sequence[Relationship],
    f: Filter,
) -> str:
    c = column(joins, f.column)
    col = sample[f.column]
    if f.op == "is_null":
        return f"{c} IS NOT NULL" if f.negate else f"{c} IS NULL"
    # A float column compares as stored, NaN ruled out apart (DuckDB orders NaN above every
    # number): the comparison goes into the scan. ``isnan``, not the range ``< NaN``, which
    # doubled the time over a DataFrame's scan.
    nan_free = ""
    other, _, name = f.column.rpartition(".")
    if dtype_kind(col.dtype) == "float" and not source.nan_free(other or table, name):
        c = column(joins, f"{other}.{RAW}{name}" if other else RAW + name)
        nan_free = f" AND NOT isnan({c})"
    try:
        if f.op in ("like", "ilike"):
            check_operator(table, f, col)
            text = f"CAST({c} AS VARCHAR)" if dtype_kind(col.dtype) == "category" else c
            op = "ILIKE" if f.op == "ilike" else "LIKE"
            hit = f"{text} {op} {statement.param(like_pattern(f.value))} ESCAPE '\\'"
        elif f.op == "in":
            values = [statement.param(value_for(col, v)) for v in f.value]
            hit = f"{c} IN ({', '.join(values)})"
        else:
            value = value_for(col, f.value)
            check_operator(table, f, col)
            if f.op in _ORDERING and dtype_kind(col.dtype) == "category":
                c, value = _enum_position(table, f, c, col, value)
            hit = f"{c} {_COMPARE[f.op]} {statement.param(value)}"
    except BadValue as exc:
        raise ToolInputError(f"column {table}.{f.column} {exc}") from None
    # NOT of NULL is NULL: a missing value matches no comparison, negated or not, as in pandas'
    # backend.
    return f"(NOT ({hit}){nan_free})" if f.negate else f"({hit}{nan_free})"


_ORDERING = ("gt", "gte", "lt", "lte")


def _enum_position(table: str, f: Filter, c: str, col: pd.Series, value: Any) -> tuple[str, int]:
    """An ordering comparison on an ENUM (an ordered category) by the value's position
    among the categories, as pandas compares: DuckDB would compare a text parameter with the
    ENUM as text. A value that is not a category cannot be ordered (pandas refuses too)."""
    check_ordered_value(table, f, col, value)
    return f"enum_code({c})", list(col.cat.categories).index(value)


def like_pattern(pattern: str) -> str:
    """The model's LIKE pattern as DuckDB reads it with ``ESCAPE '\\'``: the same, except a
    lone backslash at the end, which the pandas backend takes literally and DuckDB refuses."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\":
            out.append("\\" + pattern[i + 1] if i + 1 < len(pattern) else "\\\\")
            i += 2
            continue
        out.append(pattern[i])
        i += 1
    return "".join(out)


def _clauses(p: Plan) -> str:
    return f" FROM {p.from_}" + (f" WHERE {p.where}" if p.where else "")


def select_statements(source: Source, q: Select, columns: Sequence[str]) -> tuple[Statement, ...]:
    """The page (each row's position beside it, as ``ROW``) and the count of all
    matching rows."""
    names = [*columns, *(f.column for f in q.filters), *(c for c, _ in q.order)]
    p = plan(source, q.table, q.joins, names, q.filters, with_row=True)
    picked = [f"{column(q.joins, c)} AS {quote(c)}" for c in columns]
    desc: dict[str, bool] = {}
    for c, descending in q.order:
        desc.setdefault(c, descending)  # the first mention of a column decides
    order = [f"{column(q.joins, c)} {'DESC' if d else 'ASC'} NULLS LAST" for c, d in desc.items()]
    order.append(f'"b".{quote(ROW)}')
    page = p.statement
    count = Statement(f"SELECT count(*){_clauses(p)}", dict(page.params))
    page.sql = (
        f"SELECT {', '.join([*picked, f'{column(q.joins, ROW)} AS {quote(ROW)}'])}"
        + _clauses(p)
        + f" ORDER BY {', '.join(order)}"
    )
    page.sql += f" LIMIT {page.param(q.limit)} OFFSET {page.param(q.offset)}"
    return page, count


def check_aggregate_query(source: Source, q: AggregateQuery, sample: pd.DataFrame) -> None:
    """The pandas backend's refusals, on the zero-row sample: the same messages."""
    for k in q.group_by:
        if k.bucket is not None:
            table = source.samples[q.table]  # whose datetime columns a refusal names
            check_bucket(q.table, sample[k.column], k, table, source.allowed(q.table))
        if k.bins is not None:
            check_bins(q.table, sample[k.column], k)
    for a in q.aggregates:
        if a.column is not None:
            check_aggregate(q.table, sample[a.column], a)


def aggregate_names(q: AggregateQuery) -> list[str]:
    used = [*(k.column for k in q.group_by), *(a.column for a in q.aggregates if a.column)]
    return [*dict.fromkeys(used), *(f.column for f in q.filters)]


def range_statement(source: Source, q: AggregateQuery, key: GroupKey) -> Statement:
    """The smallest and largest matching value of a ``bins: N`` group's column: its edges
    are ``np.histogram_bin_edges`` of them, as the pandas backend's."""
    p = plan(source, q.table, q.joins, aggregate_names(q), q.filters)
    c = column(q.joins, key.column)
    p.statement.sql = f"SELECT min({c}), max({c}){_clauses(p)}"
    return p.statement


def aggregate_statement(
    source: Source, q: AggregateQuery, edges: Mapping[str, Any]
) -> tuple[Statement, pd.DataFrame]:
    """One row per group, in ``GROUP BY``'s order (then the call's ``order``), the page of
    them; one row without ``group_by``. ``edges`` holds each bins group's edges (a list, or
    what the export's code names them by). Also the zero-row frame the call reads, for the
    checks."""
    p = plan(source, q.table, q.joins, aggregate_names(q), q.filters)
    check_aggregate_query(source, q, p.sample)
    s = p.statement
    keys = [_group_key(s, q.joins, p.sample, k, edges) for k in q.group_by]
    outputs = [f"{sql} AS {quote(k.output)}" for sql, k in zip(keys, q.group_by, strict=True)]
    outputs += [f"{_aggregate(s, q.joins, p.sample, a)} AS {quote(a.output)}" for a in q.aggregates]
    if not q.group_by:
        s.sql = f"SELECT {', '.join(outputs)}{_clauses(p)}"
        return s, p.sample
    order = [f"{quote(c)} {'DESC' if d else 'ASC'} NULLS LAST" for c, d in q.order]
    order += [f"{quote(k.output)} ASC NULLS LAST" for k in q.group_by]
    s.sql = (
        f"SELECT {', '.join(outputs)}{_clauses(p)} GROUP BY ALL ORDER BY {', '.join(order)}"
        f" LIMIT {s.param(q.limit)} OFFSET {s.param(q.offset)}"
    )
    return s, p.sample


def _group_key(
    s: Statement,
    joins: Sequence[Relationship],
    sample: pd.DataFrame,
    k: GroupKey,
    edges: Mapping[str, Any],
) -> str:
    c = column(joins, k.column)
    if k.bucket is not None:
        return _bucket(c, sample[k.column].dtype, k.bucket)
    if k.bins is None:
        return c
    # Each value's bin by its left edge, as pd.cut over the edges: [e0, e1), ..., [e_{n-1},
    # e_n]; below, above or missing: NULL, a group of its own.
    found = s.param(edges[k.output])
    n = len(k.bins) - 1 if isinstance(k.bins, tuple) else k.bins

    def edge(i: int) -> str:
        return f"({found}::DOUBLE[])[{i + 1}]"

    branches = [f"WHEN {c} < {edge(0)} THEN NULL"]
    branches += [f"WHEN {c} < {edge(i + 1)} THEN {edge(i)}" for i in range(n - 1)]
    branches.append(f"WHEN {c} <= {edge(n)} THEN {edge(n - 1)}")
    return f"CASE {' '.join(branches)} END"


#: Time zones whose wall clock is UTC's: their buckets need no time zone rules.
_UTC = frozenset({"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Etc/Universal", "Universal", "Zulu"})
_DAY_US = 86_400_000_000
#: 1970-01-05, the first Monday after day 0, in microseconds.
_MONDAY_US = 4 * _DAY_US


def _bucket(c: str, dtype: Any, bucket: str) -> str:
    """The start of each value's bucket, with the column's type. A ``TIMESTAMPTZ`` column
    comes back in the connection's time zone, whose calendar ``date_trunc`` follows (with ICU,
    about 7x slower than without); in UTC, the bucket is plain arithmetic on microseconds since
    1970 (days, Monday weeks) or ``date_trunc`` of the same instant without a zone."""
    if str(getattr(dtype, "tz", None)) not in _UTC:
        return f"date_trunc({_PARTS[bucket]}, {c})"
    us = f"epoch_us({c})"
    if bucket in ("day", "week"):
        width = _DAY_US if bucket == "day" else 7 * _DAY_US
        start = 0 if bucket == "day" else _MONDAY_US
        return f"make_timestamptz(({us} - {start}) // {width} * {width} + {start})"
    return f"make_timestamptz(epoch_us(date_trunc({_PARTS[bucket]}, make_timestamp({us}))))"


def _aggregate(
    s: Statement, joins: Sequence[Relationship], sample: pd.DataFrame, a: Aggregate
) -> str:
    """SQL's aggregate of the pandas backend's: a sum of no values is NULL, count_distinct
    and median ignore missing values, std and var the sample's, a percentile
    ``quantile_cont`` (linear, as ``Series.quantile``); booleans count as 0 and 1."""
    if a.column is None:
        return "count(*)"
    c = column(joins, a.column)
    kind = dtype_kind(sample[a.column].dtype)
    if kind == "bool" and a.fn not in ("count", "count_distinct", "min", "max"):
        c = f"CAST({c} AS INTEGER)"
    if kind == "timedelta" and a.fn in ("sum", "mean", "median", "std"):
        # DuckDB has no sum or std of an INTERVAL and rounds its mean: pandas' figures, over
        # whole microseconds, truncated as pandas truncates a duration it computed as a float.
        us = f"epoch_us({c})"
        if a.fn == "sum":
            return f"to_microseconds(CAST(sum({us}) AS BIGINT))"
        return f"to_microseconds(CAST(trunc({_FUNCTIONS[a.fn]}({us})) AS BIGINT))"
    if a.fn == "count":
        return f"count({c})"
    if a.fn == "count_distinct":
        return f"count(DISTINCT {c})"
    if a.fn == "sum":
        return f"CAST(sum({c}) AS BIGINT)" if kind in ("int", "bool") else f"sum({c})"
    if a.fn == "percentile":
        return f"quantile_cont({c}, {s.param(float(a.p or 0.0))})"
    return f"{_FUNCTIONS[a.fn]}({c})"


def join_checks(source: Source, table: str, r: Relationship) -> tuple[Statement, Statement]:
    """How often the target key repeats (a relationship must give each row at most one
    match, as ``validate="many_to_one"``), and how many of ``table``'s rows have no match."""
    key = quote(r.other_column)
    repeats = Statement(f"SELECT count({key}) - count(DISTINCT {key}) FROM {source.ref(r.other)}")
    unmatched = Statement(
        f'SELECT count(*) FROM {source.ref(table)} AS "b" LEFT JOIN '
        f'(SELECT {key} FROM {source.ref(r.other)} WHERE {key} IS NOT NULL) AS "j" '
        f'ON "b".{quote(r.column)} = "j".{key} WHERE "j".{key} IS NULL'
    )
    return repeats, unmatched


def groups_statement(source: Source, q: AggregateQuery, edges: Mapping[str, Any]) -> Statement:
    """The number of groups, when the page does not tell (a full page, or one past the
    last group): a count beside each group would cost as much again as the groups."""
    p = plan(source, q.table, q.joins, aggregate_names(q), q.filters)
    keys = [_group_key(p.statement, q.joins, p.sample, k, edges) for k in q.group_by]
    p.statement.sql = f"SELECT count(*) FROM (SELECT {', '.join(keys)}{_clauses(p)} GROUP BY ALL)"
    return p.statement
