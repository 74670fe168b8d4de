"""The query rules every table connector shares (Supabase, local DataFrames).

The model never writes query syntax. It fills a small JSON object: a table from an enum,
plain column names, filters from a fixed operator set. ``parse_*`` checks that object against
the user's allowlist and turns it into typed values; each backend maps those to its own calls.
A refused input raises :class:`ToolInputError`, which reaches the model as an error result
before any request is made.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from loom_nb._errors import UserError
from loom_nb._tools import ToolInputError

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

#: PostgREST reads these query names itself; as columns they would rewrite the query.
RESERVED = frozenset({"select", "order", "limit", "offset", "columns", "on_conflict", "or", "and"})

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
class TableSpec:
    """One allowlisted table, as the user configured it."""

    name: str
    description: str = ""
    #: Allowed columns; None means every column of the table.
    columns: tuple[str, ...] | None = None
    write: bool = False


@dataclass(frozen=True)
class Filter:
    column: str
    op: str
    value: Any = None
    negate: bool = False


@dataclass(frozen=True)
class GroupKey:
    """One group_by entry: a column's values, or the time bucket of a datetime column."""

    column: str
    #: None: the values themselves; else one of :data:`BUCKETS`.
    bucket: str | None = None

    @property
    def output(self) -> str:
        """The result's column: the column's name, or ``week_created_at`` for a bucket."""
        return self.column if self.bucket is None else f"{self.bucket}_{self.column}"


@dataclass(frozen=True)
class Select:
    table: str
    #: Columns to return; None means all (only when the table has no ``columns`` list).
    columns: tuple[str, ...] | None
    filters: tuple[Filter, ...] = ()
    #: (column, descending) pairs.
    order: tuple[tuple[str, bool], ...] = ()
    limit: int = 50
    offset: int = 0
    count: bool = False


@dataclass(frozen=True)
class Insert:
    table: str
    rows: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Update:
    table: str
    values: dict[str, Any]
    filters: tuple[Filter, ...] = field(default=())


def check_identifier(name: Any, what: str) -> str:
    """Raise :class:`UserError` unless ``name`` is a plain identifier (configuration time)."""
    if not isinstance(name, str) or not IDENTIFIER.match(name):
        raise UserError(
            f"{what} {name!r} is not a plain identifier: use letters, digits and '_', "
            "starting with a letter or '_', at most 63 characters"
        )
    if name.lower() in RESERVED:
        raise UserError(f"{what} {name!r} is a reserved query name and cannot be used")
    return name


def parse_tables(
    tables: Mapping[str, Any],
    *,
    allowed_options: Sequence[str] = ("description", "columns", "write"),
) -> dict[str, TableSpec]:
    """Check the user's ``tables={...}`` at definition time."""
    if not isinstance(tables, Mapping) or not tables:
        raise UserError('tables must be a non-empty dict like {"orders": {"columns": ["id"]}}')
    specs: dict[str, TableSpec] = {}
    for name, options in tables.items():
        check_identifier(name, "table name")
        options = {} if options is None else options
        if not isinstance(options, Mapping):
            raise UserError(
                f"tables[{name!r}] must be a dict of options, got {type(options).__name__}"
            )
        unknown = set(options) - set(allowed_options)
        if unknown:
            raise UserError(
                f"tables[{name!r}] has unknown option(s) {sorted(unknown)}; "
                f"known options: {list(allowed_options)}"
            )
        columns = options.get("columns")
        if columns is not None:
            if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
                raise UserError(f"tables[{name!r}]['columns'] must be a non-empty list of names")
            for c in columns:
                check_identifier(c, f"column of {name!r}")
            if len(set(columns)) != len(columns):
                raise UserError(f"tables[{name!r}]['columns'] lists a column twice")
            columns = tuple(columns)
        description = options.get("description", "")
        if not isinstance(description, str):
            raise UserError(f"tables[{name!r}]['description'] must be a string")
        write = options.get("write", False)
        if not isinstance(write, bool):
            raise UserError(f"tables[{name!r}]['write'] must be True or False")
        specs[name] = TableSpec(name, description, columns, write)
    return specs


_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")


def check_connector_options(name: Any, max_rows: Any, approve_writes: Any) -> int:
    """The options every table connector shares; returns ``max_rows``."""
    if not isinstance(name, str) or not _PREFIX.match(name):
        raise UserError(
            f"name={name!r} is not valid: it prefixes the tool names, so use letters, digits, "
            "'_' and '-', starting with a letter, at most 40 characters"
        )
    if not isinstance(approve_writes, bool):
        raise UserError(f"approve_writes must be True or False, got {approve_writes!r}")
    return check_max_rows(max_rows)


