"""Run every benchmark at its default size, one fresh process each: ``python -m bench``
(or ``make bench``). Run one alone, with its options, as ``python -m bench.NAME --help``."""

from __future__ import annotations

import subprocess
import sys

BENCHES = [
    "bench_agent",
    "bench_import",
    "bench_store",
    "bench_scale",
    "bench_postgres",
    "bench_supabase",
    "bench_frames",
    "bench_joins",
    "bench_buckets",
    "bench_duckdb",
    "bench_charts",
    "bench_widget",
    "bench_export",
    "bench_http",
    "bench_history",
    "bench_numbers",
]


def main() -> int:
    failed = []
    for name in BENCHES:
        print(f"\n===== bench.{name} =====", flush=True)
        if subprocess.run([sys.executable, "-m", f"bench.{name}"]).returncode:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
