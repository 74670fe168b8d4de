"""Joins along declared relationships and distributions over every matching row: for random
tables, filters and aggregates, frames_select and frames_aggregate give what hand-written
pandas gives (``merge`` + ``groupby``, ``quantile``, ``std``, ``var``, ``np.histogram``), and
the exported code gives the same frames."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

from loom_nb import RunContext, ToolInputError, UserError
from loom_nb._messages import ToolCall
from loom_nb.frames import frame_tools
from loom_nb.notebook._calls import CallText
from tests.frames._orders import code_result

RELATIONSHIPS = {"orders.customer_id": "customers.id"}


def call(conn: Any, name: str, args: dict[str, Any]) -> Any:
    return asyncio.run(conn.tools[name].call(args, RunContext("a", "t")))


@st.composite
def shop(draw: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    n_customers = draw(st.integers(1, 6))
    tiers = st.sampled_from(["gold", "silver", None])
    customers = pd.DataFrame(
        {
            "id": np.arange(1, n_customers + 1) * 10,
            "tier": draw(st.lists(tiers, min_size=n_customers, max_size=n_customers)),
            "credit": draw(
                st.lists(st.integers(0, 500), min_size=n_customers, max_size=n_customers)
            ),
        }
    )
    n = draw(st.integers(1, 40))
    keys = st.one_of(st.sampled_from([10, 20, 30, 40, 50, 60, 70]), st.none())
    orders = pd.DataFrame(
        {
            "id": np.arange(n),
            "customer_id": pd.array(draw(st.lists(keys, min_size=n, max_size=n)), dtype="Int64"),
            "total": draw(
                st.lists(
                    st.floats(0, 1000, allow_nan=False).map(lambda v: round(v, 2)),
                    min_size=n,
                    max_size=n,
                )
            ),
        }
    )
    return orders, customers


def by_hand_join(orders: pd.DataFrame, customers: pd.DataFrame, inner: bool) -> pd.DataFrame:
    """The join as a pandas user writes it: a left merge on the declared keys (missing keys
    match nothing, as in SQL), inner when a filter names the customers' columns."""
    right = customers.rename(columns=lambda c: f"customers.{c}")
    merged = orders.merge(
        right[right["customers.id"].notna()],
        how="inner" if inner else "left",
        left_on="customer_id",
        right_on="customers.id",
    )
    return merged


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shop(),
    st.sampled_from(["customers.tier", "customers.credit", None]),
    st.sampled_from([None, "gold", "silver"]),
    st.sampled_from([0, 0.25, 0.5, 0.9, 1]),
)
def test_a_join_then_groupby_equals_merge_and_groupby_by_hand(
    data: tuple[pd.DataFrame, pd.DataFrame], group: str | None, tier: str | None, p: float
) -> None:
    orders, customers = data
    conn = frame_tools({"orders": orders, "customers": customers}, relationships=RELATIONSHIPS)
    filters = [] if tier is None else [{"column": "customers.tier", "op": "eq", "value": tier}]
    args: dict[str, Any] = {
        "table": "orders",
        "join": ["customers"],
        "group_by": [group] if group else [],
        "aggregates": [
            {"fn": "count"},
            {"fn": "sum", "column": "total"},
            {"fn": "percentile", "column": "total", "p": p},
            {"fn": "std", "column": "total"},
            {"fn": "var", "column": "customers.credit"},
        ],
        "filters": filters,
    }
    out = call(conn, "frames_aggregate", args)
    merged = by_hand_join(orders, customers, inner=tier is not None)
    if tier is not None:
        merged = merged[merged["customers.tier"] == tier]
    if group:
        g = merged.groupby(group, dropna=False, sort=True)
        expected = pd.DataFrame(
            {
                "count": g.size(),
                "sum_total": g["total"].sum(min_count=1),
                f"p{round(p * 100):d}_total": g["total"].quantile(p),
                "std_total": g["total"].std(),
                "var_customers.credit": g["customers.credit"].var(),
            }
        ).reset_index()
    else:
        expected = pd.DataFrame(
            {
                "count": [len(merged)],
                "sum_total": [merged["total"].sum(min_count=1)],
                f"p{round(p * 100):d}_total": [merged["total"].quantile(p)],
                "std_total": [merged["total"].std()],
                "var_customers.credit": [merged["customers.credit"].var()],
            }
        )
    assert_frame_equal(out.data, expected, check_dtype=False)
    # the export's code gives the very frame
    given = code_result(conn, "frames_aggregate", args, orders=orders, customers=customers)
    assert_frame_equal(given, out.data)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shop(), st.booleans())