def check_max_rows(max_rows: Any) -> int:
    if not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 1:
        raise UserError(f"max_rows must be a positive int, got {max_rows!r}")
    return max_rows


# ---- call time: the model's arguments ----------------------------------------------------------


def lookup_table(tables: Mapping[str, TableSpec], name: Any, *, write: bool = False) -> TableSpec:
    spec = tables.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ToolInputError(f"unknown table {name!r}; the tables are {sorted(tables)}")
    if write and not spec.write:
        writable = sorted(t for t, s in tables.items() if s.write)
        raise ToolInputError(f"table {name!r} is read-only; writable tables: {writable}")
    return spec


def check_column(spec: TableSpec, name: Any) -> str:
    if not isinstance(name, str) or not IDENTIFIER.match(name) or name.lower() in RESERVED:
        raise ToolInputError(
            f"{name!r} is not a plain column name (no relations, JSON paths, casts or aliases)"
        )
    if spec.columns is not None and name not in spec.columns:
        raise ToolInputError(
            f"column {name!r} is not available in {spec.name!r}; use one of {list(spec.columns)}"
        )
    return name


def _scalar(value: Any, where: str) -> Scalar:
    if isinstance(value, (str, int, float, bool)):
        return value
    raise ToolInputError(f"{where}: expected a string, number or boolean, got {value!r}")


def parse_filters(spec: TableSpec, raw: Any) -> tuple[Filter, ...]:
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


