"""Let an agent explore the DataFrames already in your notebook, with the Supabase rules.

::

    from loom_nb.frames import frame_tools

    data = frame_tools(
        {
            "orders": {"frame": orders, "description": "Customer orders", "write": True},
            "customers": customers,                      # a DataFrame alone: read-only, all columns
        },
        max_rows=50, approve_writes=True, name="frames",
    )
    analyst = define_agent(name="analyst", model=..., connectors=[data])

Tools (``frames`` is the ``name=`` prefix):

``frames_list_tables()``
    Each frame: name, description, row count, columns with dtypes (and the values of
    categorical columns), writable or not.
``frames_select(table, join?, columns?, filters?, order?, limit?, offset?, count?)``
    The arguments and checks of the Supabase select: filters ``{column, op, value, not}`` with
    ``op`` one of eq, neq, gt, gte, lt, lte, like, ilike, in, is_null; ``order``
    ``[{column, desc}]``; ``limit`` at most ``frame_rows``; ``offset`` for paging; ``count``
    for the number of matching rows.
``frames_aggregate(table, join?, group_by?, aggregates?, filters?, order?, limit?, offset?)``
    ``group_by`` lists columns, time buckets ``{"column": "created_at", "bucket": "week"}``
    (day, week, month, quarter, year; datetime columns only) and bins of a numeric column
    ``{"column": "total", "bins": 20}`` (or explicit edges ``[0, 10, 100]``). ``aggregates``
    ``[{fn, column}]`` with ``fn`` one of count, count_distinct, sum, mean, median, min, max,
    std, var, percentile (``{"fn": "percentile", "column": "total", "p": 0.9}``); output
    columns are named ``fn_column`` (``count`` counts rows; ``p90_total``, ``std_total``).
    ``order`` may name a group column or an output column.

Two bounds: the model sees at most ``max_rows`` rows of any result; the DataFrame of the call
(``result.frames[-1]``, ``-o``, exports) holds every matching row, or every group, up to
``frame_rows`` (default 10,000), and its ``attrs["loom"]`` says how many matched. Where
``frame_rows`` cuts it, the call's header, the frame's caption and the saved view say
``50 of 53 groups (frame_rows=50 cut it)``.

Joins, along ``relationships={"orders.customer_id": "customers.id"}`` only: ``"join":
["customers"]`` in a call on ``orders`` puts the named ``customers`` columns beside each row,
written ``customers.tier`` wherever a column goes. It is ``orders.merge(customers, how="left",
left_on="customer_id", right_on="id", validate="many_to_one")`` (the joined columns prefixed),
keeping ``orders``' index; a filter on a joined column makes it an inner join; a missing key
matches nothing; the model is told how many rows had no match. Both tables must be in
``frames`` and the keys allowed columns; the target key must not repeat.

Distributions: ``std`` and ``var`` are the sample's (pandas' default, SQL's ``stddev``), a
percentile interpolates linearly (``Series.quantile``). A bins group's output (``bin_total``)
holds each bin's **left edge** as a float (not a pandas ``Interval``: it sorts, charts and
exports as a number); bins are ``[left, right)`` with the last one ``[left, right]``, as
``np.histogram``; ``bins: 20`` spans the smallest to the largest matching value
(``np.histogram_bin_edges``); a missing value, or one outside explicit edges, is the missing
group. Only bins that hold rows come back; the edges are in ``attrs["loom"]["edges"]``.

``frames_append(table, rows)`` and ``frames_update(table, values, filters)``
    Only when a frame has ``write: True``. Each waits for Approve unless
    ``approve_writes=False``. An update without a filter is refused.

Rules, as the model meets them:

- Only the named frames exist, and only their allowed columns (``columns=[...]``, else every
  column of the frame as it is at call time). Names are plain identifiers.
- Filter values are converted to the column's dtype: numbers from numeric strings, timestamps
  from ISO 8601 strings (a time without an offset is read in a tz-aware column's time zone),
  numbers to text for text columns. When that is impossible the model gets an error saying
  why. Missing values (NaN, None, NaT, NA) match only ``is_null``, negated or not, as in SQL.
- Groups follow SQL's ``GROUP BY``: missing values (NaT included) form their own group,
  last; count_distinct and median ignore missing values. A time bucket is computed on the
  column's own clock (a tz-aware column's time zone, summer time included): weeks start on
  Monday (ISO 8601), and the output column (``week_created_at``) holds each bucket's start,
  with the column's dtype. These are the groups of ``df.groupby(pd.Grouper(key="created_at",
  freq="W-MON", closed="left", label="left"))`` (``"D"``, ``"MS"``, ``"QS"``, ``"YS"`` for
  the others), except that only buckets holding rows come back and NaT rows are kept.
- ``like``/``ilike`` use SQL wildcards (``%`` any text, ``_`` one character, ``\\`` escapes);
  ``ilike`` ignores case. Sorting puts missing values last in both directions.
- Results are new DataFrames (copies that keep your frame's index labels, so
  ``orders.loc[result.index]`` finds the rows); the model sees a compact bounded rendering.

DuckDB tables: relations, Parquet and CSV files
-----------------------------------------------

With the ``duckdb`` extra, a table may be a DuckDB relation (``{"trips": rel}``, or
``{"frame": rel, "connection": con}`` when it was made on a connection of your own) or a
Parquet or CSV path or glob (``{"trips": {"path": "trips/*.parquet"}}``, with ``columns`` and
``description`` as for a frame). DuckDB computes each call on such a table (and a call that
joins one, the DataFrames it joins registered for the call) as one statement: the allowlisted
names quoted, every value a named parameter converted as above. Same grammar and answers as
for DataFrames (``tests/frames/test_duckdb_contract.py`` holds both backends to the same
frames); each select row's index is its position in the table; a ``TIMESTAMPTZ`` column reads
in the connection's time zone. Results are pandas DataFrames; the export is the same statement
on ``duckdb.execute``, reading the files again. (A float column's NaN is missing, as in pandas:
the statement makes it NULL where DuckDB may hold it, unless the table is a large one DuckDB
stores, 5M rows or more, whose statistics show no NaN at the call; the export always does, for
the rows it will find.)
Paths are checked when ``frame_tools`` is called (the file or a match of the glob exists, the
type is known); DuckDB tables are read-only. DuckDB is imported only for them.

Categories and durations keep pandas' rules where the store keeps them: an ENUM is an
ordered category (DuckDB orders an ENUM by its values' order, and so does ``rel.df()``; a
category passed through ``duckdb.from_df`` becomes one), compared, sorted, grouped and reduced
in that order; a Parquet or CSV file holds a category as text. A duration's sum, mean, median
and std are pandas' (DuckDB has no sum or std of an ``INTERVAL``); Parquet keeps durations to
the millisecond, and a CSV file holds them as text.

In-memory DataFrames stay on pandas, at every size: there is no switch. Measured at 10M rows
(``bench/bench_duckdb.py``), the tool over DuckDB answers a filtered aggregate by a category
2.7-6.4x faster than over pandas, a weekly aggregate of every row 4.4-8.8x, and a filtered
weekly aggregate from 1.3x slower to 1.3x faster (runs differ). Speed alone would switch a
large frame; but its answers would change with the frame's size: an
unordered category comes back as an ordered one, a ``UTC`` column as ``Etc/UTC``, sums differ
in the last bits, a select's index is the row's position, a tz-aware column's buckets follow
the connection's zone, and the exported code becomes SQL. Pass ``duckdb.from_df(df)`` to
choose DuckDB, and its rules, for a frame.

The notebook's DataFrames, opt-in
---------------------------------

``frame_tools(namespace=True)`` lets the agent read the DataFrames bound to the notebook's
variables (IPython's user namespace), by variable name; in a script pass the mapping to read,
``frame_tools(namespace=globals())``. Alone or beside ``frames``:

- Read-only: they are never written, whatever ``approve_writes`` says.
- Listed afresh at each run: a run reads the namespace at its first call and keeps what it
  found until it ends (so its calls agree); the next run sees variables defined since.
- Names starting with ``_`` (IPython's ``_``, ``_1``, private helpers) are left out, as are
  names that are not plain identifiers and frames with duplicate column names.
- At most :data:`NAMESPACE_FRAMES` (20) are listed and usable, the first by name; the listing
  says how many more there are. Frames you pass in ``frames`` win over variables of the same
  name.

Writes and "in place"
---------------------

The connector holds a reference to the very DataFrame object you passed. After Approve (and only
then), that object is changed in place: any variable bound to it, like ``orders`` above, sees
the new rows or values, and ``id(orders)`` does not change.

- **append**: the rows are added at the end, with the frame's dtypes exactly (values are
  converted as for filters; a value that does not fit, such as a missing value in an ``int64``
  or ``bool`` column or a value outside a categorical's categories, is refused before anything
  is written). New rows get the index labels after the largest one (``0, 1, ...`` for an empty
  frame); a ``RangeIndex`` stays a ``RangeIndex``. Frames with any other index (strings,
  timestamps, a MultiIndex) cannot be made writable: appended rows would have no label to use;
  ``reset_index()`` first. pandas has no in-place append (and is deprecating ``inplace=``), so
  the result is built with ``pd.concat`` and the object itself takes it over through public
  operations that change it: its columns are taken out, its index grows by ``.loc``
  enlargement (cheap with no columns), and the result's columns are put back. If a step fails,
  the frame is put back as it was. Cost: about one copy of the frame, as with ``pd.concat``.
- The frame is locked while a tool reads or writes it: calls of one turn run concurrently,
  and an approved append and update never interleave.
- **update**: ``frame.loc[matching_rows, column] = value`` for each value, all values converted
  before the first is written, so a refused value changes nothing.
- Not changed: objects that are not the one you passed. Rebinding your variable
  (``orders = orders[orders.total > 0]``, ``orders = pd.concat(...)``) gives you a new object
  that the agent does not see (build the connector again); frames derived earlier (slices,
  ``orders.copy()``, the results in ``thread.frames``) keep their contents, as copy-on-write
  pandas does.
- The approval card shows the rows to append as a DataFrame, or the changes, the filter, the
  number of rows matching now and the first of them with the new values beside the old. The
  rows are matched again when the write runs: if they are not the rows the card counted (you
  changed the frame while the card waited), nothing is changed and the model and the card say
  so.
- Calls whose arguments cannot work (an unknown column, a value that does not fit) are answered
  with an error at once instead of asking you to approve something that would fail; such a call
  never writes.
"""

