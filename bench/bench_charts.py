"""Drawing 10,000-point charts: the chart tool's spec, then the PNG, per kind (goal ≤ 0.3 s).

A data person's chart of 10,000 rows (the most one chart holds): hourly totals over 10,000
hours (a time axis, in UTC), drawn as each kind, and a scatter coloured by three segments.

- "tool" is ``Tool.call`` of ``chart`` as the agent loop runs it: the schema, the checks against
  the earlier result, the rows kept and encoded into the spec, and the text the model gets;
- "draw" is what the thread view does with a saved spec: ``Chart(spec).png()`` from a new
  object (the spec's rows decoded, the figure built, Agg rendering, PNG encoding);
- "first draw" is the same in a fresh process, with matplotlib's import (the first chart of a
  kernel);
- "matplotlib" is the baseline, what a user would write instead: the same kind drawn by hand
  with matplotlib's object API over the same frame, labelled axes, the same size, dpi and
  format (PNG), timed alternating with "draw" (bars once: ``ax.bar`` makes a patch per bar);
  "ratio" is draw / matplotlib.

Medians of ``--runs``, in one process, kinds alternating. Run:
``python -m bench.bench_charts [--points N] [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from typing import Any

CASES: list[tuple[str, dict[str, Any]]] = [
    ("bar", {"kind": "bar", "x": "hour", "y": "total"}),
    ("line", {"kind": "line", "x": "hour", "y": "total"}),
    ("area", {"kind": "area", "x": "hour", "y": "total"}),
    ("scatter", {"kind": "scatter", "x": "orders", "y": "total"}),
    ("scatter, 3 colours", {"kind": "scatter", "x": "orders", "y": "total", "color": "segment"}),
    ("histogram", {"kind": "histogram", "x": "total"}),
]

FIRST_DRAW = """
import sys, time
sys.path[:0] = {path!r}
from bench.bench_charts import make_hours, spec_of
spec = spec_of(make_hours({points}), {case!r})
from loom_nb.charts import Chart
start = time.perf_counter()
Chart(spec).png()
print(time.perf_counter() - start)
"""


def make_hours(points: int) -> Any:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(11)
    return pd.DataFrame(
        {
            "hour": pd.date_range("2024-01-01", periods=points, freq="h", tz="UTC"),
            "orders": rng.poisson(20, points),
            "total": np.round(rng.gamma(2.0, 600.0, points), 2),
            "segment": rng.choice(["retail", "wholesale", "online"], points),
        }
    )


def by_hand(frame: Any, kind: str, color: bool) -> bytes:
    """The chart as a user would draw it with matplotlib alone: a PNG of the same size."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 3.8), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if kind == "bar":
        ax.bar(frame["hour"], frame["total"], width=1 / 24)
    elif kind == "line":
        ax.plot(frame["hour"], frame["total"])
    elif kind == "area":
        ax.fill_between(frame["hour"], frame["total"], alpha=0.4)
        ax.plot(frame["hour"], frame["total"])
    elif kind == "scatter" and color:
        for name, part in frame.groupby("segment"):
            ax.scatter(part["orders"], part["total"], s=8, alpha=0.6, label=str(name))
        ax.legend(title="segment")
    elif kind == "scatter":
        ax.scatter(frame["orders"], frame["total"], s=8, alpha=0.6)
    else:
        ax.hist(frame["total"], bins=30)
    x = "total" if kind == "histogram" else ("orders" if kind == "scatter" else "hour")
    ax.set_xlabel(x)
    ax.set_ylabel("count" if kind == "histogram" else "total")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def _call(frame: Any, case: dict[str, Any]) -> Any:
    from loom_nb import RunContext, ToolResult
    from loom_nb.charts import chart_tools

    tool = chart_tools().tools["chart"]
    found = [ToolResult("call_hours", "frames_aggregate", "rows", frame)]
    ctx = RunContext("bench", "bench", _results=lambda: found)
    return tool, {"result": "call_hours", **case}, ctx


def spec_of(frame: Any, case: dict[str, Any]) -> dict[str, Any]:
    tool, arguments, ctx = _call(frame, case)
    out = asyncio.run(tool.call(arguments, ctx))
    spec: dict[str, Any] = out.chart
    return spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()

    from loom_nb.charts import Chart

    frame = make_hours(args.points)
    loop = asyncio.new_event_loop()
    specs = {label: spec_of(frame, case) for label, case in CASES}
    Chart(specs["bar"]).png()  # matplotlib imported and its fonts loaded once, before timing
    tool_ms: dict[str, list[float]] = {label: [] for label, _ in CASES}
    draw_ms: dict[str, list[float]] = {label: [] for label, _ in CASES}
    hand_ms: dict[str, list[float]] = {label: [] for label, _ in CASES}
    sizes: dict[str, int] = {}
    for _ in range(args.runs):
        for label, case in CASES:  # alternate, so every kind sees the same machine state
            tool, arguments, ctx = _call(frame, case)
            start = time.perf_counter()
            loop.run_until_complete(tool.call(arguments, ctx))
            tool_ms[label].append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            png = Chart(specs[label]).png()
            draw_ms[label].append((time.perf_counter() - start) * 1000)
            sizes[label] = len(png)
            if label == "bar" and hand_ms[label]:
                continue  # ax.bar makes a patch per bar: one run of it is long enough
            start = time.perf_counter()
            by_hand(frame, case["kind"], "color" in case)
            hand_ms[label].append((time.perf_counter() - start) * 1000)
    loop.close()
    print(f"chart of {args.points:,} rows; median of {args.runs} runs (goal: draw ≤ 300 ms)")
    print(
        f"{'kind':<20}{'tool ms':>9}{'draw ms':>9}{'PNG KB':>8}{'first draw ms':>15}"
        f"{'matplotlib ms':>15}{'ratio':>7}"
    )
    path = [p for p in sys.path if p]
    for label, case in CASES:
        code = FIRST_DRAW.format(path=path, points=args.points, case=case)
        first = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        draw, hand = statistics.median(draw_ms[label]), statistics.median(hand_ms[label])
        print(
            f"{label:<20}{statistics.median(tool_ms[label]):>9.1f}"
            f"{draw:>9.1f}{sizes[label] / 1024:>8.0f}"
            f"{float(first.stdout) * 1000:>15.0f}{hand:>15.1f}{'x':>3}{draw / hand:.2f}"
        )


if __name__ == "__main__":
    main()
