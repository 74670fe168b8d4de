"""Frames on DuckDB: frame_tools over a Parquet file vs native DuckDB SQL over the same file,
pandas frames vs DuckDB over the same DataFrame, and a Parquet glob past memory.

1. ``--rows`` orders (those of ``bench_frames``) written once to Parquet. Three questions, each
   through ``Tool.call`` on ``frame_tools({"orders": {"path": ...}})`` and as the SQL a person
   writes on a DuckDB connection over the same file (``read_parquet``, one GROUP BY), alternating
   runs; medians and the ratio tool / native. The same questions through the pandas backend
   over the DataFrame, and DuckDB's SQL over the DataFrame itself (``con.register``): whether a
   large in-memory frame would answer faster by DuckDB.
2. ``--glob-gb`` GB of Parquet generated in a temporary folder (several files; removed at the
   end), then a filtered weekly aggregate over the glob through the tool in a child process
   whose address space is limited (``--limit-gb``, ``resource.setrlimit``), beside the same
   SQL in a process without a limit. Reports wall time and the child's peak resident memory.

Run: ``python -m bench.bench_duckdb [--rows N] [--runs N] [--glob-gb G] [--limit-gb L]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_buckets import ALL_BY_WEEK, OPEN_BY_WEEK  # the same questions
from bench.bench_frames import make_orders, median_ms

BY_STATUS: dict[str, Any] = {
    "table": "orders",
    "group_by": ["status"],
    "aggregates": [
        {"fn": "count"},
        {"fn": "sum", "column": "total"},
        {"fn": "mean", "column": "total"},
    ],
    "filters": [{"column": "total", "op": "gt", "value": 100}],
}
#: The same questions as a person writes them for DuckDB (``{t}``: the table).
NATIVE = {
    "by status": "SELECT status, count(*), sum(total), avg(total) FROM {t} WHERE total > 100 "
    "GROUP BY status ORDER BY status",
    "open >100 by week": "SELECT date_trunc('week', created_at) AS w, count(*), sum(total) "
    "FROM {t} WHERE status = 'open' AND total > 100 GROUP BY w ORDER BY w",
    "all by week": "SELECT date_trunc('week', created_at) AS w, count(*), sum(total), avg(total) "
    "FROM {t} GROUP BY w ORDER BY w",
}
QUERIES = {"by status": BY_STATUS, "open >100 by week": OPEN_BY_WEEK, "all by week": ALL_BY_WEEK}


def part_one(rows: int, runs: int, folder: Path) -> None:
    import duckdb

    from loom_nb._context import RunContext
    from loom_nb.frames import frame_tools

    df = make_orders(rows)
    path = folder / "orders.parquet"
    duckdb.from_df(df).write_parquet(str(path))
    on_file = frame_tools({"orders": {"path": str(path)}}, max_rows=500).tools["frames_aggregate"]
    on_frame = frame_tools({"orders": df}, max_rows=500).tools["frames_aggregate"]
    con = duckdb.connect()
    con.register("orders_df", df)
    ctx = RunContext("bench", "bench")
    loop = asyncio.new_event_loop()

    def tool(t: Any, arguments: dict[str, Any]) -> Any:
        return lambda: loop.run_until_complete(t.call(arguments, ctx))

    def native(sql: str, table: str) -> Any:
        return lambda: con.execute(sql.format(t=table)).fetchall()

    print(f"{rows:,} orders; medians of {runs} alternating runs (ms)")
    print(
        f"{'query':<19}{'tool/parquet':>13}{'SQL/parquet':>12}{'ratio':>7}"
        f"{'tool/pandas':>12}{'SQL/frame':>10}{'ratio':>7}"
    )
    for label, arguments in QUERIES.items():
        a = tool(on_file, arguments)().data
        b = tool(on_frame, arguments)().data
        assert len(a) == len(b) and int(a["count"].sum()) == int(b["count"].sum())
        file_sql = native(NATIVE[label], f"read_parquet('{path}')")
        frame_sql = native(NATIVE[label], "orders_df")
        times: dict[str, list[float]] = {k: [] for k in ("tf", "sf", "tp", "sp")}
        for _ in range(runs):
            times["tf"].append(median_ms(tool(on_file, arguments), 1))
            times["sf"].append(median_ms(file_sql, 1))
            times["tp"].append(median_ms(tool(on_frame, arguments), 1))
            times["sp"].append(median_ms(frame_sql, 1))
        m = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"{label:<19}{m['tf']:>13.1f}{m['sf']:>12.1f}{m['tf'] / m['sf']:>7.2f}"
            f"{m['tp']:>12.1f}{m['sp']:>10.1f}{m['tp'] / m['sp']:>7.2f}"
        )
    loop.close()


CHILD = """
import asyncio, json, resource, sys, time
limit = int(float(sys.argv[1]) * 2**30)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from loom_nb import RunContext
from loom_nb.frames import frame_tools
start = time.perf_counter()
conn = frame_tools({"trips": {"path": sys.argv[2]}}, max_rows=60)
args = {
    "table": "trips",
    "group_by": [{"column": "created_at", "bucket": "week"}],
    "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "fare"}],
    "filters": [
        {"column": "zone", "op": "in", "value": [1, 2, 3]},
        {"column": "fare", "op": "gt", "value": 10},
    ],
}
out = asyncio.run(conn.tools["frames_aggregate"].call(args, RunContext("a", "t")))
took = time.perf_counter() - start
rss = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
rows = int(out.data["count"].sum())
print(json.dumps({"groups": len(out.data), "rows": rows, "s": took, "rss": rss}))
"""
NATIVE_GLOB = (
    "SELECT date_trunc('week', created_at) AS w, count(*), sum(fare) FROM "
    "read_parquet('{glob}') WHERE zone IN (1, 2, 3) AND fare > 10 GROUP BY w ORDER BY w"
)
ROWS_PER_FILE = 10_000_000  # 5 columns uncompressed: about 324 MB a file


def part_two(gigabytes: float, limit_gb: float, folder: Path) -> None:
    import duckdb

    con = duckdb.connect()
    files = max(1, round(gigabytes * 2**30 / 324e6))
    start = time.perf_counter()
    for i in range(files):
        con.execute(
            "COPY (SELECT TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_seconds((range * 7 + "
            f"{i}) % 31536000) AS created_at, random() * 100 AS fare, (range % 7)::INTEGER AS "
            f"zone, hash(range + {i * ROWS_PER_FILE}) AS k1, hash(range * 3 + {i}) AS k2 FROM "
            f"range({ROWS_PER_FILE})) TO '{folder}/part-{i:04d}.parquet' "
            "(FORMAT parquet, COMPRESSION uncompressed)"
        )
    size = sum(p.stat().st_size for p in folder.glob("part-*.parquet"))
    print(
        f"\n{size / 2**30:.2f} GB of Parquet, {files} files, {files * ROWS_PER_FILE:,} rows, "
        f"written in {time.perf_counter() - start:.0f} s"
    )
    glob = str(folder / "part-*.parquet")
    start = time.perf_counter()
    native = con.execute(NATIVE_GLOB.format(glob=glob)).fetchall()
    native_s = time.perf_counter() - start
    con.close()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(limit_gb), glob], capture_output=True, text=True
    )
    if done.returncode:
        print(done.stderr[-3000:])
        raise SystemExit("the tool failed under the memory limit")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["groups"] == len(native) and got["rows"] == sum(r[1] for r in native)
    print(
        f"filtered weekly aggregate, {got['groups']} weeks of {got['rows']:,} rows: tool in a "
        f"process limited to {limit_gb:g} GB of address space {got['s']:.2f} s (peak resident "
        f"{got['rss'] / 2**20:.0f} MB, from defining the connector); native SQL without a "
        f"limit {native_s:.2f} s; ratio {got['s'] / native_s:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--glob-gb", type=float, default=3.0, help="0 skips the glob")
    parser.add_argument("--limit-gb", type=float, default=1.5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="loom-bench-duckdb-"))
    try:
        if args.rows:
            part_one(args.rows, args.runs, folder)
        if args.glob_gb:
            (folder / "glob").mkdir()
            part_two(args.glob_gb, args.limit_gb, folder / "glob")
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # several GB: never left behind


if __name__ == "__main__":
    main()