# The machinery, a concept a module: _values (what a JSON value means for a column's dtype),
# _filters (filter masks, SQL LIKE), _aggregate, _allowlist (the usable frames, their allowed
# columns and locks), _reads, _writes (checked before approval, done in place) and _connector
# (these operations, handed to the table tools' builder in loom_nb._tables).

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from loom_nb._errors import UserError
from loom_nb._tables.options import (
    FRAME_ROWS,
    TableSpec,
    check_connector_options,
    check_frame_rows,
    parse_relationships,
    parse_tables,
)
from loom_nb._tools import Connector
from loom_nb.frames._aggregate import AGGREGATE_FUNCTIONS
from loom_nb.frames._allowlist import AllowedFrames, check_frame, usable_name
from loom_nb.frames._connector import frame_connector
from loom_nb.frames._duckdb import (
    DuckTable,
    Link,
    case_clashes,
    check_path,
    is_relation,
    new_link,
    open_path,
    open_relation,
)
from loom_nb.frames._joins import check_keys
from loom_nb.frames._namespace import NAMESPACE_FRAMES, namespace_source

__all__ = ["AGGREGATE_FUNCTIONS", "NAMESPACE_FRAMES", "frame_tools"]

_OPTIONS = ("frame", "path", "connection", "description", "columns", "write")


