"""What the model may ask a table connector for, checked against the user's allowlist.

The model never writes query syntax. It fills a small JSON object: a table from an enum,
plain column names, filters from a fixed operator set. ``parse_*`` checks that object against
the allowlist and turns it into typed values; each backend maps those to its own calls.
A refused input raises :class:`ToolInputError`, which reaches the model as an error result
before any request is made.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from loom_nb._code import kept_parse
from loom_nb._tables.options import IDENTIFIER, RESERVED, Relationship, TableSpec
from loom_nb._tools import ToolInputError

Operator = Literal["eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike", "in", "is_null"]
OPERATORS: tuple[str, ...] = (
    "eq",
    "neq",
    "gt",
    "gte",
    "lt",
    "lte",
    "like",
    "ilike",
    "in",
    "is_null",
)

Scalar = str | int | float | bool

#: Time buckets a datetime column can be grouped by; weeks start on Monday (ISO 8601).
BUCKETS: tuple[str, ...] = ("day", "week", "month", "quarter", "year")


@dataclass(frozen=True)
class Filter:
    column: str
    op: str
    value: Any = None
    negate: bool = False


#: Every aggregate function the grammar knows; a backend computes some of them
#: (:attr:`AggregateRules.functions`) and refuses the others by name, before any request.
KNOWN_FUNCTIONS: tuple[str, ...] = (
    "count",
    "count_distinct",
    "sum",
    "mean",
    "avg",
    "median",
    "min",
    "max",
    "std",
    "var",
    "percentile",
)
#: The most bins one bins group may have (explicit edges: one more).
MAX_BINS = 1000


@dataclass(frozen=True)
class GroupKey:
    """One group_by entry: a column's values, the time bucket of a datetime column, or the
    bins of a numeric column."""

    column: str
    #: None: the values themselves; else one of :data:`BUCKETS`.
    bucket: str | None = None
    #: A number of equal-width bins over the matching values, or the bins' edges.
    bins: int | tuple[float, ...] | None = None

    @property
    def output(self) -> str:
        """The result's column: the column's name, ``week_created_at`` for a bucket,
        ``bin_total`` for bins."""
        if self.bins is not None:
            return f"bin_{self.column}"
        return self.column if self.bucket is None else f"{self.bucket}_{self.column}"


@dataclass(frozen=True)
class Aggregate:
    fn: str
    #: None: count rows.
    column: str | None
    #: A percentile's fraction, 0 to 1 (0.9: the 90th percentile).
    p: float | None = None

    @property
    def output(self) -> str:
        """The result's column: ``sum_total``, ``p90_total``, or ``count`` for a row count."""
        if self.fn == "percentile" and self.p is not None:
            return f"p{percent_text(self.p)}_{self.column}"
        return self.fn if self.column is None else f"{self.fn}_{self.column}"


def percent_text(p: float) -> str:
    """``90`` for 0.9, ``99_9`` for 0.999: a percentile in an output name."""
    return f"{round(p * 100, 6):g}".replace(".", "_").replace("-", "")


@dataclass(frozen=True)
class AggregateQuery:
    table: str
    group_by: tuple[GroupKey, ...]
    aggregates: tuple[Aggregate, ...]
    filters: tuple[Filter, ...]
    order: tuple[tuple[str, bool], ...]
    #: The groups the call's frame takes: the model's limit, at most ``frame_rows``.
    limit: int
    offset: int
    #: The limit the model asked for (None: every group, up to ``frame_rows``).
    asked: int | None = None
    #: The declared relationships the call joins along.
    joins: tuple[Relationship, ...] = ()

    @property
    def outputs(self) -> list[str]:
        """The result's columns, in order: the groups', then the aggregates'."""
        return [*(k.output for k in self.group_by), *(a.output for a in self.aggregates)]


