"""The shared query rules: what the model may ask for, checked before any backend sees it."""

from __future__ import annotations

import re

import pytest

from loom_nb import UserError
from loom_nb._tables.grammar import (
    BUCKETS,
    AggregateRules,
    Filter,
    GroupKey,
    parse_aggregate,
    parse_insert,
    parse_select,
    parse_update,
)
from loom_nb._tables.options import parse_tables
from loom_nb._tables.schemas import aggregate_schema, select_schema
from loom_nb._tools import ToolInputError

TABLES = parse_tables(
    {
        "orders": {"columns": ["id", "status", "total"]},
        "notes": {"write": True},
    }
)


def test_select_defaults_to_the_column_list_and_max_rows():
    q = parse_select({"table": "orders"}, TABLES, 25)
    assert q.columns == ("id", "status", "total") and q.limit == 25 and q.offset == 0
    assert parse_select({"table": "notes"}, TABLES, 25).columns is None


def test_select_reads_filters_order_and_paging():
    q = parse_select(
        {
            "table": "orders",
            "columns": ["total", "id", "total"],
            "filters": [
                {"column": "status", "op": "in", "value": ["a", "b"], "not": True},
                {"column": "total", "op": "is_null"},
            ],
            "order": [{"column": "total", "desc": True}],
            "limit": 10,
            "offset": 30,
            "count": True,
        },
        TABLES,
        50,
    )
    assert q.columns == ("total", "id")
    assert q.filters == (
        Filter("status", "in", ("a", "b"), True),
        Filter("total", "is_null", None, False),
    )
    assert q.order == (("total", True),) and (q.limit, q.offset, q.count) == (10, 30, True)


def test_limit_is_clamped_to_max_rows():
    assert parse_select({"table": "orders", "limit": 10_000}, TABLES, 50).limit == 50


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"table": "users"}, r"unknown table 'users'; the tables are \['notes', 'orders'\]"),
        ({"table": "orders", "columns": ["meta->>x"]}, "'meta->>x' is not a plain column name"),
        ({"table": "orders", "columns": ["notes"]}, "column 'notes' is not available in 'orders'"),
        ({"table": "notes", "columns": ["limit"]}, "'limit' is not a plain column name"),
        ({"table": "notes", "columns": ["Order"]}, "'Order' is not a plain column name"),
        (
            {"table": "orders", "filters": [{"column": "id", "op": "regex", "value": "x"}]},
            r"filters\[0\]\.op 'regex' is not one of",
        ),
        (
            {"table": "orders", "filters": [{"column": "id", "op": "in", "value": [None]}]},
            r"filters\[0\]\.value: expected a string, number or boolean, got None",
        ),
        (
            {"table": "orders", "filters": [{"column": "id", "op": "is_null", "value": "x"}]},
            r"filters\[0\]: is_null takes no value",
        ),
        ({"table": "orders", "limit": True}, "limit must be a non-negative integer, got True"),
        ({"table": "orders", "offset": -1}, "offset must be a non-negative integer, got -1"),
    ],
)
def test_select_refusals(args, message):
    with pytest.raises(ToolInputError, match=message):
        parse_select(args, TABLES, 50)


def test_writes_need_a_writable_table_and_updates_a_filter():
    assert parse_insert({"table": "notes", "rows": [{"body": "x"}]}, TABLES).rows == (
        {"body": "x"},
    )
    with pytest.raises(ToolInputError, match="read-only"):
        parse_insert({"table": "orders", "rows": [{"status": "x"}]}, TABLES)
    with pytest.raises(ToolInputError, match="at least one filter"):
        parse_update({"table": "notes", "values": {"body": "x"}, "filters": []}, TABLES)


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ({"a-b": {}}, "table name 'a-b' is not a plain identifier"),
        ({"t": {"columns": []}}, r"tables\['t'\]\['columns'\] must be a non-empty list of names"),
        ({"t": {"columns": ["x", "x"]}}, r"tables\['t'\]\['columns'\] lists a column twice"),
        ({"t": {"cols": []}}, r"tables\['t'\] has no option 'cols': did you mean 'columns'\?"),
    ],
)
def test_table_configuration_mistakes(tables, message):
    with pytest.raises(UserError, match=message):
        parse_tables(tables)


