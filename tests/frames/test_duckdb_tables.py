"""DuckDB tables of frame_tools: misconfiguration refused at definition with how to fix it,
hostile identifiers and values kept out of the SQL text, ``import loom_nb`` without DuckDB,
and a Parquet glob larger than a process's memory limit answering a filtered weekly
aggregate (a real child process under ``resource.setrlimit``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from loom_nb import RunContext, UserError
from loom_nb._code import CodeContext
from loom_nb._tables.grammar import parse_aggregate, parse_select
from loom_nb._tables.options import TableSpec
from loom_nb._tools import ToolInputError
from loom_nb.frames import _sql as sql
from loom_nb.frames import frame_tools
from loom_nb.frames._aggregate import FRAME_AGGREGATES
from loom_nb.frames._allowlist import AllowedFrames
from loom_nb.frames._duck_reads import source
from loom_nb.frames._duckdb import new_link, open_path
from tests.notebook.hostile import HOSTILE_LINE, PAYLOADS

ROOT = Path(__file__).resolve().parents[2]


def run(conn: Any, tool: str, args: dict[str, Any]) -> Any:
    return asyncio.run(conn.tools[tool].call(args, RunContext("a", "t")))


@pytest.fixture
def trips(tmp_path: Path) -> Path:
    df = pd.DataFrame({"id": [1, 2, 3], "city": ["Paris", HOSTILE_LINE, None], "fare": [1.5, 2, 3]})
    duckdb.from_df(df).write_parquet(str(tmp_path / "trips.parquet"))
    return tmp_path / "trips.parquet"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"path": "nowhere/trips.parquet"}, "is not a file .* check the path"),
        ({"path": "nowhere/*.parquet"}, "matches no file .* check the pattern"),
        ({"path": "trips.xlsx"}, "whose file type .* name Parquet or CSV files"),
        ({"path": 3}, "must be a path or glob string"),
        ({"path": "trips.parquet", "frame": pd.DataFrame()}, "both 'frame' and 'path'"),
        ({"path": "trips.parquet", "write": True}, "does not write; drop 'write'"),
        ({"path": "trips.parquet", "connection": None}, r"\['connection'\] goes with a relation"),
        ({"frame": pd.DataFrame({"a": [1]}), "connection": None}, "goes with a DuckDB relation"),
        ({"pathh": "trips.parquet"}, "did you mean 'path'"),
    ],
)
def test_misconfigured_tables_are_refused_when_defined_saying_how_to_fix_it(
    trips: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any], message: str
) -> None:
    monkeypatch.chdir(trips.parent)
    with pytest.raises(UserError, match=message):
        frame_tools({"trips": options})


def test_a_relation_of_another_connection_needs_its_connection(trips: Path) -> None:
    con = duckdb.connect()
    rel = con.read_parquet(str(trips))
    with pytest.raises(UserError, match=r'pass it: \{"frame": rel, "connection": con\}'):
        frame_tools({"trips": rel})
    conn = frame_tools({"trips": {"frame": rel, "connection": con}})
    out = run(
        conn,
        "frames_aggregate",
        {"table": "trips", "aggregates": [{"fn": "sum", "column": "fare"}]},
    )
    assert out.data["sum_fare"].tolist() == [6.5]
    with pytest.raises(UserError, match="two connections"):
        frame_tools(
            {"trips": {"frame": rel, "connection": con}, "more": {"path": str(trips)}},
            relationships={"trips.id": "more.id"},
        )


def test_a_path_without_duckdb_installed_says_which_extra_to_install(trips: Path) -> None:
    # DuckDB is installed here; the child makes its import fail (sys.modules entry None)
    # as it fails where it is not installed.
    code = (
        "import sys; sys.modules['duckdb'] = None\n"
        "from loom_nb.frames import frame_tools\n"
        f"frame_tools({{'trips': {{'path': {str(trips)!r}}}}})"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode != 0
    assert 'install the extra: pip install "loom-nb[duckdb]"' in done.stderr


def test_import_loom_nb_and_dataframe_frame_tools_do_not_import_duckdb() -> None:
    code = (
        "import sys, pandas as pd, loom_nb\n"
        "from loom_nb.frames import frame_tools\n"
        "frame_tools({'t': pd.DataFrame({'a': [1]})})\n"
        "print('duckdb' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.stdout.strip() == "False", done.stderr


def _tables(path: Path) -> AllowedFrames:
    """The allowlisted tables frame_tools builds over one Parquet file."""
    duck = open_path("trips", str(path), new_link())
    spec = {"trips": TableSpec("trips")}
    return AllowedFrames(spec, {"trips": duck.sample}, 5, "frames", duck={"trips": duck})


HOSTILE = [
    HOSTILE_LINE,
    "x' OR 1=1 --",
    'a"; DROP TABLE trips; --',
    "%'; SELECT 1; --\\",
    *PAYLOADS.values(),
]


@pytest.mark.parametrize("op", ["eq", "neq", "like", "ilike", "in", "gt"])
def test_hostile_values_reach_duckdb_as_parameters_never_as_sql_text(trips: Path, op: str) -> None:
    tables = _tables(trips)
    src = source(tables, {})
    conn = frame_tools({"trips": {"path": str(trips)}}, max_rows=5)
    for value in HOSTILE:
        f = {"column": "city", "op": op, "value": [value] if op == "in" else value}
        args = {"table": "trips", "filters": [f], "order": [{"column": "city"}]}
        q = parse_select(args, tables.specs, tables.frame_rows)
        for statement in sql.select_statements(src, q, ["id", "city"]):
            assert value not in statement.sql and value[:8] not in statement.sql
            assert "$p1" in statement.sql
        out = run(conn, "frames_select", args)  # runs: the value is only a value
        if op in ("eq", "in") and value == HOSTILE_LINE:
            assert out.data["id"].tolist() == [2]
        code = conn.tools["frames_select"].code(args, CodeContext())  # type: ignore[misc]
        plain = dict(args, filters=[dict(f, value=["plain"] if op == "in" else "plain")])
        same = conn.tools["frames_select"].code(plain, CodeContext())  # type: ignore[misc]
        assert code is not None and same is not None
        compile(code, "export", "exec")  # the value is a literal: the lines are the same
        assert len(code.splitlines()) == len(same.splitlines())
        agg = {
            "table": "trips",
            "group_by": ["city"],
            "aggregates": [{"fn": "count"}],
            "filters": [f],
        }
        a = parse_aggregate(agg, tables.specs, tables.frame_rows, FRAME_AGGREGATES)
        statement, _ = sql.aggregate_statement(src, a, {})
        assert value not in statement.sql
        run(conn, "frames_aggregate", agg)


def test_the_statements_hold_only_quoted_allowlisted_names_and_placeholders(trips: Path) -> None:
    tables = _tables(trips)
    src = source(tables, {})
    a = parse_aggregate(
        {
            "table": "trips",
            "group_by": ["city"],
            "aggregates": [{"fn": "percentile", "column": "fare", "p": 0.5}],
        },
        tables.specs,
        tables.frame_rows,
        FRAME_AGGREGATES,
    )
    statement, _ = sql.aggregate_statement(src, a, {})
    assert "0.5" not in statement.sql and 0.5 in statement.params.values()
    assert '"b"."city" AS "city"' in statement.sql and '"trips"' in statement.sql


def test_hostile_column_names_in_a_file_are_refused_or_left_out(tmp_path: Path) -> None:
    evil = 'x"; DROP TABLE t; --'
    df = pd.DataFrame({"ok": [1, 2], evil: [3, 4]})
    duckdb.from_df(df).write_parquet(str(tmp_path / "t.parquet"))
    with pytest.raises(UserError, match="columns the agent could not name"):
        frame_tools({"t": {"path": str(tmp_path / "t.parquet")}})
    conn = frame_tools({"t": {"path": str(tmp_path / "t.parquet"), "columns": ["ok"]}})
    with pytest.raises(ToolInputError):
        run(conn, "frames_select", {"table": "t", "columns": [evil]})
    out = run(conn, "frames_select", {"table": "t"})
    assert list(out.data.columns) == ["ok"]


CHILD = """
import asyncio, json, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from loom_nb import RunContext
from loom_nb.frames import frame_tools
conn = frame_tools({"trips": {"path": sys.argv[2]}}, max_rows=60)
args = {
    "table": "trips",
    "group_by": [{"column": "created_at", "bucket": "week"}],
    "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "fare"}],
    "filters": [{"column": "zone", "op": "in", "value": [1, 2, 3]}],
}
out = asyncio.run(conn.tools["frames_aggregate"].call(args, RunContext("a", "t")))
rss = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
print(json.dumps({"counts": [int(c) for c in out.data["count"]], "rss": rss}))
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_parquet_glob_larger_than_the_memory_limit_answers_a_filtered_weekly_aggregate(
    tmp_path: Path,
) -> None:
    limit = 1100 * 2**20  # Python, pandas and DuckDB's threads reserve about 1 GB of it
    con = duckdb.connect()
    for i in range(4):
        con.execute(
            "COPY (SELECT TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_seconds((range * 7 + "
            f"{i}) % 31536000) AS created_at, random() * 100 AS fare, (range % 7)::INTEGER "
            "AS zone, hash(range) AS k1, hash(range * 3) AS k2 FROM range(11000000)) TO "
            f"'{tmp_path}/part-{i}.parquet' (FORMAT parquet, COMPRESSION uncompressed)"
        )
    size = sum(p.stat().st_size for p in tmp_path.glob("part-*.parquet"))
    assert size > limit
    glob = str(tmp_path / "part-*.parquet")
    expected = con.execute(
        f"SELECT count(*) FROM read_parquet('{glob}') WHERE zone IN (1, 2, 3) "
        "GROUP BY date_trunc('week', created_at) ORDER BY date_trunc('week', created_at)"
    ).fetchall()
    con.close()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(limit), glob],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # The answer alone: no progress bar drawn on stdout (the cell running the agent).
    (line,) = done.stdout.strip().splitlines()
    got = json.loads(line)
    assert got["counts"] == [c for (c,) in expected]
    assert got["rss"] < limit