@dataclass(frozen=True)
class AggregateRules:
    """What one backend's aggregate tool can compute; the rest of the grammar is shared."""

    #: Who computes the totals, as a refusal names it (``PostgREST``).
    backend: str
    #: The aggregate functions, by the names the model sends.
    functions: tuple[str, ...]
    #: The time buckets group_by may take (of :data:`BUCKETS`); none: plain columns only.
    buckets: tuple[str, ...] = ()
    #: Whether order may name an aggregate's output, or only group_by columns.
    order_by_totals: bool = True
    #: The longest output name the backend keeps whole (PostgreSQL cuts identifiers at 63).
    max_output_name: int | None = None
    #: Whether group_by may take bins of a numeric column.
    bins: bool = False


@dataclass(frozen=True)
class Select:
    table: str
    #: Columns to return; None means all (only when the table has no ``columns`` list).
    columns: tuple[str, ...] | None
    filters: tuple[Filter, ...] = ()
    #: (column, descending) pairs.
    order: tuple[tuple[str, bool], ...] = ()
    #: The rows the call's frame takes: the model's limit, at most ``frame_rows``.
    limit: int = 10_000
    offset: int = 0
    count: bool = False
    #: The limit the model asked for (None: every matching row, up to ``frame_rows``).
    asked: int | None = None
    #: The declared relationships the call joins along.
    joins: tuple[Relationship, ...] = ()


@dataclass(frozen=True)
class Insert:
    table: str
    rows: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Update:
    table: str
    values: dict[str, Any]
    filters: tuple[Filter, ...] = field(default=())


def lookup_table(tables: Mapping[str, TableSpec], name: Any, *, write: bool = False) -> TableSpec:
    spec = tables.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ToolInputError(f"unknown table {name!r}; the tables are {sorted(tables)}")
    if write and not spec.write:
        writable = sorted(t for t, s in tables.items() if s.write)
        raise ToolInputError(f"table {name!r} is read-only; writable tables: {writable}")
    return spec


@dataclass(frozen=True)
class Scope:
    """A table and the tables a call joins to it: their columns are written ``customers.tier``."""

    spec: TableSpec
    joined: Mapping[str, TableSpec]


Columns = TableSpec | Scope


def check_column(spec: Columns, name: Any) -> str:
    if isinstance(spec, Scope):
        if isinstance(name, str) and "." in name:
            table, _, column = name.partition(".")
            other = spec.joined.get(table)
            if other is None:
                joined = sorted(spec.joined)
                raise ToolInputError(
                    f"{name!r} names table {table!r}, which this call does not join"
                    + (f" (it joins {joined})" if joined else "")
                    + "; name a related table in join, like join: ['customers']"
                )
            return f"{table}.{check_column(other, column)}"
        spec = spec.spec
    if not isinstance(name, str) or not IDENTIFIER.match(name) or name.lower() in RESERVED:
        raise ToolInputError(
            f"{name!r} is not a plain column name (no relations, JSON paths, casts or aliases; "
            "a joined table's column is written customers.tier)"
        )
    if spec.columns is not None and name not in spec.columns:
        raise ToolInputError(
            f"column {name!r} is not available in {spec.name!r}; use one of {list(spec.columns)}"
        )
    return name


def parse_joins(
    args: Mapping[str, Any],
    spec: TableSpec,
    tables: Mapping[str, TableSpec],
    relationships: Sequence[Relationship],
) -> tuple[Scope, tuple[Relationship, ...]]:
    """``join: ["customers"]``: tables related to ``spec`` by a declared relationship (this
    table holding the reference), each once; the scope their columns are read in."""
    raw = args.get("join")
    related = {r.other: r for r in relationships if r.table == spec.name}
    if raw is None or raw == []:
        return Scope(spec, {}), ()
    if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
        raise ToolInputError("join must be a list of table names, like ['customers']")
    joins: list[Relationship] = []
    for name in dict.fromkeys(raw):
        r = related.get(name)
        if r is None:
            may = sorted(related)
            raise ToolInputError(
                f"{spec.name!r} has no declared relationship to {name!r}, so it cannot be "
                f"joined; {spec.name} may join {may}"
                if may
                else f"{spec.name!r} has no declared relationship to {name!r}, so it cannot be "
                f"joined (no relationship is declared from {spec.name!r})"
            )
        joins.append(r)
    return Scope(spec, {r.other: tables[r.other] for r in joins}), tuple(joins)


