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
from loom_nb._tables.cards import SAMPLE_ROWS
from loom_nb._tables.grammar import AggregateQuery, Filter, Insert, Select, Update
from loom_nb._tables.options import TableSpec
from loom_nb.supabase._aggregate import select_items

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
        columns = q.columns if q.columns is not None else ("*",)
        select = ", ".join(py_literal(c) for c in columns)
        count = ', count="exact"' if q.count else ""
        chain = [f".table({py_literal(q.table)})", f".select({select}{count})"]
        chain += [_filter(f) for f in q.filters]
        chain += [f".order({py_literal(c)}, desc={d})" for c, d in q.order]
        chain.append(f".limit({q.limit})")
        if q.offset:
            chain.append(f".offset({q.offset})")
        listed = "None" if q.columns is None else py_literal(list(q.columns))
        request = self._request(chain, ctx)
        return (
            f"{request}\n{ctx.result} = {_postgrest_frame(ctx)}({ctx.name('response')}.data, "
            f"{listed}).head({q.limit})"
        )

    def aggregate(self, args: dict[str, Any], ctx: CodeContext) -> str:
        q = self._aggregate(args)
        chain = [
            f".table({py_literal(q.table)})",
            f".select({', '.join(py_literal(item) for item in select_items(q))})",
            *(_filter(f) for f in q.filters),
            *(f".order({py_literal(c)}, desc={d})" for c, d in q.order),
            f".limit({q.limit})",
        ]
        if q.offset:
            chain.append(f".offset({q.offset})")
        request = self._request(chain, ctx)
        return (
            f"{request}\n{ctx.result} = {_postgrest_frame(ctx)}({ctx.name('response')}.data, "
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

    def _request(self, chain: list[str], ctx: CodeContext, name: str = "response") -> str:
        """``response = (client.table(...)....execute())`` with the factory called on the run
        context the export defines."""
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
        wait = "await " if self.awaits else ""
        head = f"({wait}{factory}({run}))" if self.awaits else f"{factory}({run})"
        body = "\n    ".join([head, *chain, ".execute()"])
        return f"{ctx.name(name)} = {wait}(\n    {body}\n)"


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
