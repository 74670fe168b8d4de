"""The one builder of a table connector's tools.

A backend (Supabase, DataFrames, any later one) supplies its operations: what each tool runs,
how a write is checked before the user is asked, and what the approval card shows. The builder
gives every table connector the same tools: named under the connector's prefix, described with
the shared grammar and the allowlist, with the schemas' enums, and one approval rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loom_nb._code import WriteCode
from loom_nb._rules import Effect
from loom_nb._tables.filter_text import insert_words, select_words, update_words, where_text
from loom_nb._tables.grammar import parse_insert, parse_select, parse_update
from loom_nb._tables.options import IDENTIFIER, Relationship, TableSpec
from loom_nb._tables.schemas import insert_schema, select_schema, update_schema
from loom_nb._tables.update_preview import approved_count
from loom_nb._tools import Connector, Tool, ToolInputError, connector, tool

#: A tool's run function, as ``tool(run=...)`` takes it: ``(arguments)`` or
#: ``(arguments, ctx)``, sync or async.
Run = Callable[..., Any]

_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


@dataclass(frozen=True)
class Read:
    """A read tool's operation."""

    run: Run
    #: The backend's own rules, as sentences added to the shared description.
    notes: str = ""
    #: The code that reproduces a call (see ``loom_nb._code``).
    code: WriteCode | None = None


@dataclass(frozen=True)
class Write:
    """A write tool's operations."""

    run: Run
    #: Raises :class:`ToolInputError` when the arguments cannot work; runs before approval.
    check: Callable[[dict[str, Any]], object]
    #: What the user sees before approving: ``(arguments)`` or ``(arguments, ctx)``, sync or
    #: async (see :attr:`Tool.preview`).
    preview: Callable[..., Any]
    #: The backend's own rules, as sentences added to the shared description.
    notes: str = ""
    #: The code of a call, written as a comment by an export (see ``loom_nb._code``).
    code: WriteCode | None = None


def table_connector(
    name: str,
    tables: Mapping[str, TableSpec],
    *,
    max_rows: int,
    frame_rows: int,
    approve_writes: bool,
    list_tables: Read,
    select: Read,
    insert: Write,
    update: Write,
    insert_as: str = "insert",
    more_reads: Mapping[str, Tool] | None = None,
    open_tables: str = "",
    relationships: Sequence[Relationship] = (),
) -> Connector:
    """``{name}_list_tables`` and ``{name}_select`` (then ``more_reads``, each named
    ``{name}_{key}``); ``{name}_{insert_as}`` and ``{name}_update`` when some table is
    writable.

    ``open_tables``, when given, says where read tools find tables beyond ``tables`` (they
    are known only when a call runs): their schemas then take any plain table name.
    """
    writable = [s for s in tables.values() if s.write]
    listed = _tables_text(tables.values())
    if open_tables:
        listed = f"{listed}\n{open_tables}".lstrip("\n")

    def select_described(arguments: dict[str, Any]) -> str:
        known = words_tables(tables, arguments) if open_tables else tables
        query = parse_select(arguments, known, frame_rows, relationships)
        return select_words(query, columns_named=bool(arguments.get("columns")))

    def insert_described(arguments: dict[str, Any]) -> str:
        return insert_words(parse_insert(arguments, tables))

    def update_described(arguments: dict[str, Any]) -> str:
        return update_words(parse_update(arguments, tables))

    def insert_effect(arguments: dict[str, Any], _card: Any) -> Effect:
        ins = parse_insert(arguments, tables)
        columns = frozenset(c for row in ins.rows for c in row)
        return Effect("", ins.table, columns, len(ins.rows))

    def update_effect(arguments: dict[str, Any], card: Any) -> Effect:
        # the rows it changes are the ones its card counted: execution holds it to them
        up = parse_update(arguments, tables)
        return Effect(
            "", up.table, frozenset(up.values), approved_count(card), where_text(up.filters)
        )

    tools: dict[str, Tool] = {
        f"{name}_list_tables": tool(
            description="List the tables you may use: each one's description, its columns, and "
            f"whether you may write to it.{list_tables.notes}",
            input=_NO_ARGUMENTS,
            run=list_tables.run,
        ),
        f"{name}_select": tool(
            description="Read rows of one table. Filters all must match: op is eq, neq, gt, gte, "
            "lt, lte, like / ilike (SQL wildcards: % any text, _ one character; ilike ignores "
            "case), in (a list of values) or is_null (no value); not=true negates one."
            f"{select.notes} {rows_rule(max_rows, frame_rows, 'rows')} count=true also "
            f"returns the number of matching rows.{_joins_text(relationships)}\n"
            f"Tables:\n{listed}",
            input=select_schema(
                tables,
                max_rows,
                open_tables=bool(open_tables),
                frame_rows=frame_rows,
                relationships=relationships,
            ),
            run=select.run,
            describe=select_described,
            code=select.code,
        ),
    }
    for suffix, read in (more_reads or {}).items():
        tools[f"{name}_{suffix}"] = read
    if writable:
        approval = (
            " The user approves each call before anything is written." if approve_writes else ""
        )
        returns = f" Returns the written rows.\nWritable tables:\n{_tables_text(writable)}"
        tools[f"{name}_{insert_as}"] = tool(
            description="Add rows to a writable table: rows is a list of {column: value}."
            f"{insert.notes}{approval}{returns}",
            input=insert_schema(tables),
            run=insert.run,
            needs_approval=_ask_when_it_can_work(approve_writes, insert.check),
            preview=insert.preview,
            describe=insert_described,
            code=insert.code,
        )
        tools[f"{name}_{insert_as}"].effect = insert_effect
        tools[f"{name}_update"] = tool(
            description="Set values on the rows of a writable table that match all filters "
            f"(the filters of {name}_select; at least one is required).{update.notes}"
            f"{approval}{returns}",
            input=update_schema(tables),
            run=update.run,
            needs_approval=_ask_when_it_can_work(approve_writes, update.check),
            preview=update.preview,
            describe=update_described,
            code=update.code,
        )
        tools[f"{name}_update"].effect = update_effect
    return connector(name, tools)


