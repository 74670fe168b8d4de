"""The supabase-py code of each Supabase call, with the user's client factory by name: the
request the tool sent, method by method, and the DataFrame made of its rows as the tool made
it (``postgrest_frame``, the tool's own function, written into the code's setup: plain
pandas, no loom_nb)."""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable
from typing import Any

from loom_nb._code import CodeContext, py_literal
from loom_nb._embed import embed
from loom_nb._tables.grammar import AggregateQuery, Filter, Insert, Select, Update
from loom_nb._tables.options import TableSpec
from loom_nb._tables.update_preview import SAMPLE_ROWS
from loom_nb.supabase._aggregate import response_names, select_items
from loom_nb.supabase._query import embedded_columns, select_columns

#: The rows of one request (``loom_nb.supabase._connector.PAGE_ROWS``).
PAGE_ROWS = 1000

_METHODS = ("eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike")


class SupabaseCode:
    """The code of one connector's calls; ``parse_*`` are the connector's own checks, so the
    code shows the request exactly as it was sent (``in`` items reordered, and so on)."""

    def __init__(
        self,
        factory: Callable[..., Any],
        name: str,
        tables: dict[str, TableSpec],
        parse_select: Callable[[dict[str, Any]], Select],
        parse_insert: Callable[[dict[str, Any]], Insert],
        parse_update: Callable[[dict[str, Any]], Update],
        parse_aggregate: Callable[[dict[str, Any]], AggregateQuery],
        approve_writes: bool,
    ) -> None:
        self.factory_name = factory_name(factory, name)
        self.approve_writes = approve_writes
        self.awaits = inspect.iscoroutinefunction(factory)
        self.tables = tables
        self._select, self._insert, self._update = parse_select, parse_insert, parse_update
        self._aggregate = parse_aggregate

    def select(self, args: dict[str, Any], ctx: CodeContext) -> str:
        q = self._select(args)
        select = ", ".join(py_literal(c) for c in select_columns(q))
        count = ', count="exact"' if q.count else ""
        chain = [f".table({py_literal(q.table)})", f".select({select}{count})"]
        chain += [_filter(f) for f in q.filters]
        chain += [f".order({py_literal(_order_column(c))}, desc={d})" for c, d in q.order]
        listed = "None" if q.columns is None else py_literal(list(q.columns))
        request, rows = self._pages(chain, q.limit, q.offset, ctx)
        flat = _flattened(q, rows, ctx)
        if flat:
            request, rows = f"{request}\n{flat[0]}", flat[1]
        return (
            f"{request}\n{ctx.result} = {_postgrest_frame(ctx)}({rows}, {listed}).head({q.limit})"
        )

    def aggregate(self, args: dict[str, Any], ctx: CodeContext) -> str:
        q = self._aggregate(args)
        chain = [
            f".table({py_literal(q.table)})",
            f".select({', '.join(py_literal(item) for item in select_items(q))})",
            *(_filter(f) for f in q.filters),
            *(f".order({py_literal(_order_column(c))}, desc={d})" for c, d in q.order),
        ]
        request, rows = self._pages(chain, q.limit, q.offset, ctx)
        names = response_names(q)
        if any(k != v for k, v in names.items()):  # a join's columns come back by their names
            renamed, row = ctx.name("named_rows"), ctx.name("row")
            request += (
                f"\n{renamed} = [  # the joined columns as the tool names them: customers.tier\n"
                f"    {{{py_literal(names)}[k]: v for k, v in {row}.items()}}\n"
                f"    for {row} in {rows}\n]"
            )
            rows = renamed
        return (
            f"{request}\n{ctx.result} = {_postgrest_frame(ctx)}({rows}, "
            f"{py_literal(q.outputs)}).head({q.limit})"
        )

    def insert(self, args: dict[str, Any], ctx: CodeContext) -> str:
        q = self._insert(args)
        spec = self.tables[q.table]
        rows = py_literal([dict(r) for r in q.rows])
        chain = [
            f".table({py_literal(q.table)})",
            f'.insert({rows}, returning="representation", default_to_null=False)',
        ]
        if spec.columns is not None:
            chain.append(f".select({', '.join(py_literal(c) for c in spec.columns)})")
        return self._request(chain, ctx)

    def update(self, args: dict[str, Any], ctx: CodeContext) -> str:
        """The PATCH; with approvals, after the count its card showed (``build_matching``),
        held to that count with ``max_affected`` as the connector sends it."""
        q = self._update(args)
        spec = self.tables[q.table]
        columns = ", ".join(py_literal(c) for c in spec.columns or ("*",))
        filters = [_filter(f) for f in q.filters]
        chain = [
            f".table({py_literal(q.table)})",
            f'.update({py_literal(dict(q.values))}, returning="representation")',
            *filters,
        ]
        if spec.columns is not None:
            chain.append(f".select({columns})")
        if not self.approve_writes:
            return self._request(chain, ctx)
        matching = [
            f".table({py_literal(q.table)})",
            f'.select({columns}, count="exact")',
            *filters,
            f".limit({SAMPLE_ROWS})",
        ]
        counted = ctx.name("matching")
        return (
            self._request(matching, ctx, "matching")
            + "\n"
            + self._request([*chain, f".max_affected({counted}.count)"], ctx)
        )

    def _pages(
        self, chain: list[str], limit: int, offset: int, ctx: CodeContext
    ) -> tuple[str, str]:
        """The request of a read and the expression of its rows: one request when its rows fit
        one page, else the pages of at most ``PAGE_ROWS`` rows the tool fetched, each a bounded
        request with the same filters and order."""
        if limit <= PAGE_ROWS:
            page = [f".limit({limit})", *([f".offset({offset})"] if offset else [])]
            return self._request([*chain, *page], ctx), f"{ctx.name('response')}.data"
        client, rows, want = ctx.name("client"), ctx.name("rows"), ctx.name("want")
        response = ctx.name("response")
        start = f"{offset} + len({rows})" if offset else f"len({rows})"
        body = "\n        ".join(
            [client, *chain, f".limit({want})", f".offset({start})", ".execute()"]
        )
        wait = "await " if self.awaits else ""
        return (
            f"{client} = {self._client(ctx)}\n"
            f"{rows} = []\n"
            f"while True:  # pages of at most {PAGE_ROWS} rows, as the tool fetched them\n"
            f"    {want} = min({PAGE_ROWS}, {limit} - len({rows}))\n"
            f"    {response} = {wait}(\n        {body}\n    )\n"
            f"    {rows} += {response}.data[:{want}]\n"
            f"    if len({response}.data) < {want} or len({rows}) >= {limit}:\n"
            "        break"
        ), rows

    def _client(self, ctx: CodeContext) -> str:
        """The factory called on the run context the export defines."""
        factory = ctx.expect(
            self.factory_name, "the client factory you gave supabase_tools(client=...)"
        )
        context = ctx.expect("context", "the context= dict your runs passed ({} if none)")
        run = ctx.name("ctx")
        ctx.setup(
            "from loom_nb import RunContext\n\n"
            "# What the client factory is called with, as in the agent's runs\n"
            f"{run} = RunContext({py_literal(ctx.agent)}, {py_literal(ctx.thread_id)}, "
            f"user_id={py_literal(ctx.user_id)}, data={context})"
        )
        return f"(await {factory}({run}))" if self.awaits else f"{factory}({run})"

    def _request(self, chain: list[str], ctx: CodeContext, name: str = "response") -> str:
        """``response = (client.table(...)....execute())``."""
        wait = "await " if self.awaits else ""
        body = "\n    ".join([self._client(ctx), *chain, ".execute()"])
        return f"{ctx.name(name)} = {wait}(\n    {body}\n)"