def _scalar(value: Any, where: str) -> Scalar:
    if isinstance(value, (str, int, float, bool)):
        return value
    raise ToolInputError(f"{where}: expected a string, number or boolean, got {value!r}")


def parse_filters(spec: Columns, raw: Any) -> tuple[Filter, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ToolInputError("filters must be a list of {column, op, value} objects")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise ToolInputError(f"filters[{i}] must be an object")
        extra = set(item) - {"column", "op", "value", "not"}
        if extra:
            raise ToolInputError(f"filters[{i}] has unknown keys {sorted(extra)}")
        column = check_column(spec, item.get("column"))
        op = item.get("op")
        if op not in OPERATORS:
            raise ToolInputError(f"filters[{i}].op {op!r} is not one of {list(OPERATORS)}")
        negate = item.get("not", False)
        if not isinstance(negate, bool):
            raise ToolInputError(f"filters[{i}].not must be true or false")
        value = item.get("value")
        if op == "is_null":
            if value is not None:
                raise ToolInputError(
                    f"filters[{i}]: is_null takes no value (use not=true for NOT NULL)"
                )
        elif op == "in":
            if not isinstance(value, list) or not value:
                raise ToolInputError(f"filters[{i}]: 'in' takes a non-empty list of values")
            value = tuple(_scalar(v, f"filters[{i}].value") for v in value)
        elif op in ("like", "ilike"):
            if not isinstance(value, str):
                raise ToolInputError(
                    f"filters[{i}]: {op} takes a string pattern (% and _ wildcards)"
                )
        else:
            if value is None:
                raise ToolInputError(
                    f"filters[{i}]: {op} needs a value; to match NULL use op 'is_null'"
                )
            value = _scalar(value, f"filters[{i}].value")
        out.append(Filter(column, op, value, negate))
    return tuple(out)


def parse_int(value: Any, name: str, default: int) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ToolInputError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def parse_group_by(
    spec: Columns,
    raw: Any,
    buckets: Sequence[str],
    bins: bool = False,
    backend: str = "",
) -> tuple[GroupKey, ...]:
    """``["status", {"column": "created_at", "bucket": "week"}, {"column": "total", "bins":
    20}]`` as group keys, each once. With no ``buckets`` (a backend that groups by plain
    columns only), every entry is a column name; bins only when the backend has them."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        if not buckets:
            raise ToolInputError("group_by must be a list of column names")
        raise ToolInputError(
            'group_by must be a list of column names or {"column": C, "bucket": B} objects'
        )
    keys: list[GroupKey] = []
    for i, item in enumerate(raw):
        if isinstance(item, Mapping) and "bins" in item:
            if not bins:
                raise ToolInputError(
                    f"group_by[{i}]: {backend or 'this backend'} cannot group by bins; group "
                    "by columns, or fetch the rows and bin them with a chart"
                )
            if set(item) != {"column", "bins"}:
                raise ToolInputError(f'group_by[{i}] must be {{"column": C, "bins": N or [edges]}}')
            key = GroupKey(check_column(spec, item["column"]), bins=_bins(i, item["bins"]))
        elif not buckets and isinstance(item, Mapping) and "bucket" in item:
            raise ToolInputError(
                f"group_by[{i}]: {backend or 'this backend'} cannot group by a time bucket; "
                "group by a column (the user can allowlist a view with the bucket as a column)"
            )
        elif buckets and isinstance(item, Mapping):
            if set(item) != {"column", "bucket"}:
                raise ToolInputError(
                    f'group_by[{i}] must be a column name or {{"column": C, "bucket": B}}'
                )
            bucket = item["bucket"]
            if bucket not in buckets:
                raise ToolInputError(
                    f"group_by[{i}].bucket {bucket!r} is not one of {list(buckets)}"
                )
            key = GroupKey(check_column(spec, item["column"]), bucket)
        else:
            key = GroupKey(check_column(spec, item))
        if key.output in (k.output for k in keys if k != key):
            raise ToolInputError(f"group_by[{i}] would be named {key.output!r} twice")
        if key not in keys:
            keys.append(key)
    return tuple(keys)


def parse_limit(args: Mapping[str, Any], frame_rows: int) -> tuple[int, int | None]:
    """The rows (or groups) a call's frame takes, and the limit the model asked for: its
    limit, cut to ``frame_rows``; every match up to ``frame_rows`` without one. The model
    sees at most ``max_rows`` of them either way."""
    asked = args.get("limit")
    if asked is None:
        return frame_rows, None
    asked = parse_int(asked, "limit", frame_rows)
    return min(asked, frame_rows), asked


def _bins(i: int, raw: Any) -> int | tuple[float, ...]:
    """A number of bins (1 to :data:`MAX_BINS`) or at least two increasing finite edges."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        if 1 <= raw <= MAX_BINS:
            return raw
    elif isinstance(raw, list) and 2 <= len(raw) <= MAX_BINS + 1:
        numbers = all(isinstance(e, (int, float)) and not isinstance(e, bool) for e in raw)
        if numbers and all(math.isfinite(e) for e in raw):
            edges = tuple(float(e) for e in raw)
            if all(a < b for a, b in itertools.pairwise(edges)):
                return edges
    raise ToolInputError(
        f"group_by[{i}].bins must be a number of bins from 1 to {MAX_BINS}, or a list of at "
        "least two increasing numbers (the bins' edges)"
    )


def _percentile(i: int, raw: Any) -> float:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and 0 <= raw <= 1:
        return float(raw)
    raise ToolInputError(
        f"aggregates[{i}]: percentile needs p, a number from 0 to 1 (0.9 for the 90th)"
    )


@kept_parse
def parse_aggregate(
    args: Mapping[str, Any],
    tables: Mapping[str, TableSpec],
    frame_rows: int,
    rules: AggregateRules,
    relationships: Sequence[Relationship] = (),
) -> AggregateQuery:
    """The aggregate tool's arguments (table, group_by, aggregates, filters, order, paging)
    checked against the allowlist and what ``rules``' backend can compute; at most
    ``frame_rows`` groups."""
    table = lookup_table(tables, args.get("table"))
    spec, joins = parse_joins(args, table, tables, relationships)
    group_by = parse_group_by(spec, args.get("group_by"), rules.buckets, rules.bins, rules.backend)
    group_outputs = [k.output for k in group_by]
    raw = args.get("aggregates") or [{"fn": "count"}]
    if not isinstance(raw, list):
        raise ToolInputError("aggregates must be a list of {fn, column} objects")
    aggregates: list[Aggregate] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or set(item) - {"fn", "column", "p"}:
            raise ToolInputError(
                f"aggregates[{i}] must be an object with 'fn', 'column' (and 'p' for percentile)"
            )
        fn = item.get("fn")
        if fn in KNOWN_FUNCTIONS and fn not in rules.functions:
            raise ToolInputError(
                f"aggregates[{i}]: {rules.backend} cannot compute {fn}; it computes "
                f"{', '.join(rules.functions)}"
            )
        if fn not in rules.functions:
            raise ToolInputError(f"aggregates[{i}].fn {fn!r} is not one of {list(rules.functions)}")
        column = item.get("column")
        if column is None:
            if fn != "count":
                raise ToolInputError(f"aggregates[{i}]: {fn} needs a column")
        else:
            column = check_column(spec, column)
        p = _percentile(i, item.get("p")) if fn == "percentile" else None
        if fn != "percentile" and "p" in item:
            raise ToolInputError(f"aggregates[{i}]: p is for percentile only")
        agg = Aggregate(fn, column, p)
        if rules.max_output_name is not None and len(agg.output) > rules.max_output_name:
            raise ToolInputError(f"aggregates[{i}]: the output name {agg.output!r} is too long")
        if agg.output in group_outputs:
            raise ToolInputError(
                f"aggregates[{i}] would be named {agg.output!r}, like a group_by column"
            )
        if agg not in aggregates:
            if agg.output in (a.output for a in aggregates):  # p=0.9 and p=0.9000000001
                raise ToolInputError(f"aggregates[{i}] would be named {agg.output!r} twice")
            aggregates.append(agg)
    outputs = {*group_outputs, *(a.output for a in aggregates)}

    def output_column(i: int, name: Any) -> str:
        if not rules.order_by_totals and name not in group_outputs:
            raise ToolInputError(
                f"order[{i}].column {name!r}: order by a group_by column ({group_outputs}); "
                f"{rules.backend} cannot order by a total"
            )
        if name not in outputs:
            raise ToolInputError(
                f"order[{i}].column {name!r} is not an output column; use one of {sorted(outputs)}"
            )
        return str(name)

    limit, asked = parse_limit(args, frame_rows)
    return AggregateQuery(
        table=table.name,
        group_by=group_by,
        aggregates=tuple(aggregates),
        filters=parse_filters(spec, args.get("filters")),
        order=parse_order(args.get("order"), output_column),
        limit=limit,
        offset=parse_int(args.get("offset"), "offset", 0),
        asked=asked,
        joins=joins,
    )


@kept_parse
def parse_select(
    args: Mapping[str, Any],
    tables: Mapping[str, TableSpec],
    frame_rows: int,
    relationships: Sequence[Relationship] = (),
) -> Select:
    """The select tool's arguments checked against the allowlist; at most ``frame_rows``
    rows."""
    table = lookup_table(tables, args.get("table"))
    spec, joins = parse_joins(args, table, tables, relationships)
    raw_columns = args.get("columns")
    if raw_columns is None or raw_columns == []:
        columns = table.columns  # None: every column; a list: expanded, so '*' is never sent
        if columns is not None and joins:  # and every allowed column of the joined tables
            joined = [(r.other, tables[r.other].columns) for r in joins]
            if all(c is not None for _, c in joined):
                columns = (*columns, *(f"{t}.{c}" for t, cs in joined for c in cs or ()))
            else:
                columns = None
    else:
        if not isinstance(raw_columns, list):
            raise ToolInputError("columns must be a list of column names")
        columns = tuple(dict.fromkeys(check_column(spec, c) for c in raw_columns))
    order = parse_order(args.get("order"), lambda i, name: check_column(spec, name))
    limit, asked = parse_limit(args, frame_rows)
    count = args.get("count", False)
    if not isinstance(count, bool):
        raise ToolInputError("count must be true or false")
    return Select(
        table=table.name,
        columns=columns,
        filters=parse_filters(spec, args.get("filters")),
        order=tuple(order),
        limit=limit,
        offset=parse_int(args.get("offset"), "offset", 0),
        count=count,
        asked=asked,
        joins=joins,
    )


def parse_order(raw: Any, column: Callable[[int, Any], str]) -> tuple[tuple[str, bool], ...]:
    """``[{column, desc}]`` as (column, descending) pairs; ``column(i, name)`` checks a name."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ToolInputError("order must be a list of {column, desc} objects")
    order = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or set(item) - {"column", "desc"}:
            raise ToolInputError(f"order[{i}] must be an object with 'column' and optional 'desc'")
        desc = item.get("desc", False)
        if not isinstance(desc, bool):
            raise ToolInputError(f"order[{i}].desc must be true or false")
        order.append((column(i, item.get("column")), desc))
    return tuple(order)


def _row(spec: TableSpec, row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, Mapping) or not row:
        raise ToolInputError(f"{where} must be a non-empty object of column: value")
    return {check_column(spec, k): v for k, v in row.items()}


def parse_insert(args: Mapping[str, Any], tables: Mapping[str, TableSpec]) -> Insert:
    spec = lookup_table(tables, args.get("table"), write=True)
    rows = args.get("rows")
    if not isinstance(rows, list) or not rows:
        raise ToolInputError("rows must be a non-empty list of objects")
    return Insert(spec.name, tuple(_row(spec, r, f"rows[{i}]") for i, r in enumerate(rows)))


def parse_update(args: Mapping[str, Any], tables: Mapping[str, TableSpec]) -> Update:
    spec = lookup_table(tables, args.get("table"), write=True)
    filters = parse_filters(spec, args.get("filters"))
    if not filters:
        raise ToolInputError("an update needs at least one filter; updating every row is refused")
    return Update(spec.name, _row(spec, args.get("values"), "values"), filters)
