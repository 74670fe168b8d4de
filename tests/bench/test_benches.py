"""Every benchmark still runs and reports its comparison: each one at its smallest size, in a
fresh process as ``python -m bench`` runs it. Figures are not checked (the machines are shared
and noisy); that each bench completes and prints its ratios against the baseline is."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]

#: Each bench with the arguments of a smoke run, and what its report must show: the
#: comparison it exists for (a ratio to the baseline, or the goal it is measured against).
SMOKE = {
    "bench_agent": (
        ["--runs", "20", "--rounds", "1"],
        r"the loop's own work .* is \d.*\nratio loom_nb / pydantic-ai \(median\): \d",
    ),
    "bench_import": (["--runs", "2"], r"ratio import loom_nb / import pydantic_ai .*: \d"),
    "bench_store": (["--quick"], r"SQLiteSession"),
    "bench_scale": (["--quick"], r"vs FTS5 .* x\d"),
    "bench_postgres": (["--quick"], r"loom / same-work floor .*\d\.\d+x"),
    "bench_supabase": ([], r"json\.dumps"),
    "bench_frames": (["--rows", "20000", "--runs", "2"], r"DuckDB ms +ratio"),
    "bench_duckdb": (
        ["--rows", "20000", "--runs", "2", "--glob-gb", "0"],
        r"fastest SQL +ratio.*\nby status +Parquet file +\d.*\n(.*\n)*worst ratio \d",
    ),
    "bench_joins": (["--rows", "20000", "--runs", "2"], r"join \+ p90 .* x +\d"),
    "bench_buckets": (["--rows", "20000", "--runs", "2", "--grouper-runs", "1"], r"Grouper ms"),
    "bench_charts": (["--points", "200", "--runs", "2"], r"matplotlib ms +ratio\n.* x\d"),
    "bench_widget": (["--quick"], r"naive: HTML\.value per delta"),
    "bench_export": (["--calls", "10", "--runs", "2"], r"floor: x\d.*\n.*goal: at most 1000 ms"),
    "bench_http": (["--messages", "200", "--repeat", "2"], r"vs agent\.thread"),
    "bench_history": (["--turns", "30"], r"ratio whole / by reference \(input tokens\): x\d"),
    "bench_numbers": (["--messages", "400", "--turns", "3"], r"ratio warn / off \(median\): \d"),
}


def test_every_bench_is_smoke_tested():
    from bench.__main__ import BENCHES

    assert sorted(BENCHES) == sorted(SMOKE)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMOKE))
def test_bench_runs_and_reports_its_ratios(name: str):
    if name == "bench_postgres":
        from tests.postgres_server import missing_reason

        reason = missing_reason()
        require(reason is None, f"PostgreSQL server for bench_postgres: {reason}")
    args, shows = SMOKE[name]
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = done.stdout + done.stderr
    assert re.search(shows, report), report[-3000:]