def parse_group_by(spec: TableSpec, raw: Any) -> tuple[GroupKey, ...]:
    """``["status", {"column": "created_at", "bucket": "week"}]`` as group keys, each once."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ToolInputError(
            'group_by must be a list of column names or {"column": C, "bucket": B} objects'
        )
    keys: list[GroupKey] = []
    for i, item in enumerate(raw):
        if isinstance(item, Mapping):
            if set(item) != {"column", "bucket"}:
                raise ToolInputError(
                    f'group_by[{i}] must be a column name or {{"column": C, "bucket": B}}'
                )
            bucket = item["bucket"]
            if bucket not in BUCKETS:
                raise ToolInputError(
                    f"group_by[{i}].bucket {bucket!r} is not one of {list(BUCKETS)}"
                )
            key = GroupKey(check_column(spec, item["column"]), bucket)
        else:
            key = GroupKey(check_column(spec, item))
        if key.output in (k.output for k in keys if k != key):
            raise ToolInputError(f"group_by[{i}] would be named {key.output!r} twice")
        if key not in keys:
            keys.append(key)
    return tuple(keys)


def parse_select(args: Mapping[str, Any], tables: Mapping[str, TableSpec], max_rows: int) -> Select:
    spec = lookup_table(tables, args.get("table"))
    raw_columns = args.get("columns")
    if raw_columns is None or raw_columns == []:
        columns = spec.columns  # None: every column; a list: expanded, so '*' is never sent
    else:
        if not isinstance(raw_columns, list):
            raise ToolInputError("columns must be a list of column names")
        columns = tuple(dict.fromkeys(check_column(spec, c) for c in raw_columns))
    order = parse_order(args.get("order"), lambda i, name: check_column(spec, name))
    limit = min(parse_int(args.get("limit"), "limit", max_rows), max_rows)
    count = args.get("count", False)
    if not isinstance(count, bool):
        raise ToolInputError("count must be true or false")
    return Select(
        table=spec.name,
        columns=columns,
        filters=parse_filters(spec, args.get("filters")),
        order=tuple(order),
        limit=limit,
        offset=parse_int(args.get("offset"), "offset", 0),
        count=count,
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


# ---- JSON schemas: what the model is told -------------------------------------------------------


def _column_schema(tables: Mapping[str, TableSpec]) -> dict[str, Any]:
    if all(s.columns is not None for s in tables.values()):
        names = sorted({c for s in tables.values() for c in s.columns or ()})
        return {"type": "string", "enum": names}
    return {"type": "string", "pattern": IDENTIFIER.pattern}


def filters_schema(tables: Mapping[str, TableSpec]) -> dict[str, Any]:
    return {
        "type": "array",
        "description": "All filters must match (AND).",
        "items": {
            "type": "object",
            "properties": {
                "column": _column_schema(tables),
                "op": {
                    "type": "string",
                    "enum": list(OPERATORS),
                    "description": "like/ilike use % and _ wildcards; is_null takes no value.",
                },
                "value": {
                    "description": "A string, number or boolean; a list for 'in'.",
                    "anyOf": [
                        {"type": ["string", "number", "boolean"]},
                        {"type": "array", "items": {"type": ["string", "number", "boolean"]}},
                    ],
                },
                "not": {"type": "boolean", "description": "Negate this filter."},
            },
            "required": ["column", "op"],
            "additionalProperties": False,
        },
    }


def group_by_schema(tables: Mapping[str, TableSpec]) -> dict[str, Any]:
    column = _column_schema(tables)
    return {
        "type": "array",
        "items": {
            "anyOf": [
                column,
                {
                    "type": "object",
                    "properties": {
                        "column": {**column, "description": "A datetime column."},
                        "bucket": {"type": "string", "enum": list(BUCKETS)},
                    },
                    "required": ["column", "bucket"],
                    "additionalProperties": False,
                },
            ]
        },
        "description": (
            "Columns to group by, or {column, bucket} to group a datetime column by day, week "
            "(weeks start on Monday), month, quarter or year, in the column's time zone. A "
            "bucket's output column is named bucket_column (like week_created_at) and holds "
            "each bucket's start. Omit group_by for one summary row over all matches."
        ),
    }


def select_schema(tables: Mapping[str, TableSpec], max_rows: int) -> dict[str, Any]:
    column = _column_schema(tables)
    return {
        "type": "object",
        "properties": {
            "table": {"type": "string", "enum": sorted(tables)},
            "columns": {
                "type": "array",
                "items": column,
                "description": "Columns to return; omit for all allowed columns.",
            },
            "filters": filters_schema(tables),
            "order": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"column": column, "desc": {"type": "boolean"}},
                    "required": ["column"],
                    "additionalProperties": False,
                },
            },
            "limit": {
                "type": "integer",
                "minimum": 0,
                "description": f"At most {max_rows} rows come back; a larger limit is cut to that.",
            },
            "offset": {"type": "integer", "minimum": 0},
            "count": {
                "type": "boolean",
                "description": "Also return the exact number of matching rows.",
            },
        },
        "required": ["table"],
        "additionalProperties": False,
    }


def insert_schema(tables: Mapping[str, TableSpec]) -> dict[str, Any]:
    writable = {n: s for n, s in tables.items() if s.write}
    return {
        "type": "object",
        "properties": {
            "table": {"type": "string", "enum": sorted(writable)},
            "rows": {"type": "array", "minItems": 1, "items": _values_schema(writable)},
        },
        "required": ["table", "rows"],
        "additionalProperties": False,
    }


def update_schema(tables: Mapping[str, TableSpec]) -> dict[str, Any]:
    writable = {n: s for n, s in tables.items() if s.write}
    return {
        "type": "object",
        "properties": {
            "table": {"type": "string", "enum": sorted(writable)},
            "values": _values_schema(writable),
            "filters": {**filters_schema(writable), "minItems": 1},
        },
        "required": ["table", "values", "filters"],
        "additionalProperties": False,
    }


def _values_schema(tables: Mapping[str, TableSpec]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "minProperties": 1}
    if tables and all(s.columns is not None for s in tables.values()):
        names = sorted({c for s in tables.values() for c in s.columns or ()})
        schema["propertyNames"] = {"enum": names}
    else:
        schema["propertyNames"] = {"pattern": IDENTIFIER.pattern}
    return schema


def describe_tables(tables: Mapping[str, TableSpec]) -> list[dict[str, Any]]:
    """What the list-tables tool returns."""
    return [
        {
            "table": s.name,
            "description": s.description,
            "columns": list(s.columns) if s.columns is not None else "all columns",
            "writable": s.write,
        }
        for s in tables.values()
    ]


_SQL = {
    "eq": "=",
    "neq": "!=",
    "gt": ">",
    "gte": ">=",
    "lt": "<",
    "lte": "<=",
    "like": "LIKE",
    "ilike": "ILIKE",
}


def where_text(filters: Sequence[Filter]) -> str:
    """``status = 'open' AND total > 100``: the filters as a person reads them."""
    parts = []
    for f in filters:
        if f.op == "is_null":
            parts.append(f"{f.column} IS {'NOT ' if f.negate else ''}NULL")
            continue
        if f.op == "in":
            text = f"{f.column} IN ({', '.join(_literal(v) for v in f.value)})"
        else:
            text = f"{f.column} {_SQL[f.op]} {_literal(f.value)}"
        parts.append(f"NOT ({text})" if f.negate else text)
    return " AND ".join(parts)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"
