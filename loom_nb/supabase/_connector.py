"""The Supabase backend of the table tools: each call checks its arguments, then sends one
request with the run's client (see ``loom_nb.supabase`` for the rules it keeps)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import re
from collections.abc import Callable
from typing import Any

import pandas as pd

from loom_nb import _user_errors
from loom_nb._context import RunContext
from loom_nb._counts import counts, frame_note, with_counts
from loom_nb._render import frame_for_model
from loom_nb._tables.builder import Read, Write, rows_rule, table_connector
from loom_nb._tables.filter_text import aggregate_words, filter_dict, where_text
from loom_nb._tables.grammar import (
    AggregateQuery,
    Insert,
    Select,
    Update,
    parse_aggregate,
    parse_insert,
    parse_select,
    parse_update,
)
from loom_nb._tables.options import FRAME_ROWS, Relationship, TableSpec, describe_tables
from loom_nb._tables.schemas import aggregate_schema
from loom_nb._tables.update_preview import (
    EFFECT,
    ROWS_MATCHED,
    SAMPLE_ROWS,
    approved_count,
    rows_that_change,
    update_effect,
)
from loom_nb._tools import Connector, Tool, ToolOutput, tool
from loom_nb.supabase._aggregate import SUPABASE_AGGREGATES, response_names
from loom_nb.supabase._code import SupabaseCode
from loom_nb.supabase._frame import postgrest_frame
from loom_nb.supabase._query import (
    build_aggregate,
    build_insert,
    build_matching,
    build_select,
    build_update,
    flatten_embeds,
    sendable_filters,
    sendable_row,
)
from loom_nb.supabase._responses import error_output, rows_of, send

#: ``client=`` takes ``factory(ctx) -> Client | AsyncClient`` (or an awaitable of one).
ClientFactory = Callable[[RunContext], Any]

#: What the model is told about values PostgREST reads its own way (see ``sendable_filters``).
_SELECT_NOTES = (
    " In like/ilike, PostgREST reads * as % (a literal * cannot be matched; use _). Text "
    "cannot contain the NUL character."
)
_UPDATE_NOTES = (
    " Before asking, the user is shown how many rows match and some of them with the new "
    "values; if more rows match when the update runs, nothing is changed and you are told."
)
_GUARANTEE = "if more rows match when it runs, nothing is changed"
#: The rows of one request of a read: Supabase's default ``max-rows`` (PostgREST cuts a
#: response to it, so a page never asks for more).
PAGE_ROWS = 1000


class SupabaseConnector:
    """The tools over one allowlist: each call checks its arguments, then sends one request
    with the run's client."""

    def __init__(
        self,
        factory: ClientFactory,
        tables: dict[str, TableSpec],
        max_rows: int,
        approve_writes: bool,
        name: str,
        aggregates: bool = False,
        frame_rows: int = FRAME_ROWS,
        relationships: tuple[Relationship, ...] = (),
    ) -> None:
        self.factory = factory
        self.relationships = relationships
        self.tables = tables
        self.max_rows = max_rows
        self.frame_rows = frame_rows
        self.approve_writes = approve_writes
        self.name = name
        self.aggregates = aggregates
        self._state_key = f"loom_nb.supabase:{name}:{id(self)}"

    # ---- the tools ------------------------------------------------------------------------

    def connector(self) -> Connector:
        code = SupabaseCode(
            self.factory,
            self.name,
            self.tables,
            self._parse_select,
            self._parse_insert,
            self._parse_update,
            self._parse_aggregate,
            self.approve_writes,
        )
        more: dict[str, Tool] = {}
        if self.aggregates:
            more["aggregate"] = tool(
                description=(
                    "Totals of one table, computed by the database over every matching row "
                    "(not only the rows a select returns): group_by columns and aggregates "
                    "[{fn, column}] with fn count, sum, avg, min or max (count without a "
                    "column counts rows). Output columns are named fn_column (count for the "
                    f"row count). Filters and join as in {self.name}_select (group by or total "
                    "a joined table's columns, customers.tier); order may name group_by "
                    "columns. PostgREST cannot compute median, std, var, percentile or bins. "
                    f"{rows_rule(self.max_rows, self.frame_rows, 'groups')}"
                ),
                input=aggregate_schema(
                    self.tables,
                    self.max_rows,
                    SUPABASE_AGGREGATES,
                    frame_rows=self.frame_rows,
                    relationships=self.relationships,
                ),
                run=self.aggregate,
                describe=self._aggregate_words,
                code=code.aggregate,
            )
        return table_connector(
            self.name,
            self.tables,
            max_rows=self.max_rows,
            frame_rows=self.frame_rows,
            relationships=self.relationships,
            approve_writes=self.approve_writes,
            list_tables=Read(self.list_tables),
            select=Read(self.select, notes=_SELECT_NOTES, code=code.select),
            more_reads=more,
            insert=Write(
                self.insert, check=self._parse_insert, preview=self.preview_insert, code=code.insert
            ),
            update=Write(
                self.update,
                check=self._parse_update,
                preview=self.preview_update,
                notes=_UPDATE_NOTES if self.approve_writes else "",
                code=code.update,
            ),
        )

    async def list_tables(self, arguments: dict[str, Any]) -> ToolOutput:
        described = describe_tables(self.tables)
        return ToolOutput(json.dumps({"tables": described}), described)

    async def select(self, arguments: dict[str, Any], ctx: RunContext) -> ToolOutput:
        query = self._parse_select(arguments)
        spec = self.tables[query.table]
        if spec.columns is not None and query.joins:  # each row's embeds come back too
            spec = TableSpec(spec.name, columns=(*spec.columns, *(r.other for r in query.joins)))
        fetched = await self._pages(ctx, spec, query, build_select)
        if isinstance(fetched, ToolOutput):
            return fetched
        rows, count = fetched
        rows = flatten_embeds(rows, query)
        frame = postgrest_frame(rows, query.columns).head(query.limit)
        found = counts(
            rows=len(frame),
            matched=count,
            limit=query.asked,
            offset=query.offset,
            frame_rows=self.frame_rows,
            max_rows=self.max_rows,
        )
        text = self._unmatched(query, frame) + self._page_text(query.table, frame, found)
        return ToolOutput(text, with_counts(frame, found))

    @staticmethod
    def _unmatched(query: Select, frame: pd.DataFrame) -> str:
        """How many rows had no row of each joined table (or row level security hid it)."""
        notes = []
        for r in query.joins:
            embedded = [c for c in frame.columns if str(c).startswith(f"{r.other}.")]
            if not embedded or any(f.column.startswith(f"{r.other}.") for f in query.filters):
                continue  # an inner embed: rows without a match are not returned
            n = int(frame[embedded].isna().all(axis=1).sum())
            notes.append(
                f"{n:,} of these {r.table} rows had no {r.other} row (or row level security "
                f"hid it): their {r.other}.* are empty."
                if n
                else f"Every one of these {r.table} rows has its {r.other} row."
            )
        return " ".join(notes) + "\n" if notes else ""

    async def aggregate(self, arguments: dict[str, Any], ctx: RunContext) -> ToolOutput:
        query = self._parse_aggregate(arguments)
        names = response_names(query)
        spec = TableSpec(query.table, columns=tuple(names))  # the rows hold these only
        fetched = await self._pages(ctx, spec, query, build_aggregate)
        if isinstance(fetched, ToolOutput):
            error = fetched.data["error"] if isinstance(fetched.data, dict) else {}
            if error.get("code") == "PGRST123":
                return error_output(
                    error["code"],
                    error["message"],
                    hint="Aggregates are off in this Supabase project; tell the user, who can "
                    "turn them on (pgrst.db_aggregates_enabled), or use the select tool instead.",
                    details=error.get("details"),
                )
            return fetched
        rows, _ = fetched
        renamed = [{names[k]: v for k, v in row.items()} for row in rows]
        frame = postgrest_frame(renamed, query.outputs).head(query.limit)
        # Every group came back unless the frame is full: then more may follow.
        complete = len(frame) < query.limit
        found = counts(
            rows=len(frame),
            matched=query.offset + len(frame) if complete else None,
            what="group" if query.group_by else "row",
            limit=query.asked,
            offset=query.offset,
            frame_rows=self.frame_rows,
            max_rows=self.max_rows,
        )
        return ToolOutput(self._page_text(query.table, frame, found), with_counts(frame, found))

    def _page_text(self, table: str, frame: pd.DataFrame, found: dict[str, Any]) -> str:
        """The model's page of the user's frame (its first ``max_rows`` rows), after what the
        user's frame holds and where the next page starts."""
        shown = min(len(frame), self.max_rows)
        matched, offset = found["matched"], found["offset"]
        more = len(frame) > shown or (matched is not None and offset + shown < matched)
        notes = []
        if matched is not None:
            notes.append(f"{matched:,} {found['what']}{'' if matched == 1 else 's'} match.")
        if more:
            notes.append(f"More match: the next page starts at offset={offset + shown}.")
        notes.append(frame_note(found))
        content = frame_for_model(
            frame,
            source=f"{self.name}.{table}",
            max_rows=self.max_rows,
            total_rows=matched,
            offset=offset,
            limit_reached=matched is None and len(frame) >= found["frame_rows"],
        )
        return " ".join(notes) + "\n" + content

    async def insert(self, arguments: dict[str, Any], ctx: RunContext) -> ToolOutput:
        query = self._parse_insert(arguments)
        spec = self.tables[query.table]
        frame = await self._written(ctx, spec, lambda client: build_insert(client, query, spec))
        if isinstance(frame, ToolOutput):
            return frame
        text = frame_for_model(frame, source=f"{self.name}.{query.table}", max_rows=self.max_rows)
        return ToolOutput(f"Inserted {len(frame)} row(s) into {query.table}.\n{text}", frame)

    async def update(self, arguments: dict[str, Any], ctx: RunContext) -> ToolOutput:
        """The PATCH. After approval it may change at most the rows its card counted: it is
        sent with ``max_affected(n)``, and PostgREST changes nothing when more match."""
        query = self._parse_update(arguments)
        spec = self.tables[query.table]
        shown = approved_count(ctx.approved_preview) if self.approve_writes else None
        if self.approve_writes and shown is None:
            return error_output(
                "not_counted",
                "Nothing was updated: the approval card did not show how many rows this update "
                "matches.",
                hint="Send the update again; the user will see the count before approving.",
            )
        frame = await self._written(
            ctx, spec, lambda client: build_update(client, query, spec, max_affected=shown)
        )
        if isinstance(frame, ToolOutput):
            return _more_than_shown(frame, shown) if shown is not None else frame
        if frame.empty:
            return ToolOutput(
                f"No row of {query.table} matched the filters ({where_text(query.filters)}), or "
                "row level security hid them: nothing was updated.",
                frame,
            )
        text = frame_for_model(frame, source=f"{self.name}.{query.table}", max_rows=self.max_rows)
        fewer = (
            f" The card showed {shown}; the others no longer match."
            if shown is not None and len(frame) < shown
            else ""
        )
        return ToolOutput(f"Updated {len(frame)} row(s) of {query.table}.{fewer}\n{text}", frame)

    # ---- the model's arguments, checked ---------------------------------------------------

    def _parse_select(self, arguments: dict[str, Any]) -> Select:
        query = parse_select(arguments, self.tables, self.frame_rows, self.relationships)
        return dataclasses.replace(
            query, filters=sendable_filters(query.filters), offset=_sendable_offset(query)
        )

    def _parse_aggregate(self, arguments: dict[str, Any]) -> AggregateQuery:
        """The same sending rules as a select: its filters as PostgREST reads them; a join
        along a declared relationship is a spread embed (``_aggregate.select_items``)."""
        query = parse_aggregate(
            arguments, self.tables, self.frame_rows, SUPABASE_AGGREGATES, self.relationships
        )
        response_names(query)  # two outputs under one key are refused before any request
        # Groups come in pages: without an order PostgreSQL may give each page its own, so
        # they are ordered by the group columns (as frames_aggregate orders its groups).
        order = query.order or tuple((k.column, False) for k in query.group_by)
        return dataclasses.replace(
            query,
            filters=sendable_filters(query.filters),
            offset=_sendable_offset(query),
            order=order,
        )

    def _aggregate_words(self, arguments: dict[str, Any]) -> str:
        return aggregate_words(
            parse_aggregate(
                arguments, self.tables, self.frame_rows, SUPABASE_AGGREGATES, self.relationships
            )
        )

    def _parse_insert(self, arguments: dict[str, Any]) -> Insert:
        query = parse_insert(arguments, self.tables)
        rows = tuple(sendable_row(r, f"rows[{i}]") for i, r in enumerate(query.rows))
        return dataclasses.replace(query, rows=rows)

    def _parse_update(self, arguments: dict[str, Any]) -> Update:
        query = parse_update(arguments, self.tables)
        return dataclasses.replace(
            query,
            values=sendable_row(query.values, "values"),
            filters=sendable_filters(query.filters),
        )

    # ---- what the user sees before approving ----------------------------------------------

    def preview_insert(self, arguments: dict[str, Any]) -> dict[str, Any]:
        query = self._parse_insert(arguments)
        columns: dict[str, None] = {}
        for row in query.rows:
            columns.update(dict.fromkeys(row))
        rows = pd.DataFrame([dict(r) for r in query.rows], columns=list(columns))
        return {"table": query.table, "rows": rows}

    async def preview_update(self, arguments: dict[str, Any], ctx: RunContext) -> Any:
        """The card: how many rows match now, counted with the run's client (so row level
        security applies), and the first few of them with the new values beside the old. A
        failed count answers the call with its error instead of asking the user."""
        query = self._parse_update(arguments)
        spec = self.tables[query.table]
        fetched = await self._fetch(
            ctx,
            query.table,
            lambda c: build_matching(c, query.table, query.filters, spec, SAMPLE_ROWS),
        )
        if isinstance(fetched, ToolOutput):
            return fetched
        records, response = fetched
        count = getattr(response, "count", None)
        if not isinstance(count, int):
            return error_output(
                "no_count",
                "the server did not say how many rows this update matches, so it was not "
                "shown to the user",
                hint="Is the client pointed at a Supabase / PostgREST URL?",
            )
        sample = postgrest_frame(records[:SAMPLE_ROWS], spec.columns)
        card: dict[str, Any] = {
            "table": query.table,
            EFFECT: update_effect(count, len(sample), _GUARANTEE),
            "where": where_text(query.filters),
            "changes": dict(query.values),
            ROWS_MATCHED: count,
        }
        if count:
            card["rows that change"] = rows_that_change(sample, query.values)
        card["filters"] = [filter_dict(f) for f in query.filters]
        return card

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
            if exc.__cause__ is not None:  # the views show where the user's factory raised
                _user_errors.keep_for_running(exc.__cause__)
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
        response = await send(build(client), self.tables[table].columns)
        if isinstance(response, ToolOutput):
            return response
        rows = rows_of(response, self.tables[table])
        if isinstance(rows, ToolOutput):
            return rows
        return rows, response

    async def _pages(
        self,
        ctx: RunContext,
        spec: TableSpec,
        query: Any,
        build: Callable[[Any, Any, bool], Any],
    ) -> tuple[list[dict[str, Any]], int | None] | ToolOutput:
        """Every row ``query`` takes (its ``limit``: at most ``frame_rows``), in pages of at
        most :data:`PAGE_ROWS` through the run's client, each a bounded request with the same
        filters and order: never one unbounded request. The rows, and the exact count when the
        query asked for one (on its first page). A page shorter than asked is the last."""
        client = await self._client(ctx)
        if isinstance(client, ToolOutput):
            return client
        rows: list[dict[str, Any]] = []
        count: int | None = None
        while True:
            want = min(PAGE_ROWS, query.limit - len(rows))
            first = not rows and count is None
            page = dataclasses.replace(query, limit=want, offset=query.offset + len(rows))
            if not first and isinstance(page, Select):
                page = dataclasses.replace(page, count=False)
            response = await send(
                build(client, page, query.limit > PAGE_ROWS), self.tables[query.table].columns
            )
            if isinstance(response, ToolOutput):
                return response
            got = rows_of(response, spec)
            if isinstance(got, ToolOutput):
                return got
            if first:
                found = getattr(response, "count", None)
                count = found if isinstance(found, int) else None
            rows.extend(got[:want])  # cut again: the server may send more than asked
            if len(got) < want or len(rows) >= query.limit or want == 0:
                return rows, count

    async def _written(
        self, ctx: RunContext, spec: TableSpec, build: Callable[[Any], Any]
    ) -> pd.DataFrame | ToolOutput:
        """Send a write; the rows it returned (allowed columns only) as a DataFrame."""
        fetched = await self._fetch(ctx, spec.name, build)
        if isinstance(fetched, ToolOutput):
            return fetched
        return postgrest_frame(fetched[0], spec.columns)


def _sendable_offset(query: Select | AggregateQuery) -> int:
    """PostgREST answers limit=0 with an offset by 416 (ApiRequest.getRanges: an empty range
    that is not the limit-zero range); with no rows asked for, an offset is moot."""
    return query.offset if query.limit else 0


def _more_than_shown(error: ToolOutput, shown: int) -> ToolOutput:
    """PostgREST's max-affected refusal (``PGRST124``, ``failExceedsMaxAffectedPref``), said
    for the model and the card; other errors as they are."""
    detail = error.data.get("error", {}) if isinstance(error.data, dict) else {}
    if detail.get("code") != "PGRST124":
        return error
    found = re.search(r"\d+", str(detail.get("details") or ""))
    now = f"{found.group()} rows match now" if found else "more rows match now"
    return error_output(
        "more_rows_than_approved",
        f"Nothing was updated: {now}, but the approval card showed {shown}.",
        hint="Tell the user; to go on, send the update again so they can approve the new count, "
        "or narrow the filters.",
        details=detail.get("details"),
    )


class _FactoryError(Exception):
    """The user's client factory failed; the model gets the message, the run goes on."""