def test_a_joined_select_keeps_every_order_and_says_how_many_had_no_match(
    data: tuple[pd.DataFrame, pd.DataFrame], filtered: bool
) -> None:
    orders, customers = data
    conn = frame_tools({"orders": orders, "customers": customers}, relationships=RELATIONSHIPS)
    args: dict[str, Any] = {
        "table": "orders",
        "join": ["customers"],
        "columns": ["id", "total", "customers.tier"],
    }
    if filtered:
        args["filters"] = [{"column": "customers.credit", "op": "gte", "value": 100}]
    out = call(conn, "frames_select", args)
    merged = by_hand_join(orders, customers, inner=filtered)
    if filtered:
        merged = merged[merged["customers.credit"] >= 100]
    assert out.data["id"].tolist() == merged["id"].tolist()
    assert out.data["customers.tier"].tolist() == merged["customers.tier"].tolist()
    assert out.data.index.tolist() == out.data["id"].tolist()  # orders' own index labels
    unmatched = int((~orders["customer_id"].isin(customers["id"])).sum())
    if unmatched:
        assert f"{unmatched:,} orders row(s) had no customers row" in out.content
    else:
        assert "Every orders row matched a customers row." in out.content
    given = code_result(conn, "frames_select", args, orders=orders, customers=customers)
    assert_frame_equal(given, out.data)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.just(float("nan"))), min_size=1),
    st.one_of(st.integers(1, 30), st.just([0.0, 10.0, 100.0, 1000.0])),
)
def test_bins_count_every_row_as_numpy_histogram_does(values: list[float], bins: Any) -> None:
    frame = pd.DataFrame({"total": values})
    conn = frame_tools({"orders": frame})
    args = {"table": "orders", "group_by": [{"column": "total", "bins": bins}]}
    out = call(conn, "frames_aggregate", args)
    present = frame["total"].dropna().to_numpy()
    counts, edges = np.histogram(present, bins=bins)
    inside = out.data[out.data["bin_total"].notna()]
    got = dict(zip(inside["bin_total"], inside["count"], strict=True))
    expected = {float(e): int(c) for e, c in zip(edges[:-1], counts, strict=True) if c}
    assert got == pytest.approx(expected)
    outside = int(frame["total"].isna().sum()) + (len(present) - int(counts.sum()))
    assert int(out.data["count"].sum()) == len(frame)  # every row is in a bin or the NaN group
    assert int(out.data.loc[out.data["bin_total"].isna(), "count"].sum()) == outside
    assert out.data.attrs["loom"]["edges"]["bin_total"] == pytest.approx(edges.tolist())
    assert_frame_equal(code_result(conn, "frames_aggregate", args, orders=frame), out.data)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shop(),
    st.sampled_from(["gt", "lte", "neq"]),
    st.floats(0, 1000, allow_nan=False).map(lambda v: round(v, 2)),
    st.integers(1, 8),
    st.integers(1, 5),
    st.integers(1, 6),
)
def test_bins_by_a_joined_column_under_a_filter_are_cut_by_hand_with_both_bounds(
    data: tuple[pd.DataFrame, pd.DataFrame],
    op: str,
    value: float,
    bins: int,
    max_rows: int,
    extra: int,
) -> None:
    """A filter on the table's own column, the bins of ``total`` (``pd.cut`` on numpy's
    edges) by the joined tier, a percentile: the frame is the merge, the filter, the cut and
    the groupby over every matching row, up to ``frame_rows``; the model's page at most
    ``max_rows`` rows; the counts in the frame say how many groups matched."""
    orders, customers = data
    frame_rows = max_rows + extra
    conn = frame_tools(
        {"orders": orders, "customers": customers},
        relationships=RELATIONSHIPS,
        max_rows=max_rows,
        frame_rows=frame_rows,
    )
    args: dict[str, Any] = {
        "table": "orders",
        "join": ["customers"],
        "group_by": ["customers.tier", {"column": "total", "bins": bins}],
        "aggregates": [{"fn": "count"}, {"fn": "percentile", "column": "total", "p": 0.9}],
        "filters": [{"column": "total", "op": op, "value": value}],
    }
    out = call(conn, "frames_aggregate", args)
    merged = by_hand_join(orders, customers, inner=False)
    compare = {"gt": merged["total"] > value, "lte": merged["total"] <= value}
    merged = merged[compare.get(op, merged["total"] != value)]
    if merged.empty:
        assert out.data.empty
        return
    edges = np.histogram_bin_edges(merged["total"], bins=bins)
    last = np.nextafter(edges[-1], np.inf)
    cut = pd.cut(merged["total"], [*edges[:-1], last], right=False, labels=edges[:-1])
    g = merged.groupby(
        [merged["customers.tier"], cut.astype("float64").rename("bin_total")],
        dropna=False,
        observed=True,
        sort=True,
    )
    expected = pd.DataFrame({"count": g.size(), "p90_total": g["total"].quantile(0.9)})
    expected = expected.reset_index()
    assert_frame_equal(out.data, expected.head(frame_rows), check_dtype=False)
    found = out.data.attrs["loom"]
    assert found["rows"] == min(len(expected), frame_rows)
    assert found["matched"] == len(expected)
    page = min(found["rows"], max_rows)  # the model's page: the first max_rows rows
    assert f" rows={page} total_rows={len(expected)}" in out.content
    assert f"holds {found['rows']:,}" in out.content
    if len(expected) > frame_rows:
        assert f"(frame_rows={frame_rows} cut it)" in out.content


