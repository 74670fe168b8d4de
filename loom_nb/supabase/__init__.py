"""Supabase tables as agent tools: allowlisted, bounded, approval-gated, returned as DataFrames.

::

    from loom_nb.supabase import supabase_tools
    from supabase import create_client

    supabase_tools(
        client=lambda ctx: create_client(URL, ANON_KEY, options=user_session_options),
        tables={
            "orders":   {"description": "Customer orders", "columns": ["id", "status", "total"]},
            "products": {"columns": ["id", "name", "price"]},
            "tickets":  {"write": True},
        },
        max_rows=50, approve_writes=True, name="supabase",
    )

The tools, named after ``name`` (default ``"supabase"``):

==========================  ===================================================================
tool                        arguments
==========================  ===================================================================
``{name}_list_tables``      none. Returns each table's description, columns and whether it is
                            writable.
``{name}_select``           ``table``; ``columns`` (list, default: every allowed column);
                            ``filters`` (list of ``{column, op, value, not}``, all must match;
                            ``op`` is one of eq, neq, gt, gte, lt, lte, like, ilike, in,
                            is_null; ``not: true`` negates); ``order`` (list of
                            ``{column, desc}``); ``limit`` (int, at most ``max_rows``);
                            ``offset`` (int, for paging); ``count`` (bool: also report the
                            exact number of matching rows). Returns a DataFrame.
``{name}_insert``           ``table`` (a writable one); ``rows`` (list of ``{column: value}``).
                            Waits for approval. Returns the inserted rows as a DataFrame.
``{name}_update``           ``table`` (a writable one); ``values`` (``{column: new value}``);
                            ``filters`` (as for select, at least one). Waits for approval.
                            Returns the updated rows as a DataFrame.
==========================  ===================================================================

``{name}_insert`` and ``{name}_update`` exist only when some table has ``"write": True``.

How the rules are kept:

* The client factory runs once per run (cached in ``ctx.state``) with the run's context; it
  may be sync or async and return supabase-py's ``Client`` or ``AsyncClient``. loom_nb never
  creates a client and never touches auth.
* Every request is built from checked pieces: the table from the allowlist, select lists and
  ``order`` from plain identifiers (the allowed columns are listed, ``*`` is sent only for a
  table without a ``columns`` list), filters through the client's named methods (``eq``,
  ``neq``, ``gt``, ``gte``, ``lt``, ``lte``, ``like``, ``ilike``, ``in_``, ``is_(col, None)``,
  ``not_``), never ``or_`` or ``filter``; ``limit`` an int clamped to ``max_rows``; the rows
  are cut again after the response. A refused input sends no request at all.
* Filter values cannot change a query's shape: PostgREST reads a single value verbatim after
  ``op.``, and supabase-py quotes ``in`` list items that hold ``,:()"\\``. The one place where
  PostgREST trims (spaces before the first ``in`` item) is avoided by ordering the items.
* supabase-py retries a GET on 503/520 and on connection failures, sleeping 1, 2 and 4 s.
  Tools send each request with ``.retry(False)``: the model gets the error at once and can
  try again, instead of a cell hanging silently for 7 s.
* PostgREST errors (``APIError``: RLS refusals, constraint errors) and network errors
  (``httpx.HTTPError``: refused connections, timeouts) reach the model as
  ``{"error": {"code", "message", "hint", "details"}}``; the run goes on.
"""

from __future__ import annotations

try:
    import supabase as _supabase  # noqa: F401  (the extra this module needs)
except ImportError:
    from loom_nb._errors import MissingExtra

    raise MissingExtra("supabase", "supabase", "loom_nb.supabase") from None

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from loom_nb._context import RunContext
from loom_nb._errors import UserError
from loom_nb._render import frame_for_model
from loom_nb._tables.filter_text import filter_dict, where_text
from loom_nb._tables.grammar import Insert, Select, Update, parse_insert, parse_select, parse_update
from loom_nb._tables.options import (
    TableSpec,
    check_connector_options,
    describe_tables,
    parse_tables,
)
from loom_nb._tables.schemas import insert_schema, select_schema, update_schema
from loom_nb._tools import Connector, Tool, ToolInputError, ToolOutput, connector, tool
from loom_nb.supabase._query import (
    build_insert,
    build_select,
    build_update,
    check_json_values,
    sendable_filters,
)
from loom_nb.supabase._responses import error_output, records_to_frame, rows_of, send

__all__ = ["ClientFactory", "supabase_tools"]

#: ``client=`` takes ``factory(ctx) -> Client | AsyncClient`` (or an awaitable of one).
ClientFactory = Callable[[RunContext], Any]