def _order_column(column: str) -> str:
    """A joined column as PostgREST orders by it: ``customers(tier)``."""
    other, _, name = column.partition(".")
    return f"{other}({name})" if name else column


def _flattened(q: Select, rows: str, ctx: CodeContext) -> tuple[str, str] | None:
    """Each row's embeds as ``customers.tier`` columns beside its own (``flatten_embeds``)."""
    if not q.joins:
        return None
    flat, row = ctx.name("flat_rows"), ctx.name("row")
    parts = []
    for r in q.joins:
        named = embedded_columns(q, r.other)
        embed = f"({row}.get({py_literal(r.other)}) or {{}})"
        if named is None:
            parts.append(f"**{{{py_literal(r.other + '.')} + k: v for k, v in {embed}.items()}}")
        else:
            prefix, names = py_literal(r.other + "."), py_literal(named)
            parts.append(f"**{{{prefix} + c: {embed}.get(c) for c in {names}}}")
    others = py_literal([r.other for r in q.joins])
    line = (
        f"{flat} = [  # each row's embeds as columns beside its own: customers.tier\n"
        f"    {{**{{k: v for k, v in {row}.items() if k not in {others}}}, "
        + ", ".join(parts)
        + f"}}\n    for {row} in {rows}\n]"
    )
    return line, flat


def _postgrest_frame(ctx: CodeContext) -> str:
    """The name of the export's ``postgrest_frame`` (the tool's own, set up once)."""
    return embed("loom_nb.supabase._frame", ctx)["postgrest_frame"]


def _filter(f: Filter) -> str:
    negate = ".not_" if f.negate else ""
    column = py_literal(f.column)
    if f.op == "is_null":
        return f"{negate}.is_({column}, None)"
    if f.op == "in":
        return f"{negate}.in_({column}, {py_literal(list(f.value))})"
    assert f.op in _METHODS
    return f"{negate}.{f.op}({column}, {py_literal(f.value)})"


def factory_name(factory: Callable[..., Any], connector: str) -> str:
    """The factory's own name, or ``{connector}_client`` for a lambda."""
    name = getattr(factory, "__name__", "")
    if name.isidentifier() and not keyword.iskeyword(name):
        return str(name)
    return connector.replace("-", "_") + "_client"
