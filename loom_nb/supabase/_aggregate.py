"""``supabase_aggregate`` (``aggregates=True``): totals computed by PostgREST's aggregate
functions, so they cover every matching row, not only ``max_rows`` of them.

The request is ``select=status,count:count(),sum_total:total.sum()`` with the usual filters:
PostgREST groups by the plain columns of the select. Every piece comes from a checked value
(the shared grammar, ``loom_nb._tables.grammar.parse_aggregate``, with the rules below): the
table and columns from the allowlist (plain identifiers), the function from a fixed set, the
output names made from those. It needs ``pgrst.db_aggregates_enabled`` on the project (off
by default); without it PostgREST answers PGRST123 and the model is told so.
"""

from __future__ import annotations

from loom_nb._tables.grammar import AggregateQuery, AggregateRules

#: PostgREST's aggregate functions (its ``AggregateFunction``), by the names it reads.
FUNCTIONS: tuple[str, ...] = ("count", "sum", "avg", "min", "max")

#: PostgREST groups by plain columns only and cannot order by a total; PostgreSQL would cut
#: an output name past 63 characters, and the column be lost.
SUPABASE_AGGREGATES = AggregateRules(
    "PostgREST", FUNCTIONS, order_by_totals=False, max_output_name=63
)


def select_items(query: AggregateQuery) -> list[str]:
    """The select list PostgREST reads: ``status``, ``sum_total:total.sum()``,
    ``count:count()``."""
    items = [k.column for k in query.group_by]
    for a in query.aggregates:
        call = "count()" if a.column is None else f"{a.column}.{a.fn}()"
        items.append(f"{a.output}:{call}")
    return items
