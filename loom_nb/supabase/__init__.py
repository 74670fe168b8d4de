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
                            ``{column, desc}``); ``limit`` (int, at most ``frame_rows``);
                            ``offset`` (int, for paging); ``count`` (bool: also report the
                            exact number of matching rows). Returns a DataFrame.
``{name}_insert``           ``table`` (a writable one); ``rows`` (list of ``{column: value}``).
                            Waits for approval. Returns the inserted rows as a DataFrame.
``{name}_update``           ``table`` (a writable one); ``values`` (``{column: new value}``);
                            ``filters`` (as for select, at least one). Waits for approval;
                            the card shows how many rows match and the first of them.
                            Returns the updated rows as a DataFrame.
``{name}_aggregate``        With ``aggregates=True``. ``table``; ``join``; ``group_by`` (plain
                            columns, a joined table's too);
                            ``aggregates`` (list of ``{fn, column}``, ``fn`` one of count,
                            sum, avg, min, max; count without a column counts rows; output
                            columns ``fn_column``, or ``count``); ``filters`` (as for
                            select); ``order`` (group_by columns); ``limit``; ``offset``.
                            Returns a DataFrame of groups.
==========================  ===================================================================

``{name}_insert`` and ``{name}_update`` exist only when some table has ``"write": True``.

Two bounds: the model sees at most ``max_rows`` rows of a result; the DataFrame of the call
holds every matching row (or group) up to ``frame_rows`` (default 10,000), fetched with the
same client, filters and order in requests of at most 1,000 rows (Supabase's default
``max-rows``; a project set lower than that would end the pages early), each a bounded
``limit``/``offset`` page. An aggregate's groups are ordered by its group columns when the
model gives no order, so its pages agree. Where ``frame_rows`` cuts the frame, every view says
so.

Joins, only along ``relationships={"orders.customer_id": "customers.id"}`` between two
allowlisted tables: ``{name}_select`` with ``"join": ["customers"]`` sends a PostgREST to-one
embed along that foreign key, named by its column (``select=id,customers!customer_id(tier)``;
``!inner`` when a filter names ``customers.tier``, as a filter on a plain embed would only
empty the embed), and ``order=customers(tier).desc``. The rows come back with
``customers.tier`` columns beside their own (empty where no customer matched, or row level
security hid it). ``{name}_aggregate`` with ``"join": ["customers"]`` groups by and totals
the joined table's columns through a PostgREST *spread* embed along the same key
(``select=sum_total:total.sum(),...customers!customer_id(tier)``: PostgREST treats a spread's
columns as the top level's, PostgREST 12 and later), ``!inner`` when a filter names it; the
frame names them ``customers.tier`` and ``sum_customers.credit``. What PostgREST's aggregates
cannot compute (median, std, var, percentile, bins, time buckets of a column) is refused
before any request, by name.

Aggregates (``aggregates=True``) are computed by PostgREST's aggregate functions
(``select=status,count:count(),sum_total:total.sum()``), so totals cover every matching row,
not only ``max_rows`` of them; row level security applies as for a select. PostgREST serves
them only when ``pgrst.db_aggregates_enabled`` is on (off by default); on Supabase run
``ALTER ROLE authenticator SET pgrst.db_aggregates_enabled = 'true'; NOTIFY pgrst, 'reload
config';`` (without it the model is told that aggregates are off). Time buckets come from a
view you allowlist, since PostgREST groups by columns only::

    CREATE VIEW orders_by_week WITH (security_invoker = true) AS   -- RLS of the caller applies
      SELECT *, date_trunc('week', created_at) AS week FROM orders;

``security_invoker`` (PostgreSQL 15) makes the view apply the caller's row level security;
a plain view runs as its owner and would show every user's rows.

How the rules are kept:

* The client factory runs once per run (cached in ``ctx.state``) with the run's context; it
  may be sync or async and return supabase-py's ``Client`` or ``AsyncClient``. loom_nb never
  creates a client and never touches auth.
* Every request is built from checked pieces: the table from the allowlist, select lists and
  ``order`` from plain identifiers (the allowed columns are listed, ``*`` is sent only for a
  table without a ``columns`` list), filters through the client's named methods (``eq``,
  ``neq``, ``gt``, ``gte``, ``lt``, ``lte``, ``like``, ``ilike``, ``in_``, ``is_(col, None)``,
  ``not_``), never ``or_`` or ``filter``; ``limit`` an int of at most 1,000 a page; the rows
  are cut again after the response; an embed only along a declared relationship. A refused
  input sends no request at all.
* Filter values cannot change a query's shape: PostgREST reads a single value verbatim after
  ``op.``, and supabase-py quotes ``in`` list items that hold ``,:()"\\``. The one place where
  PostgREST trims (spaces before the first ``in`` item) is avoided by ordering the items.
* Nor its meaning: what the card says is what PostgREST runs. PostgREST reads ``*`` in a like
  pattern as ``%``, ``in.()`` as the empty list and cuts ``in`` items at a NUL; such patterns
  and NULs are refused with advice for the model, ``in [""]`` goes as ``eq ''``, and integral
  numbers go in integer form (``_query.sendable_filters`` names the PostgREST functions).
* An update's card counts the rows it matches, with the run's client (so RLS applies), and
  shows the first few with the new values beside the old; the approved PATCH is sent with
  ``max_affected(n)``, so if more rows match by then, PostgREST changes nothing and the model
  and the card are told (PostgREST 12.2 or later; older servers ignore the bound).
* supabase-py retries a GET on 503/520 and on connection failures, sleeping 1, 2 and 4 s.
  Tools send each request with ``.retry(False)``: the model gets the error at once and can
  try again, instead of a cell hanging silently for 7 s.
* PostgREST errors (``APIError``: RLS refusals, constraint errors) and network errors
  (``httpx.HTTPError``: refused connections, timeouts) reach the model as
  ``{"error": {"code", "message", "hint", "details"}}``; the run goes on. PostgreSQL writes
  row values into ``details`` ("Failing row contains (...)"), so the model gets them inside
  a data block, as it gets rows.
"""

from __future__ import annotations

try:
    import supabase as _supabase  # noqa: F401  (the extra this module needs)
except ImportError:
    from loom_nb._errors import MissingExtra

    raise MissingExtra("supabase", "supabase", "loom_nb.supabase") from None

from collections.abc import Mapping
from typing import Any

from loom_nb._errors import UserError
from loom_nb._tables.options import (
    FRAME_ROWS,
    check_connector_options,
    check_frame_rows,
    parse_relationships,
    parse_tables,
)
from loom_nb._tools import Connector
from loom_nb.supabase._connector import ClientFactory, SupabaseConnector

__all__ = ["ClientFactory", "supabase_tools"]


def supabase_tools(
    *,
    client: ClientFactory,
    tables: Mapping[str, Mapping[str, Any] | None],
    max_rows: int = 50,
    frame_rows: int = FRAME_ROWS,
    relationships: Mapping[str, str] | None = None,
    approve_writes: bool = True,
    name: str = "supabase",
    aggregates: bool = False,
) -> Connector:
    """Give an agent the Supabase tables you list, as tools (see the module docs for the table
    of tools and their arguments).

    ``client(ctx)`` builds the client for one run, with the signed-in user's session, so
    row level security applies. ``tables`` maps each allowed table to its options:
    ``description``, ``columns`` (the allowed columns; all when omitted) and ``write``.
    ``aggregates=True`` adds ``{name}_aggregate``: count, sum, avg, min and max computed by
    PostgREST over every matching row (needs ``pgrst.db_aggregates_enabled``; see the module
    docs). Every configuration mistake raises :class:`~loom_nb.UserError` here.
    """
    if not callable(client):
        raise UserError(
            "supabase_tools(client=...) takes a function ctx -> supabase Client, called once per "
            f"run; got {type(client).__name__}. Wrap a client you already have: "
            "client=lambda ctx: my_client"
        )
    max_rows = check_connector_options(name, max_rows, approve_writes)
    frame_rows = check_frame_rows(frame_rows, max_rows)
    if not isinstance(aggregates, bool):
        raise UserError(f"aggregates must be True or False, got {aggregates!r}")
    specs = parse_tables(tables)
    related = parse_relationships(relationships, specs)
    return SupabaseConnector(
        client, specs, max_rows, approve_writes, name, aggregates, frame_rows, related
    ).connector()
