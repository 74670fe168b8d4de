"""``supabase_aggregate`` (``aggregates=True``): totals computed by PostgREST's aggregate
functions, so they cover every matching row, not only ``max_rows`` of them.

The request is ``select=status,count:count(),sum_total:total.sum()`` with the usual filters:
PostgREST groups by the plain columns of the select. Every piece comes from a checked value
(the shared grammar, ``loom_nb._tables.grammar.parse_aggregate``, with the rules below): the
table and columns from the allowlist (plain identifiers), the function from a fixed set, the
output names made from those. It needs ``pgrst.db_aggregates_enabled`` on the project (off
by default); without it PostgREST answers PGRST123 and the model is told so.

A join along a declared relationship is a *spread* embed of the related table, named by the
foreign key (``...customers!customer_id(tier,sum_customers_credit:credit.sum())``, ``!inner``
when a filter names it): PostgREST treats a spread's columns as the top level's, so they group
the totals and feed them ("Using Columns from a Spreaded Resource" in PostgREST's aggregate
documentation; ``hoistSpreadAggFunctions`` in ``Plan.hs`` and ``groupF`` in
``Query/SqlFragment.hs``, v12.0 on). A spread needs a column: a join only filtered on carries
a count of its key, which the frame leaves out.
"""

from __future__ import annotations

from loom_nb._tables.grammar import Aggregate, AggregateQuery, AggregateRules
from loom_nb._tables.options import Relationship
from loom_nb._tools import ToolInputError

#: PostgREST's aggregate functions (its ``AggregateFunction``), by the names it reads.
FUNCTIONS: tuple[str, ...] = ("count", "sum", "avg", "min", "max")

#: PostgREST groups by plain columns only and cannot order by a total; PostgreSQL would cut
#: an output name past 63 characters, and the column be lost.
SUPABASE_AGGREGATES = AggregateRules(
    "PostgREST", FUNCTIONS, order_by_totals=False, max_output_name=63
)


def select_items(query: AggregateQuery) -> list[str]:
    """The select list PostgREST reads: ``status``, ``sum_total:total.sum()``,
    ``count:count()``, then a spread embed per join."""
    items = [k.column for k in query.group_by if "." not in k.column]
    for a in query.aggregates:
        if a.column is None or "." not in a.column:
            call = "count()" if a.column is None else f"{a.column}.{a.fn}()"
            items.append(f"{a.output}:{call}")
    inner = {f.column.partition(".")[0] for f in query.filters if "." in f.column}
    for r in query.joins:
        named = [_column(k.column) for k in query.group_by if _joined(k.column, r)]
        named += [
            f"{_key(a)}:{_column(a.column or '')}.{a.fn}()"
            for a in query.aggregates
            if _joined(a.column, r)
        ]
        if not named:  # a spread needs a column; a count of the key groups nothing
            named = [f"{_filler(r)}:{r.other_column}.count()"]
        hint = f"{r.other}!{r.column}{'!inner' if r.other in inner else ''}"
        items.append(f"...{hint}({','.join(named)})")
    return items


def response_names(query: AggregateQuery) -> dict[str, str]:
    """Each key of PostgREST's rows and the output column it is: a spread's group column comes
    back under its own name (``tier`` is ``customers.tier``), a joined total under its alias
    (``sum_customers_credit`` is ``sum_customers.credit``). :class:`ToolInputError` when two
    would come back under one key."""
    names: dict[str, str] = {}
    for key, output in (
        *((_column(k.column), k.output) for k in query.group_by),
        *((_key(a), a.output) for a in query.aggregates),
        *((_filler(r), "") for r in query.joins),
    ):
        if key in names and output:
            raise ToolInputError(
                f"PostgREST would return {names[key]!r} and {output!r} both as {key!r}, so one "
                "would be lost; leave one of them out (or aggregate them in two calls)"
            )
        names.setdefault(key, output)
    return {k: v for k, v in names.items() if v}


def _joined(column: str | None, r: Relationship) -> bool:
    """Is ``column`` one of ``r``'s joined table (``customers.tier``)?"""
    return column is not None and column.startswith(f"{r.other}.")


def _column(column: str) -> str:
    """A column as a spread names it: ``tier`` of ``customers.tier``."""
    return column.partition(".")[2] or column


def _key(a: Aggregate) -> str:
    """An aggregate's alias: its output name, a joined column's with ``_`` for the dot."""
    return a.output.replace(".", "_")


def _filler(r: Relationship) -> str:
    return f"joined_{r.other}"