def supabase_tools(
    *,
    client: ClientFactory,
    tables: Mapping[str, Mapping[str, Any] | None],
    max_rows: int = 50,
    approve_writes: bool = True,
    name: str = "supabase",
) -> Connector:
    """Give an agent the Supabase tables you list, as tools (see the module docs for the table
    of tools and their arguments).

    ``client(ctx)`` builds the client for one run, with the signed-in user's session, so
    row level security applies. ``tables`` maps each allowed table to its options:
    ``description``, ``columns`` (the allowed columns; all when omitted) and ``write``.
    Every configuration mistake raises :class:`~loom_nb.UserError` here.
    """
    if not callable(client):
        raise UserError(
            "supabase_tools(client=...) takes a function ctx -> supabase Client, called once per "
            f"run; got {type(client).__name__}. Wrap a client you already have: "
            "client=lambda ctx: my_client"
        )
    max_rows = check_connector_options(name, max_rows, approve_writes)
    specs = parse_tables(tables)
    return _SupabaseConnector(client, specs, max_rows, approve_writes, name).connector()


class _SupabaseConnector:
    """The tools over one allowlist: each call checks its arguments, then sends one request
    with the run's client."""

    def __init__(
        self,
        factory: ClientFactory,
        tables: dict[str, TableSpec],
        max_rows: int,
        approve_writes: bool,
        name: str,
    ) -> None:
        self.factory = factory
        self.tables = tables
        self.max_rows = max_rows
        self.approve_writes = approve_writes
        self.name = name
        self._state_key = f"loom_nb.supabase:{name}:{id(self)}"

    # ---- the tools ------------------------------------------------------------------------

    def connector(self) -> Connector:
        n = self.name
        tools: dict[str, Tool] = {
            f"{n}_list_tables": tool(
                description="List the database tables you may use: description, columns, and "
                "whether you may write to them.",
                input={"type": "object", "properties": {}, "additionalProperties": False},
                run=self.list_tables,
            ),
            f"{n}_select": tool(
                description=self._select_description(),
                input=select_schema(self.tables, self.max_rows),
                run=self.select,
            ),
        }
        if any(s.write for s in self.tables.values()):
            tools[f"{n}_insert"] = tool(
                description=self._write_description("Insert rows into a table."),
                input=insert_schema(self.tables),
                run=self.insert,
                needs_approval=self._approval(self._parse_insert),
                preview=self.preview_insert,
            )
            tools[f"{n}_update"] = tool(
                description=self._write_description(
                    "Update the rows that match all filters (at least one filter)."
                ),
                input=update_schema(self.tables),
                run=self.update,
                needs_approval=self._approval(self._parse_update),
                preview=self.preview_update,
            )
        return connector(n, tools)

    def _approval(self, parse: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], bool]:
        """A write waits for approval when its arguments are valid. Invalid ones are not shown
        to the user: the call fails at once (before any request) and the model is told why."""

        def rule(arguments: dict[str, Any]) -> bool:
            if not self.approve_writes:
                return False
            try:
                parse(arguments)
            except ToolInputError:
                return False
            return True

        return rule

    def _tables_text(self, tables: Sequence[TableSpec]) -> str:
        lines = []
        for s in tables:
            columns = ", ".join(s.columns) if s.columns is not None else "all columns"
            about = f" — {s.description}" if s.description else ""
            lines.append(f"- {s.name}{about} (columns: {columns}{'; writable' if s.write else ''})")
        return "\n".join(lines)

    def _select_description(self) -> str:
        return (
            "Read rows from a database table. Returns at most "
            f"{self.max_rows} rows per call: page with offset, and set count=true to learn how "
            "many rows match. Filters all must match; ops: eq, neq, gt, gte, lt, lte, like, "
            "ilike (% and _ wildcards), in (a list), is_null (no value); not=true negates one.\n"
            f"Tables:\n{self._tables_text(list(self.tables.values()))}"
        )

    def _write_description(self, what: str) -> str:
        writable = [s for s in self.tables.values() if s.write]
        approval = " The user approves each call before it runs." if self.approve_writes else ""
        tables = self._tables_text(writable)
        return f"{what}{approval} Returns the written rows.\nWritable tables:\n{tables}"

    async def list_tables(self, arguments: dict[str, Any]) -> ToolOutput:
        described = describe_tables(self.tables)
        return ToolOutput(json.dumps({"tables": described}), described)

    async def select(self, arguments: dict[str, Any], ctx: RunContext) -> ToolOutput:
        query = self._parse_select(arguments)
        fetched = await self._fetch(ctx, query.table, lambda client: build_select(client, query))
        if isinstance(fetched, ToolOutput):
            return fetched
        rows, response = fetched
        count = getattr(response, "count", None)
        frame = records_to_frame(rows, query.columns)
        received = len(frame)
        data = frame.head(query.limit)
        content = frame_for_model(
            frame,
            source=f"{self.name}.{query.table}",
            max_rows=query.limit,
            total_rows=count if isinstance(count, int) else None,
            offset=query.offset,
            limit_reached=query.limit > 0 and received >= query.limit and count is None,
        )
        return ToolOutput(content, data)

    async def insert(self, arguments: dict[str, Any], ctx: RunContext) -> ToolOutput:
        query = self._parse_insert(arguments)
        spec = self.tables[query.table]
        frame = await self._written(ctx, spec, lambda client: build_insert(client, query, spec))
        if isinstance(frame, ToolOutput):
            return frame
        text = frame_for_model(frame, source=f"{self.name}.{query.table}", max_rows=self.max_rows)
        return ToolOutput(f"Inserted {len(frame)} row(s) into {query.table}.\n{text}", frame)

    async def update(self, arguments: dict[str, Any], ctx: RunContext) -> ToolOutput:
        query = self._parse_update(arguments)
        spec = self.tables[query.table]
        frame = await self._written(ctx, spec, lambda client: build_update(client, query, spec))
        if isinstance(frame, ToolOutput):
            return frame
        if frame.empty:
            return ToolOutput(
                f"No row of {query.table} matched the filters ({where_text(query.filters)}), or "
                "row level security hid them: nothing was updated.",
                frame,
            )
        text = frame_for_model(frame, source=f"{self.name}.{query.table}", max_rows=self.max_rows)
        return ToolOutput(f"Updated {len(frame)} row(s) of {query.table}.\n{text}", frame)

    # ---- the model's arguments, checked ---------------------------------------------------

    def _parse_select(self, arguments: dict[str, Any]) -> Select:
        query = parse_select(arguments, self.tables, self.max_rows)
        return dataclasses.replace(query, filters=sendable_filters(query.filters))

    def _parse_insert(self, arguments: dict[str, Any]) -> Insert:
        query = parse_insert(arguments, self.tables)
        check_json_values(arguments)
        return query

    def _parse_update(self, arguments: dict[str, Any]) -> Update:
        query = parse_update(arguments, self.tables)
        check_json_values(arguments)
        return dataclasses.replace(query, filters=sendable_filters(query.filters))

    # ---- what the user sees before approving ----------------------------------------------

    def preview_insert(self, arguments: dict[str, Any]) -> dict[str, Any]:
        query = self._parse_insert(arguments)
        columns: dict[str, None] = {}
        for row in query.rows:
            columns.update(dict.fromkeys(row))
        rows = pd.DataFrame([dict(r) for r in query.rows], columns=list(columns))
        return {"table": query.table, "rows": rows}

    def preview_update(self, arguments: dict[str, Any]) -> dict[str, Any]:
        query = self._parse_update(arguments)
        return {
            "table": query.table,
            "changes": dict(query.values),
            "filters": [filter_dict(f) for f in query.filters],
            "where": where_text(query.filters),
        }

    # ---- client and requests --------------------------------------------------------------

    async def _client(self, ctx: RunContext) -> Any:
        """The run's client: the factory runs once per run, even for concurrent calls."""
        task = ctx.state.get(self._state_key)
        if task is None:
            task = asyncio.ensure_future(self._make_client(ctx))
            ctx.state[self._state_key] = task
        try:
            return await asyncio.shield(task)
        except _FactoryError as exc:
            if ctx.state.get(self._state_key) is task:
                del ctx.state[self._state_key]  # the next call tries the factory again
            return error_output(
                "client_factory_failed",
                str(exc),
                hint="The notebook's client=... function failed; tell the user, who can fix it.",
            )

    async def _make_client(self, ctx: RunContext) -> Any:
        try:
            made = self.factory(ctx)
            if inspect.isawaitable(made):
                made = await made
        except Exception as exc:
            raise _FactoryError(
                f"the Supabase client factory failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not callable(getattr(made, "table", None)):
            raise _FactoryError(
                "the Supabase client factory returned "
                f"{type(made).__name__}, not a supabase Client or AsyncClient"
            )
        return made

    async def _fetch(
        self, ctx: RunContext, table: str, build: Callable[[Any], Any]
    ) -> tuple[list[dict[str, Any]], Any] | ToolOutput:
        """Send ``build(client)`` with the run's client: the rows (in the table's allowed
        columns) and the response, or the error result the model gets instead."""
        client = await self._client(ctx)
        if isinstance(client, ToolOutput):
            return client
        response = await send(build(client))
        if isinstance(response, ToolOutput):
            return response
        rows = rows_of(response, self.tables[table])
        if isinstance(rows, ToolOutput):
            return rows
        return rows, response

    async def _written(
        self, ctx: RunContext, spec: TableSpec, build: Callable[[Any], Any]
    ) -> pd.DataFrame | ToolOutput:
        """Send a write; the rows it returned (allowed columns only) as a DataFrame."""
        fetched = await self._fetch(ctx, spec.name, build)
        if isinstance(fetched, ToolOutput):
            return fetched
        return records_to_frame(fetched[0], spec.columns)


class _FactoryError(Exception):
    """The user's client factory failed; the model gets the message, the run goes on."""