def test_percentiles_over_all_rows_not_the_page() -> None:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"total": rng.exponential(40, 20_000), "g": np.arange(20_000) % 4})
    conn = frame_tools({"orders": frame}, max_rows=2)
    args = {
        "table": "orders",
        "group_by": ["g"],
        "aggregates": [
            {"fn": "percentile", "column": "total", "p": 0.9},
            {"fn": "percentile", "column": "total", "p": 0.999},
            {"fn": "std", "column": "total"},
        ],
    }
    out = call(conn, "frames_aggregate", args)
    assert list(out.data.columns) == ["g", "p90_total", "p99_9_total", "std_total"]
    assert out.data["p90_total"].tolist() == frame.groupby("g")["total"].quantile(0.9).tolist()
    assert out.data["std_total"].tolist() == frame.groupby("g")["total"].std().tolist()
    words = CallText(conn.tools).words(ToolCall("c", "frames_aggregate", args))
    assert words == "frames_aggregate · orders · p90(total), p99.9(total), std(total) by g"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"join": ["orders"]}, r"'orders' is not one of \['customers'\]"),  # the schema's enum
        ({"join": ["secrets"]}, r"'secrets' is not one of \['customers'\]"),
        ({"columns": ["customers.tier"]}, "which this call does not join"),
        ({"join": ["customers"], "columns": ["customers.email"]}, "column 'email' is not"),
        ({"join": "customers"}, "join: 'customers' is not of type 'array'"),
    ],
)
def test_a_join_the_user_did_not_declare_is_refused(args: dict[str, Any], message: str) -> None:
    """Refused before anything is read: by the schema's enum, or the grammar behind it."""
    orders = pd.DataFrame({"id": [1], "customer_id": [1], "total": [1.0]})
    customers = pd.DataFrame({"id": [1], "tier": ["gold"], "email": ["a@b"]})
    conn = frame_tools(
        {"orders": orders, "customers": {"frame": customers, "columns": ["id", "tier"]}},
        relationships=RELATIONSHIPS,
    )
    with pytest.raises(ToolInputError, match=message):
        call(conn, "frames_select", {"table": "orders", **args})


@pytest.mark.parametrize(
    ("relationships", "message"),
    [
        ({"orders.customer_id": "clients.id"}, "table 'clients', which is not among the tables"),
        ({"orders.customer_id": "customers.email"}, "'email' is not among the allowed columns"),
        ({"orders.customer": "customers.id"}, "frame 'orders' has no usable column 'customer'"),
        ({"orders": "customers.id"}, "must be 'table.column'"),
        ({"orders.customer_id": "orders.id"}, "relates 'orders' to itself"),
        (["orders.customer_id"], "relationships must be a dict"),
    ],
)
def test_relationships_are_checked_when_the_connector_is_defined(
    relationships: Any, message: str
) -> None:
    orders = pd.DataFrame({"id": [1], "customer_id": [1]})
    customers = pd.DataFrame({"id": [1], "tier": ["gold"], "email": ["a@b"]})
    with pytest.raises(UserError, match=message):
        frame_tools(
            {"orders": orders, "customers": {"frame": customers, "columns": ["id", "tier"]}},
            relationships=relationships,
        )


