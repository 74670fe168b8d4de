"""What the user configures for a table connector, checked when the connector is defined.

``tables={...}`` becomes :class:`TableSpec` values; ``name``, ``max_rows`` and ``approve_writes``
are checked alike by every table connector. A mistake raises :class:`UserError` at once.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loom_nb._errors import UserError

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

#: PostgREST reads these query names itself; as columns they would rewrite the query.
RESERVED = frozenset({"select", "order", "limit", "offset", "columns", "on_conflict", "or", "and"})


@dataclass(frozen=True)
class TableSpec:
    """One allowlisted table, as the user configured it."""

    name: str
    description: str = ""
    #: Allowed columns; None means every column of the table.
    columns: tuple[str, ...] | None = None
    write: bool = False


@dataclass(frozen=True)
class Relationship:
    """A declared relationship: ``table.column`` refers to ``other.other_column``
    (``{"orders.customer_id": "customers.id"}``: an order's customer). A call on ``table``
    may join ``other`` along it; nothing else can be joined."""

    table: str
    column: str
    other: str
    other_column: str

    @property
    def text(self) -> str:
        """``orders.customer_id = customers.id``."""
        return f"{self.table}.{self.column} = {self.other}.{self.other_column}"


def parse_relationships(
    relationships: Any, tables: Mapping[str, TableSpec]
) -> tuple[Relationship, ...]:
    """``relationships={"orders.customer_id": "customers.id"}`` checked at definition time:
    both tables allowlisted, both columns plain identifiers and allowed, one relationship a
    pair of tables."""
    if relationships is None:
        return ()
    if not isinstance(relationships, Mapping):
        raise UserError(
            'relationships must be a dict like {"orders.customer_id": "customers.id"}, got '
            f"{type(relationships).__name__}"
        )
    found: list[Relationship] = []
    for key, value in relationships.items():
        (table, column), (other, other_column) = (
            _reference(key, relationships),
            _reference(value, relationships),
        )
        if table == other:
            raise UserError(
                f"relationships[{key!r}] relates {table!r} to itself, which cannot be joined"
            )
        if any(r.table == table and r.other == other for r in found):
            raise UserError(
                f"relationships declares two ways from {table!r} to {other!r}; keep one"
            )
        found.append(Relationship(table, column, other, other_column))
    for r in found:
        for t, c in ((r.table, r.column), (r.other, r.other_column)):
            spec = tables.get(t)
            if spec is None:
                raise UserError(
                    f"relationships names table {t!r}, which is not among the tables "
                    f"{sorted(tables)}; both tables of a relationship must be allowlisted"
                )
            if spec.columns is not None and c not in spec.columns:
                raise UserError(
                    f"relationships names {t}.{c}, but {c!r} is not among the allowed columns "
                    f"of {t!r} ({list(spec.columns)}); add it to its 'columns'"
                )
    return tuple(found)


def _reference(text: Any, relationships: Any) -> tuple[str, str]:
    table, _, column = text.partition(".") if isinstance(text, str) else ("", "", "")
    if not column:
        raise UserError(
            f"relationships: {text!r} must be 'table.column' (like 'orders.customer_id'); "
            f"got {dict(relationships)!r}"
        )
    return check_identifier(table, "relationship table"), check_identifier(
        column, "relationship column"
    )


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
    argument: str = "tables",
) -> dict[str, TableSpec]:
    """Check the user's ``tables={...}`` at definition time; errors name the option as the
    user wrote it, under ``argument`` (``frames`` for ``frame_tools``)."""
    if not isinstance(tables, Mapping) or not tables:
        raise UserError('tables must be a non-empty dict like {"orders": {"columns": ["id"]}}')
    specs: dict[str, TableSpec] = {}
    for name, options in tables.items():
        check_identifier(name, "table name")
        options = {} if options is None else options
        if not isinstance(options, Mapping):
            raise UserError(
                f"{argument}[{name!r}] must be a dict of options, got {type(options).__name__}"
            )
        unknown = [key for key in options if key not in allowed_options]
        if unknown:
            close = difflib.get_close_matches(str(unknown[0]), allowed_options, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UserError(
                f"{argument}[{name!r}] has no option {unknown[0]!r}: {hint}the options are "
                f"{', '.join(allowed_options)}"
            )
        columns = options.get("columns")
        if columns is not None:
            if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
                raise UserError(
                    f"{argument}[{name!r}]['columns'] must be a non-empty list of names"
                )
            for c in columns:
                check_identifier(c, f"column of {name!r}")
            if len(set(columns)) != len(columns):
                raise UserError(f"{argument}[{name!r}]['columns'] lists a column twice")
            columns = tuple(columns)
        description = options.get("description", "")
        if not isinstance(description, str):
            raise UserError(f"{argument}[{name!r}]['description'] must be a string")
        write = options.get("write", False)
        if not isinstance(write, bool):
            raise UserError(f"{argument}[{name!r}]['write'] must be True or False")
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


#: The rows of a call's DataFrame for the user, unless the connector says otherwise.
FRAME_ROWS = 10_000


def check_frame_rows(frame_rows: Any, max_rows: int) -> int:
    """``frame_rows``: the rows a call's DataFrame holds for the user, at least ``max_rows``
    (the model's page is the first rows of that frame)."""
    if not isinstance(frame_rows, int) or isinstance(frame_rows, bool) or frame_rows < max_rows:
        raise UserError(
            f"frame_rows must be an int of at least max_rows ({max_rows}), got {frame_rows!r}: "
            "it bounds the rows of the DataFrame you get from a call, of which the model sees "
            "max_rows"
        )
    return frame_rows


def check_max_rows(max_rows: Any) -> int:
    if not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 1:
        raise UserError(f"max_rows must be a positive int, got {max_rows!r}")
    return max_rows


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