def frame_tools(
    frames: Mapping[str, Any] | None = None,
    *,
    namespace: bool | Mapping[str, Any] = False,
    max_rows: int = 50,
    frame_rows: int = FRAME_ROWS,
    relationships: Mapping[str, str] | None = None,
    approve_writes: bool = True,
    name: str = "frames",
) -> Connector:
    """Tools over DataFrames in your notebook: list, select, aggregate, and optional writes.

    ``frames`` maps a table name to a DataFrame, or to options ``{"frame": df, "description":
    "...", "columns": [...], "write": True}``. Everything is checked here: names are plain
    identifiers, options are known, listed columns exist, values are DataFrames, and writable
    frames have an integer index. See the module documentation for the exact semantics.

    ``namespace=True`` also lets the agent read the DataFrames of the notebook's variables by
    name (IPython's namespace; in a script pass a mapping, ``namespace=globals()``): listed
    afresh at each run, read-only, names starting with ``_`` left out, at most
    :data:`NAMESPACE_FRAMES` of them (the first by name).

    ``max_rows`` bounds the rows the model sees of a result; ``frame_rows`` the rows of the
    DataFrame you get from a call. ``relationships={"orders.customer_id": "customers.id"}``
    lets a call on ``orders`` join ``customers`` (both must be in ``frames``).
    """
    max_rows = check_connector_options(name, max_rows, approve_writes)
    frame_rows = check_frame_rows(frame_rows, max_rows)
    source = namespace_source(namespace)
    if frames is None and source is not None:
        frames = {}
    if not isinstance(frames, Mapping) or (not frames and source is None):
        raise UserError(
            'frames must be a non-empty dict like {"orders": orders_df} (or pass '
            "namespace=True to let the agent read the notebook's DataFrames)"
        )
    options: dict[str, Mapping[str, Any]] = {}
    for table, value in frames.items():
        if isinstance(value, pd.DataFrame) or is_relation(value):
            options[table] = {"frame": value}
        elif isinstance(value, Mapping):
            options[table] = value
        else:
            raise UserError(
                f"frames[{table!r}] must be a DataFrame, a DuckDB relation, or a dict of "
                f"options with 'frame' or 'path', got {type(value).__name__}"
            )
    # Names, unknown options, column lists, description and write flags: the shared rules.
    specs = parse_tables(options, allowed_options=_OPTIONS, argument="frames") if options else {}
    data: dict[str, pd.DataFrame] = {}
    duck: dict[str, DuckTable] = {}
    files: list[Link] = []  # the connector's own connection, opened for its first file
    for table, spec in specs.items():
        duck_table = _duck_table(table, spec, options[table], files)
        frame = duck_table.sample if duck_table is not None else options[table].get("frame")
        if not isinstance(frame, pd.DataFrame):
            raise UserError(
                f"frames[{table!r}]['frame'] must be a pandas DataFrame or a DuckDB relation, "
                f"got {type(frame).__name__}"
            )
        check_frame(table, spec, frame)
        data[table] = frame
        if duck_table is not None:
            duck[table] = duck_table
    related = parse_relationships(relationships, specs)
    for r in related:  # the keys exist in the frames, and the agent may name them
        for t, c in ((r.table, r.column), (r.other, r.other_column)):
            if c not in data[t].columns or not usable_name(c):
                raise UserError(
                    f"relationships names {t}.{c}, but frame {t!r} has no usable column {c!r}"
                )
        check_keys(r, data[r.table][r.column], data[r.other][r.other_column])
    for r in related:  # DuckDB joins tables of one connection (and DataFrames) only
        a, b = duck.get(r.table), duck.get(r.other)
        side = r.table if a is None else r.other  # the DataFrame, when one side is
        if (a is None) != (b is None) and (clash := case_clashes(data[side])):
            raise UserError(
                f"frame {side!r} has columns {clash} whose names differ only in case; DuckDB, "
                "which joins it to a DuckDB table, reads them as one name. Rename them "
                "(df.rename(columns=...))"
            )
        if a is not None and b is not None and a.link is not b.link:
            raise UserError(
                f"relationships joins {r.table!r} and {r.other!r}, which DuckDB reads on two "
                "connections; give both as paths, or relations of one connection"
            )
    tables = AllowedFrames(
        specs,
        data,
        max_rows,
        name,
        source,
        frame_rows=frame_rows,
        relationships=related,
        duck=duck,
    )
    return frame_connector(tables, approve_writes)


def _duck_table(
    table: str, spec: TableSpec, options: Mapping[str, Any], files: list[Link]
) -> DuckTable | None:
    """The DuckDB table ``options`` give (a relation as 'frame', or a 'path'), opened and
    checked now; None for a DataFrame."""
    frame, path = options.get("frame"), options.get("path")
    if path is not None and frame is not None:
        raise UserError(f"frames[{table!r}] gives both 'frame' and 'path'; keep one")
    if path is None and not is_relation(frame):
        if "connection" in options:
            raise UserError(
                f"frames[{table!r}]['connection'] goes with a DuckDB relation as 'frame'"
            )
        return None
    if spec.write:
        raise UserError(
            f"frames[{table!r}] is read by DuckDB, which frame_tools does not write; "
            "drop 'write', or pass a DataFrame (rel.df()) to write to"
        )
    if path is None:
        return open_relation(table, frame, options.get("connection"))
    if "connection" in options:
        raise UserError(
            f"frames[{table!r}]['connection'] goes with a relation; a 'path' is read on the "
            "connector's own connection"
        )
    checked = check_path(table, path)
    if not files:
        files.append(new_link())
    return open_path(table, checked, files[0])