def _joins_text(relationships: Sequence[Relationship]) -> str:
    if not relationships:
        return ""
    pairs = "; ".join(f"{r.table} may join {r.other} on {r.text}" for r in relationships)
    return (
        f" join: [table] reads a related table beside each row ({pairs}); its columns are "
        "written table.column (customers.tier) in columns, filters and order, and a filter "
        "on them keeps only the rows that have a match. Nothing else can be joined."
    )


def rows_rule(max_rows: int, frame_rows: int, what: str) -> str:
    """The two bounds, as the model is told them."""
    return (
        f"You see at most {max_rows} {what} of a result (page with offset); the user's "
        f"DataFrame of the call holds every match up to {frame_rows:,} (or your limit)."
    )


def words_tables(tables: Mapping[str, TableSpec], arguments: dict[str, Any]) -> Mapping[str, Any]:
    """The allowlist to read a call's words with: a table known only at call time is read as
    one with every column (the words never decide what may run)."""
    table = arguments.get("table")
    if isinstance(table, str) and table not in tables and IDENTIFIER.match(table):
        return {table: TableSpec(table)}
    return tables


def _ask_when_it_can_work(
    approve_writes: bool, check: Callable[[dict[str, Any]], object]
) -> Callable[[dict[str, Any]], bool]:
    """A write waits for approval only when its arguments can work. The others are not shown to
    the user: the call fails at once, before any request or change, and the model is told why."""

    def rule(arguments: dict[str, Any]) -> bool:
        if not approve_writes:
            return False
        try:
            check(arguments)
        except ToolInputError:
            return False
        return True

    return rule


def _tables_text(tables: Iterable[TableSpec]) -> str:
    """One line a table, for the model: ``- orders — Customer orders (columns: id, total)``."""
    lines = []
    for s in tables:
        columns = ", ".join(s.columns) if s.columns is not None else "all columns"
        about = f" — {s.description}" if s.description else ""
        lines.append(f"- {s.name}{about} (columns: {columns}{'; writable' if s.write else ''})")
    return "\n".join(lines)