def test_the_connectors_own_connection_draws_no_progress_bar() -> None:
    """DuckDB draws a bar on stdout for a statement past two seconds (in a script or a kernel;
    not under pytest); in a notebook, into the cell running the agent. The connector's own
    connection does not; DuckDB's default one, in the same process, would."""
    setting = "SELECT current_setting('enable_progress_bar')"
    code = (
        "import duckdb\n"
        "from loom_nb.frames._duckdb import new_link\n"
        f"print(duckdb.connect().execute({setting!r}).fetchall(), "
        f"new_link().connection.execute({setting!r}).fetchall())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[(True,)]", "[(False,)]"]


def test_columns_named_like_the_statements_own_columns_answer_as_on_pandas(
    tmp_path: Path,
) -> None:
    """The statements add each row's position and each float column as stored beside the
    columns a call reads; a file's columns of the same names (any case) are read as the
    user's columns, as the pandas backend reads them."""
    df = pd.DataFrame(
        {
            "id": range(6),
            "total": [5.0, 1.0, None, 3.0, 9.0, 2.0],
            "__loom_raw_total": [100.0, 200.0, 300.0, 400.0, 500.0, 600.0],
            "__loom_row": [50, 40, 30, 20, 10, 0],
            "__LOOM_RAW_ID": [7, 7, 8, 8, 9, 9],
        }
    )
    path = tmp_path / "c.parquet"
    duckdb.from_df(df).write_parquet(str(path))
    backends = {
        "pandas": frame_tools({"t": duckdb.read_parquet(str(path)).df()}),
        "parquet": frame_tools({"t": {"path": str(path)}}),
    }
    calls = [
        (
            "frames_select",
            {
                "table": "t",
                "filters": [{"column": "total", "op": "gt", "value": 1.5}],
                "order": [{"column": "__loom_row"}],
            },
        ),
        (
            "frames_select",
            {
                "table": "t",
                "columns": ["id", "__loom_raw_total"],
                "filters": [{"column": "__loom_raw_total", "op": "lt", "value": 350}],
                "order": [{"column": "__LOOM_RAW_ID", "desc": True}],
            },
        ),
        (
            "frames_aggregate",
            {
                "table": "t",
                "group_by": ["__LOOM_RAW_ID"],
                "aggregates": [
                    {"fn": "sum", "column": "__loom_raw_total"},
                    {"fn": "sum", "column": "total"},
                    {"fn": "max", "column": "__loom_row"},
                ],
                "filters": [{"column": "total", "op": "gt", "value": 1.5}],
            },
        ),
    ]
    for tool, args in calls:
        expected, got = (run(backends[k], tool, args).data for k in ("pandas", "parquet"))
        pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    total = run(backends["parquet"], *calls[2]).data["sum___loom_raw_total"].sum()
    assert total == 100 + 400 + 500 + 600  # the user's column, not ``total`` as stored


def test_a_frame_whose_names_differ_only_in_case_is_not_joined_by_duckdb(trips: Path) -> None:
    """DuckDB matches names case-insensitively (it would read ``tier`` as ``Tier``): refused
    when defined, and when the frame gains such a column later, at the call."""
    drivers = pd.DataFrame({"id": [1, 2, 3], "Tier": ["a", "b", "c"], "tier": ["x", "y", "z"]})
    relationships = {"trips.id": "drivers.id"}
    with pytest.raises(UserError, match=r"\['Tier', 'tier'\] whose names differ only in case"):
        frame_tools(
            {"trips": {"path": str(trips)}, "drivers": drivers}, relationships=relationships
        )
    drivers = drivers.drop(columns="Tier")
    conn = frame_tools(
        {"trips": {"path": str(trips)}, "drivers": drivers}, relationships=relationships
    )
    args = {"table": "trips", "join": ["drivers"], "columns": ["id", "drivers.tier"]}
    assert run(conn, "frames_select", args).data["drivers.tier"].tolist() == ["x", "y", "z"]
    drivers["TIER"] = ["a", "b", "c"]
    with pytest.raises(ToolInputError, match=r"\['tier', 'TIER'\] whose names differ only"):
        run(conn, "frames_select", args)