def test_schema_enums():
    schema = select_schema(TABLES, 50)
    assert schema["properties"]["table"]["enum"] == ["notes", "orders"]
    # one table allows every column: names are checked by pattern instead of an enum
    assert "pattern" in schema["properties"]["columns"]["items"]


#: Two backends' aggregate rules: one groups by time buckets and orders by totals, the other
#: groups by plain columns, orders by them only and keeps output names short.
BUCKETED = AggregateRules("pandas", ("count", "sum"), buckets=BUCKETS)
PLAIN = AggregateRules("PostgREST", ("count", "avg"), order_by_totals=False, max_output_name=8)


def test_one_aggregate_grammar_takes_each_backends_rules():
    args = {
        "table": "orders",
        "group_by": ["status", "status"],
        "aggregates": [{"fn": "count"}, {"fn": "count"}],
        "order": [{"column": "status", "desc": True}],
        "limit": 99,
    }
    for rules in (BUCKETED, PLAIN):
        q = parse_aggregate(args, TABLES, 25, rules)
        assert q.group_by == (GroupKey("status"),) and q.outputs == ["status", "count"]
        assert q.order == (("status", True),) and q.limit == 25
    weekly = {"table": "notes", "group_by": [{"column": "at", "bucket": "week"}]}
    assert parse_aggregate(weekly, TABLES, 25, BUCKETED).outputs == ["week_at", "count"]
    by_total = {**args, "order": [{"column": "count"}]}
    assert parse_aggregate(by_total, TABLES, 25, BUCKETED).order == (("count", False),)
    schema = aggregate_schema(TABLES, 25, PLAIN)["properties"]
    assert schema["aggregates"]["items"]["properties"]["fn"]["enum"] == ["count", "avg"]
    assert "anyOf" not in schema["group_by"]["items"]  # plain columns only


@pytest.mark.parametrize(
    ("rules", "args", "message"),
    [
        (
            PLAIN,
            {"aggregates": [{"fn": "sum", "column": "total"}]},
            "cannot compute sum; it computes count",
        ),
        (
            BUCKETED,
            {"aggregates": [{"fn": "avg", "column": "total"}]},
            "cannot compute avg; it computes count",
        ),
        (PLAIN, {"group_by": "status"}, "group_by must be a list of column names"),
        (
            PLAIN,
            {"group_by": [{"column": "total", "bucket": "week"}]},
            "cannot group by a time bucket",
        ),
        (
            BUCKETED,
            {"group_by": [{"column": "total", "bucket": "hour"}]},
            "group_by[0].bucket 'hour' is not one of",
        ),
        (
            PLAIN,
            {"group_by": ["status"], "order": [{"column": "count"}]},
            "order by a group_by column (['status']); PostgREST cannot order by a total",
        ),
        (
            BUCKETED,
            {"group_by": ["status"], "order": [{"column": "total"}]},
            "'total' is not an output column; use one of ['count', 'status']",
        ),
        (PLAIN, {"aggregates": [{"fn": "avg", "column": "total"}]}, "'avg_total' is too long"),
        (BUCKETED, {"aggregates": [{"fn": "sum"}]}, "aggregates[0]: sum needs a column"),
    ],
)
def test_aggregate_refusals_follow_the_backends_rules(rules, args, message):
    with pytest.raises(ToolInputError, match=re.escape(message)):
        parse_aggregate({"table": "orders", **args}, TABLES, 25, rules)


@pytest.mark.parametrize("bad", ["", "1db", "has space", "x" * 41, "semi;colon", 3])
def test_both_table_connectors_check_their_options_alike(bad: object) -> None:
    import pandas as pd

    from loom_nb.frames import frame_tools
    from loom_nb.supabase import supabase_tools

    for make in (
        lambda **kw: frame_tools({"orders": pd.DataFrame({"id": [1]})}, **kw),
        lambda **kw: supabase_tools(client=lambda ctx: None, tables={"orders": {}}, **kw),
    ):
        with pytest.raises(UserError, match="it prefixes the tool names"):
            make(name=bad)
        with pytest.raises(UserError, match="approve_writes must be True or False"):
            make(approve_writes="yes")
        with pytest.raises(UserError, match="max_rows must be a positive int"):
            make(max_rows=0)
        for fine in ("shop_2", "Shop-2"):  # letters, digits, '_' and '-' are fine
            made = make(name=fine)
            assert made.name == fine and f"{fine}_select" in made.tools
            assert all(tool.startswith(f"{fine}_") for tool in made.tools)