@pytest.mark.parametrize(
    ("ids", "refused"),
    [
        (pd.Series(["1", "2"], dtype="str"), True),  # ids read as text, from a CSV or JSON
        (pd.Series(["1", "2"], dtype=object), True),
        (pd.Categorical(["1", "2"]), True),
        (pd.to_datetime(["2024-01-01", "2024-01-02"]), True),
        (pd.Series([1.0, 2.0]), False),  # numbers match numbers, whatever their width
        (pd.array([1, None], dtype="Int64"), False),
        (pd.Series([1, 2], dtype=object), False),
        (pd.Series([None, None], dtype=object), False),  # nothing tells: left to the join
    ],
)
def test_keys_that_never_match_are_refused_when_the_connector_is_defined(
    ids: Any, refused: bool
) -> None:
    orders = pd.DataFrame({"id": [1, 2], "customer_id": [1, 2]})
    customers = pd.DataFrame({"id": ids, "tier": ["gold", "silver"]})
    define = partial(
        frame_tools,
        {"orders": orders, "customers": customers},
        relationships={"orders.customer_id": "customers.id"},
    )
    if not refused:
        assert "frames_select" in define().tools
        return
    with pytest.raises(UserError, match=r"holds numbers \(int64\) and customers\.id ") as caught:
        define()
    assert "customers['id'] = customers['id'].astype('int64')" in str(caught.value)


def test_a_repeated_target_key_is_refused_not_multiplied() -> None:
    orders = pd.DataFrame({"id": [1], "customer_id": [1]})
    customers = pd.DataFrame({"id": [1, 1], "tier": ["gold", "silver"]})
    conn = frame_tools({"orders": orders, "customers": customers}, relationships=RELATIONSHIPS)
    with pytest.raises(ToolInputError, match=r"customers\.id repeats a value"):
        call(conn, "frames_select", {"table": "orders", "join": ["customers"]})


def test_the_join_shows_in_the_words_and_the_schema() -> None:
    orders = pd.DataFrame({"id": [1], "customer_id": [1], "total": [1.0]})
    customers = pd.DataFrame({"id": [1], "tier": ["gold"]})
    conn = frame_tools({"orders": orders, "customers": customers}, relationships=RELATIONSHIPS)
    args = {
        "table": "orders",
        "join": ["customers"],
        "group_by": ["customers.tier"],
        "aggregates": [{"fn": "sum", "column": "total"}],
    }
    words = CallText(conn.tools).words(ToolCall("c", "frames_aggregate", args))
    assert words == (
        "frames_aggregate · orders · join customers on orders.customer_id = customers.id · "
        "sum(total) by customers.tier"
    )
    schema = conn.tools["frames_select"].parameters["properties"]["join"]
    assert schema["items"]["enum"] == ["customers"]
    assert "orders may join customers (orders.customer_id = customers.id)" in schema["description"]


def test_the_grammar_refuses_an_undeclared_join_behind_the_schema() -> None:
    from loom_nb._tables.grammar import parse_select
    from loom_nb._tables.options import parse_relationships, parse_tables

    specs = parse_tables({"orders": {}, "customers": {}, "notes": {}})
    related = parse_relationships(RELATIONSHIPS, specs)
    with pytest.raises(ToolInputError, match="orders may join \\['customers'\\]"):
        parse_select({"table": "orders", "join": ["notes"]}, specs, 100, related)
    with pytest.raises(ToolInputError, match="no relationship is declared from 'customers'"):
        parse_select({"table": "customers", "join": ["orders"]}, specs, 100, related)


def test_two_percentiles_of_one_name_are_refused_not_merged() -> None:
    conn = frame_tools({"orders": pd.DataFrame({"total": [1.0, 2.0]})})
    twice = [
        {"fn": "percentile", "column": "total", "p": 0.9},
        {"fn": "percentile", "column": "total", "p": 0.9000000001},
    ]
    with pytest.raises(ToolInputError, match="would be named 'p90_total' twice"):
        call(conn, "frames_aggregate", {"table": "orders", "aggregates": twice})
    with pytest.raises(ToolInputError, match="percentile needs p, a number from 0 to 1"):
        call(
            conn,
            "frames_aggregate",
            {"table": "orders", "aggregates": [{"fn": "percentile", "column": "total"}]},
        )
