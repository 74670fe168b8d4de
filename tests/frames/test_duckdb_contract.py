"""The frames contract over both backends: the same random calls (every operator, negated or
not, every bucket, every aggregate, bins, orders, pages, joins) on pandas DataFrames and on
DuckDB (a Parquet glob, a CSV file, a DuckDB relation, a Parquet table joined to a DataFrame)
give the same frames, the same counts and the same refusals; and the code each DuckDB call
exports, run, gives its frame. Categoricals and durations included, compared as each store
keeps them: a relation's ENUM is an ordered category (DuckDB orders an ENUM by its values'
order), a Parquet or CSV file holds a category as text and a CSV file a duration as text."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

from loom_nb import RunContext
from loom_nb._code import CodeContext
from loom_nb._counts import counts_of
from loom_nb._tables.grammar import BUCKETS, OPERATORS
from loom_nb._tools import Connector, ToolInputError
from loom_nb.frames import _duckdb, frame_tools
from loom_nb.frames._aggregate import AGGREGATE_FUNCTIONS

RELATIONSHIPS = {"trips.driver_id": "drivers.id"}


def trips_frame(n: int = 60) -> pd.DataFrame:
    """Trips of every dtype Parquet and DuckDB keep as pandas does, missing values in most."""
    rng = np.random.default_rng(7)
    start = pd.Timestamp("2024-02-26T22:00:00Z")  # weeks, months and a quarter cross
    created = start + pd.to_timedelta(rng.integers(0, 60 * 24 * 70, n), unit="min")
    fare = rng.gamma(2.0, 12.0, n).round(2)
    fare[[3, 17]] = np.nan
    city = rng.choice(np.array(["Paris", "paris", "Lyon", "Nice_1", "a%b", "ß"], dtype=object), n)
    city[[5, 40]] = None
    shipped = pd.Series(created.tz_localize(None).floor("D"))
    shipped[[2, 9]] = pd.NaT
    created = pd.Series(created)
    created[[4]] = pd.NaT
    kind = pd.Categorical(rng.choice(["gold", "silver", "bronze"], n), ["silver", "gold", "bronze"])
    kind[[6, 30]] = np.nan
    size = pd.Categorical(rng.choice(["S", "M", "L"], n), ["S", "M", "L"], ordered=True)
    size[[8]] = np.nan
    # Whole milliseconds: Parquet's INTERVAL keeps no finer.
    wait = pd.Series(pd.to_timedelta(rng.integers(0, 3 * 3600 * 1000, n), unit="ms"))
    wait[[1, 33]] = pd.NaT
    return pd.DataFrame(
        {
            "id": np.arange(n, dtype="int64"),
            "fare": fare,
            "city": city,
            "paid": rng.random(n) < 0.6,
            "riders": pd.array(
                [None if i % 11 == 0 else int(v) for i, v in enumerate(rng.integers(1, 5, n))],
                dtype="Int64",
            ),
            "driver_id": pd.array(
                [None if i % 13 == 0 else int(v) for i, v in enumerate(rng.integers(1, 9, n))],
                dtype="Int64",
            ),
            "created_at": created.dt.as_unit("us"),
            "day": shipped.dt.as_unit("us"),
            "kind": kind,  # an unordered category
            "size": size,  # an ordered one
            "wait": wait.astype("m8[us]"),  # a duration
        }
    )


def drivers_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": np.arange(1, 8, dtype="int64"),  # driver 8 is missing: unmatched trips
            "tier": np.array(["gold", "silver", None, "gold", "bronze", "silver", "gold"], object),
            "rating": [4.5, 3.9, np.nan, 4.9, 4.1, 3.2, 4.4],
        }
    )


TRIPS, DRIVERS = trips_frame(), drivers_frame()
COLUMNS = list(TRIPS.columns)


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Connector]:
    """The same two tables five ways."""
    root = tmp_path_factory.mktemp("duck")
    (root / "trips").mkdir()
    for i in range(3):  # a glob of three files, in order
        part = TRIPS.iloc[i * 20 : (i + 1) * 20]
        duckdb.from_df(part).write_parquet(str(root / "trips" / f"part-{i}.parquet"))
    duckdb.from_df(DRIVERS).write_parquet(str(root / "drivers.parquet"))
    duckdb.from_df(TRIPS).write_csv(str(root / "trips.csv"))
    trips_glob = str(root / "trips" / "*.parquet")

    def make(trips: Any, drivers: Any) -> Connector:
        return frame_tools(
            {"trips": trips, "drivers": drivers}, max_rows=5, relationships=RELATIONSHIPS
        )

    return {
        "pandas": make(TRIPS, DRIVERS),
        # Each DuckDB table's pandas twin: the frame as that store keeps it (``as_stored``).
        **{f"pandas as {k}": make(as_stored(TRIPS, k), DRIVERS) for k in ("enum", "text")},
        "parquet": make({"path": trips_glob}, {"path": str(root / "drivers.parquet")}),
        "parquet+frame": make({"path": trips_glob}, DRIVERS),
        "relation": make(duckdb.from_df(TRIPS), duckdb.from_df(DRIVERS)),
        "table": stored(make, {"trips": TRIPS, "drivers": DRIVERS}),
        "csv": make({"path": str(root / "trips.csv")}, DRIVERS),
    }


@contextmanager
def statistics_from(rows: int) -> Iterator[None]:
    """Connectors defined here ask the statistics of stored tables from ``rows`` rows (by
    default only large tables do, and the tests' tables are small)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_duckdb, "STATISTICS_ROWS", rows)
        yield


def stored(make: Any, frames: dict[str, pd.DataFrame]) -> Connector:
    """``make`` over each frame as a table DuckDB stores (``CREATE TABLE ... AS``, on a
    connection of its own), read through ``con.table``: its statistics, not a frame's scan,
    say whether a float column holds NaN."""
    con = duckdb.connect()
    for name, frame in frames.items():
        con.register("incoming", frame)
        con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM incoming')
        con.unregister("incoming")
    with statistics_from(0):
        return make(*({"frame": con.table(n), "connection": con} for n in frames))


#: Which pandas twin each DuckDB table answers as (see ``as_stored``).
TWIN = {
    "parquet": "pandas as text",
    "parquet+frame": "pandas as text",
    "relation": "pandas as enum",
    "table": "pandas as enum",
    "csv": "pandas as text",
}


def as_stored(frame: pd.DataFrame, store: str) -> pd.DataFrame:
    """``frame`` as a store keeps it: ``"enum"`` (``duckdb.from_df``: every category an
    ordered one, as DuckDB orders an ENUM) or ``"text"`` (a file: categories as text)."""
    out = frame.copy()
    for c in out.columns:
        if isinstance(out[c].dtype, pd.CategoricalDtype):
            col = out[c]
            out[c] = col.cat.as_ordered() if store == "enum" else col.astype(object)
            out[c] = out[c].where(col.notna(), None) if store == "text" else out[c]
    return out


def normal(df: pd.DataFrame) -> pd.DataFrame:
    """A frame's values as a user compares them: numbers as floats, timestamps in one unit,
    the rest as objects with None for missing (DuckDB's ``str`` and int dtypes are pandas'
    ``object`` and ``Int64`` here)."""
    out = {}
    for c in df.columns:
        col = df[c]
        if pd.api.types.is_bool_dtype(col.dtype) or pd.api.types.is_numeric_dtype(col.dtype):
            out[c] = col.astype("Float64").astype("float64")
        elif pd.api.types.is_timedelta64_dtype(col.dtype):
            out[c] = col.dt.as_unit("us")
        elif pd.api.types.is_datetime64_any_dtype(col.dtype):
            tz = getattr(col.dtype, "tz", None)
            wall = col.dt.tz_convert("UTC") if tz is not None else col
            out[c] = wall.dt.as_unit("ns")
        else:
            out[c] = col.astype(object).where(col.notna(), None)
    return pd.DataFrame(out, index=df.index)


def run(conn: Connector, tool: str, args: dict[str, Any]) -> Any:
    return asyncio.run(conn.tools[tool].call(args, RunContext("a", "t")))


def answer(conn: Connector, tool: str, args: dict[str, Any]) -> pd.DataFrame | str:
    try:
        return run(conn, tool, args).data
    except ToolInputError as exc:
        return f"refused: {exc}"


def code_frame(conn: Connector, tool: str, args: dict[str, Any], root: Any = None) -> Any:
    hook = conn.tools[tool].code
    assert hook is not None
    ctx = CodeContext("result_1")
    source = hook(args, ctx)
    assert source is not None
    namespace: dict[str, Any] = {"trips": TRIPS.copy(), "drivers": DRIVERS.copy()}
    for name in ctx.expected:  # relations: the notebook's variables, DuckDB finds by name
        if name not in namespace:
            raise AssertionError(f"unexpected variable {name}")
    exec("\n\n".join([*ctx.setups, source]), namespace)
    return namespace["result_1"], source


def check_same(backends: dict[str, Connector], tool: str, args: dict[str, Any]) -> bool:
    """Each DuckDB table answers as its pandas twin; the twins answer as the user's frame
    wherever the call names no categorical column (and the CSV as the others where the call
    names no duration). True when the user's frame answered (not a refusal)."""
    original = answer(backends["pandas"], tool, args)
    named = repr(args)
    for name, conn in backends.items():
        if name.startswith("pandas"):
            continue
        if name == "csv" and "'wait'" in named:
            continue
        expected = answer(backends[TWIN[name]], tool, args)
        got = answer(conn, tool, args)
        if name == "csv" and not isinstance(got, str) and not isinstance(expected, str):
            # The CSV holds durations as text, which DuckDB reads as TIME: not compared.
            got, expected = (f.drop(columns="wait", errors="ignore") for f in (got, expected))
        if isinstance(expected, str) or isinstance(got, str):
            assert isinstance(expected, str) == isinstance(got, str), (name, args, expected, got)
            continue
        try:
            assert_frame_equal(normal(got), normal(expected), check_exact=False, rtol=1e-9)
            assert counts_of(got) == counts_of(expected)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {args}\n{got}\n{expected}") from exc
        if name in ("parquet", "parquet+frame"):
            by_code, source = code_frame(conn, tool, args)
            try:
                assert_frame_equal(by_code, got)
            except AssertionError as exc:
                raise AssertionError(f"{name} code: {args}\n{source}") from exc
    if not any(f"'{c}'" in named for c in ("kind", "size")):
        for twin in ("pandas as enum", "pandas as text"):
            same = answer(backends[twin], tool, args)
            if isinstance(original, str) or isinstance(same, str):
                assert isinstance(original, str) == isinstance(same, str), (twin, args)
            else:
                assert_frame_equal(normal(same), normal(original), check_exact=False, rtol=1e-9)
    return not isinstance(original, str)


values = st.one_of(
    st.sampled_from(
        [
            "Paris",
            "paris",
            "Lyon",
            "ß",
            "a%b",
            "2024-03-04",
            "2024-03-10T12:00:00+01:00",
            "2024-04-01T00:00:00",
            "true",
            "4",
            "12.5",
            "gold",
            "bronze",
            "M",
            "1 hour",
            "00:30:00",
        ]
    ),
    st.integers(-2, 60),
    st.floats(-1, 80, allow_nan=False),
    st.booleans(),
)
patterns = st.sampled_from(["P%", "%is", "%ar%", "Paris", "P_ris", "%", "a\\%b", "%\\", "ß", "%_1"])


@st.composite
def filters(draw: Any, columns: list[str] = COLUMNS) -> dict[str, Any]:
    op = draw(st.sampled_from(OPERATORS))
    f: dict[str, Any] = {"column": draw(st.sampled_from(columns)), "op": op}
    if op in ("like", "ilike"):
        f["value"] = draw(patterns)
    elif op == "in":
        f["value"] = draw(st.lists(values, min_size=1, max_size=3))
    elif op != "is_null":
        f["value"] = draw(values)
    if draw(st.booleans()):
        f["not"] = True
    return f


select_args = st.fixed_dictionaries(
    {"table": st.just("trips")},
    optional={
        "columns": st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=4, unique=True),
        "filters": st.lists(filters(), max_size=3),
        "order": st.lists(
            st.fixed_dictionaries(
                {"column": st.sampled_from(COLUMNS)}, optional={"desc": st.booleans()}
            ),
            max_size=3,
        ),
        "limit": st.integers(0, 30),
        "offset": st.integers(0, 70),
        "count": st.booleans(),
    },
)
group_keys = st.one_of(
    st.sampled_from(["city", "paid", "riders", "driver_id", "kind", "size"]),
    st.fixed_dictionaries(
        {"column": st.sampled_from(["created_at", "day"]), "bucket": st.sampled_from(BUCKETS)}
    ),
    st.fixed_dictionaries(
        {
            "column": st.sampled_from(["fare", "riders", "id"]),
            "bins": st.one_of(st.integers(1, 8), st.just([0, 10.5, 20, 80])),
        }
    ),
)
aggregate_args = st.fixed_dictionaries(
    {"table": st.just("trips")},
    optional={
        "group_by": st.lists(group_keys, max_size=2),
        "aggregates": st.lists(
            st.fixed_dictionaries(
                {"fn": st.sampled_from(AGGREGATE_FUNCTIONS)},
                optional={
                    "column": st.sampled_from(
                        ["fare", "riders", "paid", "id", "city", "kind", "size", "wait"]
                    ),
                    "p": st.sampled_from([0, 0.5, 0.9, 1]),
                },
            ),
            max_size=3,
        ),
        "filters": st.lists(filters(), max_size=2),
        "limit": st.integers(0, 12),
        "offset": st.integers(0, 4),
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(select_args)
def test_a_select_is_the_same_on_every_backend(backends: Any, args: dict[str, Any]) -> None:
    check_same(backends, "frames_select", args)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(aggregate_args)
def test_an_aggregate_is_the_same_on_every_backend(backends: Any, args: dict[str, Any]) -> None:
    check_same(backends, "frames_aggregate", args)


joined = ["drivers.tier", "drivers.rating", "drivers.id"]
join_args = st.fixed_dictionaries(
    {"table": st.just("trips"), "join": st.just(["drivers"])},
    optional={
        "group_by": st.lists(st.sampled_from(["drivers.tier", "city", "paid"]), max_size=2),
        "aggregates": st.lists(
            st.fixed_dictionaries(
                {"fn": st.sampled_from(["count", "sum", "mean", "percentile", "max"])},
                optional={"column": st.sampled_from(["fare", "drivers.rating"]), "p": st.just(0.9)},
            ),
            max_size=2,
        ),
        "filters": st.lists(filters([*COLUMNS, *joined]), max_size=2),
    },
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(join_args, st.booleans())
def test_a_join_is_the_same_on_every_backend(
    backends: Any, args: dict[str, Any], select: bool
) -> None:
    if select:
        args = {
            "table": "trips",
            "join": ["drivers"],
            "columns": ["id", "fare", "drivers.tier", "drivers.rating"],
            "filters": args.get("filters", []),
            "order": [{"column": "drivers.rating", "desc": True}],
        }
    check_same(backends, "frames_select" if select else "frames_aggregate", args)


@pytest.mark.parametrize("bucket", BUCKETS)
@pytest.mark.parametrize("fn", AGGREGATE_FUNCTIONS)
def test_every_bucket_and_aggregate_is_the_same_on_every_backend(
    backends: Any, bucket: str, fn: str
) -> None:
    args = {
        "table": "trips",
        "group_by": [{"column": "created_at", "bucket": bucket}],
        "aggregates": [
            {"fn": fn, "column": "fare", **({"p": 0.75} if fn == "percentile" else {})},
            {"fn": "count"},
        ],
        "filters": [{"column": "paid", "op": "eq", "value": True}],
        "order": [{"column": "count", "desc": True}],
    }
    assert check_same(backends, "frames_aggregate", args)


@pytest.mark.parametrize("op", OPERATORS)
@pytest.mark.parametrize("negate", [False, True])
def test_every_operator_is_the_same_on_every_backend(backends: Any, op: str, negate: bool) -> None:
    value: Any = {"like": "P%", "ilike": "p%", "in": ["Lyon", "ß"], "is_null": None}.get(
        op, "Paris"
    )
    f: dict[str, Any] = {"column": "city", "op": op, "not": negate}
    if value is not None:
        f["value"] = value
    numbers = {"column": "fare", "op": op if op not in ("like", "ilike") else "gt", "not": negate}
    if op != "is_null":
        numbers["value"] = [10, 20.5] if op == "in" else 20.5
    for filt in (f, numbers):
        args = {"table": "trips", "filters": [filt], "order": [{"column": "fare"}]}
        assert check_same(backends, "frames_select", args)


def test_the_frames_are_pandas_with_every_matching_row_counted(backends: Any) -> None:
    args = {"table": "trips", "filters": [{"column": "fare", "op": "gt", "value": 5}], "limit": 3}
    out = run(backends["parquet"], "frames_select", args)
    assert isinstance(out.data, pd.DataFrame) and len(out.data) == 3
    matched = int((TRIPS["fare"] > 5).sum())
    assert counts_of(out.data)["matched"] == matched
    assert f"{matched} rows match" in out.content or "More match" in out.content
    assert list(out.data.index) == list(TRIPS.index[TRIPS["fare"] > 5][:3])


def test_list_tables_counts_the_rows_and_names_duckdbs_types(backends: Any) -> None:
    out = run(backends["parquet"], "frames_list_tables", {})
    trips = next(e for e in out.data if e["table"] == "trips")
    assert trips["rows"] == len(TRIPS) and trips["writable"] is False
    types = {c["name"]: c["dtype"] for c in trips["columns"]}
    assert types["created_at"] == "TIMESTAMP WITH TIME ZONE" and types["fare"] == "DOUBLE"


@pytest.mark.parametrize("fn", AGGREGATE_FUNCTIONS)
@pytest.mark.parametrize("by", ["kind", "size"])
def test_every_aggregate_of_a_duration_by_each_category_is_the_same(
    backends: Any, fn: str, by: str
) -> None:
    """DuckDB has no sum or standard deviation of an INTERVAL and rounds its mean; the tool
    gives pandas' figures (var and percentile of a duration refused on both)."""
    args = {
        "table": "trips",
        "group_by": [by],
        "aggregates": [{"fn": fn, "column": "wait", **({"p": 0.5} if fn == "percentile" else {})}],
    }
    answered = check_same(backends, "frames_aggregate", args)
    assert answered == (fn not in ("var", "percentile"))


def test_a_bucket_of_a_number_is_refused_naming_the_tables_datetime_columns(
    backends: Any,
) -> None:
    """The refusal names the columns a bucket can use, on every backend alike, though the
    call names none of them."""
    args = {"table": "trips", "group_by": [{"column": "fare", "bucket": "week"}]}
    said = {name: answer(conn, "frames_aggregate", args) for name, conn in backends.items()}
    assert said["pandas"] == (
        "refused: a week bucket needs a datetime column; trips.fare is float64. Group by the "
        'column itself ("group_by": ["fare"]) or bucket one of its datetime columns '
        "(created_at, day)"
    )
    assert {name: said["pandas"] for name in backends} == said


@pytest.mark.parametrize("fn", AGGREGATE_FUNCTIONS)
@pytest.mark.parametrize("by", [[], ["kind"]])
def test_every_aggregate_of_booleans_is_the_same_and_answered(
    backends: Any, fn: str, by: list[str]
) -> None:
    """Booleans count as 0 and 1 for every aggregate, a percentile too (pandas' quantile
    refuses them: the tool gives the percentile of their numbers, as DuckDB does)."""
    args = {
        "table": "trips",
        "group_by": by,
        "aggregates": [{"fn": fn, "column": "paid", **({"p": 0.9} if fn == "percentile" else {})}],
    }
    assert check_same(backends, "frames_aggregate", args)
    if fn == "percentile":
        got = answer(backends["pandas"], "frames_aggregate", args)
        assert isinstance(got, pd.DataFrame)
        paid = TRIPS["paid"].astype("float64")
        expected = paid.groupby(TRIPS["kind"], observed=True).quantile(0.9) if by else paid
        first = expected.iloc[0] if by else expected.quantile(0.9)
        assert got["p90_paid"].iloc[0] == pytest.approx(first)
        by_code, _ = code_frame(backends["pandas"], "frames_aggregate", args)
        assert_frame_equal(by_code, got)


@pytest.mark.parametrize("op", ["gt", "gte", "lt", "lte"])
@pytest.mark.parametrize("negate", [False, True])
def test_an_ordered_category_compares_by_its_categories_order(
    backends: Any, op: str, negate: bool
) -> None:
    """``size > 'S'`` is M and L (the categories' order, not the text's) on the frame and on
    the relation's ENUM alike; a value that is no category is refused on both."""
    args = {
        "table": "trips",
        "columns": ["id", "size"],
        "filters": [{"column": "size", "op": op, "value": "M", "not": negate}],
        "order": [{"column": "size"}, {"column": "id"}],
    }
    assert check_same(backends, "frames_select", args)
    frame = run(backends["relation"], "frames_select", args).data
    wanted = {"gt": {"L"}, "gte": {"M", "L"}, "lt": {"S"}, "lte": {"S", "M"}}[op]
    if negate:
        wanted = {"S", "M", "L"} - wanted
    assert set(frame["size"].astype(object)) == wanted
    args["filters"][0]["value"] = "XL"
    assert not check_same(backends, "frames_select", args)
    said = {answer(backends[name], "frames_select", args) for name in ("pandas", "relation")}
    assert said == {  # the same words on both: why, not pandas' own message
        f"refused: cannot apply {op} to trips.size (category) with 'XL': it is not one of the "
        "column's categories, so it has no place in their order"
    }


@pytest.mark.parametrize("column", ["kind", "size"])
def test_categories_group_sort_and_reduce_the_same(backends: Any, column: str) -> None:
    """A category groups and sorts in its categories' order (text in a file), and has a
    min and max where it is ordered: always on an ENUM, never on an unordered frame column."""
    grouped = {
        "table": "trips",
        "group_by": [column],
        "aggregates": [{"fn": "count"}, {"fn": "count_distinct", "column": column}],
    }
    assert check_same(backends, "frames_aggregate", grouped)
    sorted_ = {"table": "trips", "columns": ["id", column], "order": [{"column": column}]}
    assert check_same(backends, "frames_select", sorted_)
    reduced = {"table": "trips", "aggregates": [{"fn": "min", "column": column}]}
    reduced["aggregates"].append({"fn": "max", "column": column})
    assert check_same(backends, "frames_aggregate", reduced) == (column == "size")
    top = run(backends["relation"], "frames_aggregate", reduced).data
    assert top.iloc[0].astype(object).tolist() == (
        ["silver", "bronze"] if column == "kind" else ["S", "L"]
    )


@pytest.fixture(scope="module")
def nan_file(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Connector]:
    """A Parquet file holding NaN apart from NULL (as a file written by Spark or pyarrow
    may; ``duckdb.from_df`` would store pandas' NaN as NULL), and the frame pandas reads of
    it, where both are missing; the same values as a table DuckDB stores, as a relation over
    the file, and as an expression over a table that holds no NaN (its statistics have no
    range for ``a / b``)."""
    path = tmp_path_factory.mktemp("nan") / "x.parquet"
    rows = (
        "SELECT i AS id, CASE WHEN i % 5 = 0 THEN 'NaN'::DOUBLE WHEN i % 7 = 0 THEN NULL "
        "ELSE (i % 9) * 1.5 END AS x FROM range(40) t(i)"
    )
    duckdb.execute(f"COPY ({rows}) TO '{path}' (FORMAT parquet)")
    frame = duckdb.read_parquet(str(path)).df()
    assert duckdb.execute(f"SELECT count(*) FROM '{path}' WHERE isnan(x)").fetchall() == [(8,)]
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS {rows}")  # a table DuckDB stores, its NaN kept
    # The same values with no NaN stored: 0/0 makes them, in a relation over a table.
    con.execute(
        "CREATE TABLE parts AS SELECT i AS id, CASE WHEN i % 5 = 0 THEN 0.0 ELSE (i % 9) * 1.5 "
        "END::DOUBLE AS a, CASE WHEN i % 5 = 0 THEN 0.0 WHEN i % 7 = 0 THEN NULL ELSE 1.0 "
        "END::DOUBLE AS b FROM range(40) t(i)"
    )
    divided = con.sql("SELECT id, a / b AS x FROM parts")
    assert con.execute("SELECT count(*) FROM divided WHERE isnan(x)").fetchall() == [(8,)]

    def on_con(rel: Any) -> Connector:
        with statistics_from(0):
            return frame_tools({"t": {"frame": rel, "connection": con}})

    return {
        "pandas": frame_tools({"t": frame}),
        "parquet": frame_tools({"t": {"path": str(path)}}),
        "table": on_con(con.table("t")),
        "parquet relation": on_con(con.read_parquet(str(path))),
        "expression": on_con(divided),
    }


@pytest.mark.parametrize("store", ["parquet", "table", "parquet relation", "expression"])
@pytest.mark.parametrize("op", [o for o in OPERATORS if o not in ("like", "ilike")])
@pytest.mark.parametrize("negate", [False, True])
def test_nan_in_a_file_or_table_is_missing_for_every_filter_and_aggregate(
    nan_file: dict[str, Connector], store: str, op: str, negate: bool
) -> None:
    f: dict[str, Any] = {"column": "x", "op": op, "not": negate}
    if op != "is_null":
        f["value"] = [3, 4.5] if op == "in" else 4.5
    calls = [
        ("frames_select", {"table": "t", "filters": [f], "order": [{"column": "x", "desc": True}]}),
        (
            "frames_aggregate",
            {
                "table": "t",
                "group_by": [{"column": "x", "bins": 3}],
                "aggregates": [{"fn": "count"}, *({"fn": g, "column": "x"} for g in SUMS)],
                "filters": [f],
            },
        ),
    ]
    for tool, args in calls:
        expected, got = (answer(nan_file[k], tool, args) for k in ("pandas", store))
        assert not isinstance(expected, str) and not isinstance(got, str), (expected, got)
        assert_frame_equal(normal(got), normal(expected), check_exact=False, rtol=1e-9)


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of each statement the read tools run, as they run it."""
    from loom_nb.frames import _duck_reads

    texts: list[str] = []
    real = _duck_reads.fetch

    def spy(table: Any, statement: Any, frames: Any) -> pd.DataFrame:
        texts.append(statement.sql)
        return real(table, statement, frames)

    monkeypatch.setattr(_duck_reads, "fetch", spy)
    return texts


def test_a_table_reads_its_floats_as_stored_while_its_statistics_show_no_nan(
    monkeypatch: pytest.MonkeyPatch, ran: list[str]
) -> None:
    """The NaN rules (``nullif``, ``isnan``) cost 5-10 % of a statement over every row: a table
    DuckDB stores (here of any size) goes without them while its statistics show no NaN,
    asked at each call (a spy on the statements shows which ran). A NaN written between calls
    is missing at the next one, as in pandas; the export keeps the rules whatever the table
    holds now."""
    monkeypatch.setattr(_duckdb, "STATISTICS_ROWS", 0)
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT i AS id, ((i % 4) * 1.5)::DOUBLE AS x FROM range(12) t(i)"
    )
    conn = frame_tools({"t": {"frame": con.table("t"), "connection": con}})
    args = {
        "table": "t",
        "aggregates": [
            {"fn": "count"},
            {"fn": "sum", "column": "x"},
            {"fn": "mean", "column": "x"},
        ],
        "filters": [{"column": "x", "op": "lt", "value": 4}],
    }
    first = run(conn, "frames_aggregate", args).data
    assert "nullif" not in ran[-1] and "isnan" not in ran[-1]
    assert first.iloc[0].tolist() == [9, 13.5, 1.5]
    code = conn.tools["frames_aggregate"].code
    assert code is not None and "isnan" in code(args, CodeContext("r"))

    con.execute("UPDATE t SET x = 'NaN' WHERE id < 2")  # rows 0 and 1: x was 0.0 and 1.5
    again = run(conn, "frames_aggregate", args).data
    assert "isnan" in ran[-1]  # (no nullif: the filter keeps no NaN row, see below)
    frame = con.table("t").df()
    expected = frame[frame["x"] < 4]["x"]
    assert again.iloc[0].tolist() == pytest.approx([7, 12.0, 12 / 7])
    assert again.iloc[0].tolist() == pytest.approx(
        [expected.count(), expected.sum(), expected.mean()]
    )


def test_a_filter_that_rules_out_nan_lets_its_column_be_read_as_stored(
    nan_file: dict[str, Connector],
) -> None:
    """Every filter but is_null drops a NaN row as it compares (``NOT isnan``), so the rows
    left hold no NaN in its column and its ``nullif`` (6 % of a filtered aggregate over 10M
    Parquet rows) is left out; a negated is_null reads the column's NaN as NULL, so it keeps
    it. The answers are pandas' either way (the tests above); here, the statement."""
    hook = nan_file["parquet"].tools["frames_aggregate"].code
    assert hook is not None

    def statement(f: dict[str, Any]) -> str:
        args = {"table": "t", "aggregates": [{"fn": "sum", "column": "x"}], "filters": [f]}
        return hook(args, CodeContext("r"))

    compared = statement({"column": "x", "op": "gt", "value": 1})
    assert "nullif" not in compared and "isnan" in compared
    negated = statement({"column": "x", "op": "gt", "value": 1, "not": True})
    assert "nullif" not in negated and "isnan" in negated
    assert "nullif" in statement({"column": "x", "op": "is_null", "not": True})
    assert "nullif" in statement({"column": "id", "op": "gt", "value": 1})  # another column


def test_only_a_large_table_asks_its_statistics(ran: list[str]) -> None:
    """Asking costs about 1 ms a call, more than the NaN rules over a table of a few million
    rows: a table smaller than ``STATISTICS_ROWS`` (by DuckDB's plan when the connector is
    defined) keeps the rules, a larger one reads its floats as stored."""
    con = duckdb.connect()
    for name, rows in (("small", 1000), ("large", _duckdb.STATISTICS_ROWS)):
        con.execute(f"CREATE TABLE {name} AS SELECT (i % 7)::DOUBLE AS x FROM range({rows}) t(i)")
    conn = frame_tools({n: {"frame": con.table(n), "connection": con} for n in ("small", "large")})
    for name, rules in (("small", True), ("large", False)):
        args = {"table": name, "aggregates": [{"fn": "sum", "column": "x"}]}
        out = run(conn, "frames_aggregate", args).data
        assert ("nullif" in ran[-1]) == rules, name
        assert out.iloc[0, 0] == pytest.approx(
            con.execute(f"SELECT sum(x) FROM {name}").fetchone()[0]
        )


SUMS = ("count", "sum", "mean", "max", "median")


def missing_floats_frame() -> pd.DataFrame:
    """Missing values every way pandas holds them in a float column: NaN and None in a
    float64 column, ``pd.NA`` and None in a nullable Float64 one."""
    return pd.DataFrame(
        {
            "id": np.arange(12, dtype="int64"),
            "x": [1.5, np.nan, 3.0, None, 4.5, 6.0, np.nan, 7.5, 0.0, -1.0, 4.5, 9.0],
            "y": pd.array(
                [2.0, pd.NA, 4.5, 1.0, pd.NA, 4.5, 8.0, None, 3.0, 0.5, 6.0, pd.NA],
                dtype="Float64",
            ),
            "g": ["a", "b", "a", "b", "a", "b", "a", "b", "a", "b", "a", None],
        }
    )


@pytest.fixture(scope="module")
def missing_floats(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Connector]:
    """The frame on pandas, as DuckDB relations that scan it (``from_df``, a registered
    frame), as a Parquet file, and joined by a Parquet table (registered for each call)."""
    frame = missing_floats_frame()
    path = tmp_path_factory.mktemp("floats") / "ids.parquet"
    duckdb.from_df(frame[["id"]]).write_parquet(str(path))
    con = duckdb.connect()
    con.register("floats", frame)
    joined = {"relationships": {"ids.id": "t.id"}}
    return {
        "pandas": frame_tools({"t": frame}),
        "from_df": frame_tools({"t": duckdb.from_df(frame)}),
        "registered": frame_tools({"t": {"frame": con.table("floats"), "connection": con}}),
        "pandas joined": frame_tools({"ids": frame[["id"]], "t": frame}, **joined),
        "parquet joined": frame_tools({"ids": {"path": str(path)}, "t": frame}, **joined),
    }


@pytest.mark.parametrize("op", [o for o in OPERATORS if o not in ("like", "ilike")])
@pytest.mark.parametrize("negate", [False, True])
@pytest.mark.parametrize("column", ["x", "y"])
def test_nan_none_and_na_in_a_frame_are_missing_on_every_backend(
    missing_floats: dict[str, Connector], op: str, negate: bool, column: str
) -> None:
    """DuckDB's scan of a DataFrame reads NaN, None and ``pd.NA`` as NULL: every filter, bins
    group and aggregate answers as pandas does, on the frame itself and joined to a file."""
    f: dict[str, Any] = {"column": column, "op": op, "not": negate}
    if op != "is_null":
        f["value"] = [3, 4.5] if op == "in" else 4.5
    order = [{"column": column, "desc": True}, {"column": "id"}]
    calls = [
        ("frames_select", {"table": "t", "filters": [f], "order": order}),
        (
            "frames_aggregate",
            {
                "table": "t",
                "group_by": [{"column": column, "bins": 3}, "g"],
                "aggregates": [{"fn": "count"}, *({"fn": g, "column": column} for g in SUMS)],
                "filters": [f],
            },
        ),
    ]
    for tool, args in calls:
        expected = answer(missing_floats["pandas"], tool, args)
        assert not isinstance(expected, str), expected
        for name in ("from_df", "registered"):
            got = answer(missing_floats[name], tool, args)
            assert not isinstance(got, str), (name, got)
            assert_frame_equal(normal(got), normal(expected), check_exact=False, rtol=1e-9)
        joined_f = {**f, "column": f"t.{column}"}
        args = {"table": "ids", "join": ["t"], "filters": [joined_f]}
        if tool == "frames_select":
            args |= {"columns": ["id", f"t.{column}"], "order": [{"column": "id"}]}
        else:
            args |= {"group_by": ["t.g"], "aggregates": [{"fn": "sum", "column": f"t.{column}"}]}
        expected, got = (
            answer(missing_floats[k], tool, args) for k in ("pandas joined", "parquet joined")
        )
        assert not isinstance(expected, str) and not isinstance(got, str), (expected, got)
        assert_frame_equal(normal(got), normal(expected), check_exact=False, rtol=1e-9)


def test_a_relation_that_scans_a_frame_reads_its_floats_as_stored(
    missing_floats: dict[str, Connector],
) -> None:
    """Its exported statement is the plain one: no NaN rules, which DuckDB's scan of a
    DataFrame makes needless; a Parquet file's keeps them (it may hold NaN apart from NULL)."""
    args = {
        "table": "t",
        "aggregates": [{"fn": "sum", "column": "x"}],
        "filters": [{"column": "x", "op": "gt", "value": 1}],
    }
    hook = missing_floats["from_df"].tools["frames_aggregate"].code
    assert hook is not None
    source = hook(args, CodeContext("result_1"))
    assert "nullif" not in source and "isnan" not in source
    assert '"x" > $p1' in source
    hook = missing_floats["parquet joined"].tools["frames_aggregate"].code
    assert hook is not None
    joined = {"table": "ids", "join": ["t"], "filters": [{"column": "t.x", "op": "gt", "value": 1}]}
    assert "isnan" not in hook(joined | {"aggregates": [{"fn": "count"}]}, CodeContext("r"))
