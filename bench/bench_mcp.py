"""What loom_nb's rules cost an MCP client: one read over stdio, loom_nb's server vs the SDK's.

    python -m bench.bench_mcp            # 200 reads on each server
    python -m bench.bench_mcp --quick    # 40

Both servers run as processes the SDK's own client talks to over stdio, on the same 2,000-row
DataFrame, answering the same question (orders above 100, the first 50 by id):

- loom_nb: ``python -m loom_nb.mcp`` serving ``frame_tools``; each call is one run of the
  agent loop, its messages saved in a SQLite thread (``synchronous=FULL``: each of the run's
  commits waits for the disk), the result in a data block, the frame as structured content;
- loom_nb (memory): the same with ``memory_store()``, which shows the software's own cost;
- the floor: an SDK ``MCPServer`` tool doing the filter in pandas and returning the CSV text.

The calls alternate between the two servers, so the machine's noise falls on both alike; the
medians and their ratio are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]

FRAME = """
import numpy as np
import pandas as pd

rng = np.random.default_rng(0)
orders = pd.DataFrame({
    "id": np.arange(2000),
    "total": rng.uniform(0, 300, 2000).round(2),
    "status": rng.choice(["open", "closed", "shipped"], 2000),
})
"""

LOOM = FRAME + textwrap.dedent("""
    import os
    from loom_nb.frames import frame_tools
    from loom_nb.mcp import mcp_server
    from loom_nb import memory_store
    from loom_nb.sqlite import sqlite_store

    store = sqlite_store(os.environ["BENCH_DB"]) if os.environ["BENCH_DB"] else memory_store()
    server = mcp_server(connectors=[frame_tools({"orders": orders})], store=store, name="bench")
""")

FLOOR = FRAME + textwrap.dedent("""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("floor", log_level="WARNING")

    @server.tool()
    def select(min_total: float, limit: int) -> str:
        "Orders above min_total, the first by id."
        return orders[orders.total > min_total].sort_values("id").head(limit).to_csv(index=False)

    if __name__ == "__main__":
        server.run()
""")

LOOM_ARGS = {
    "table": "orders",
    "filters": [{"column": "total", "op": "gt", "value": 100}],
    "order": [{"column": "id"}],
    "limit": 50,
}
FLOOR_ARGS = {"min_total": 100, "limit": 50}


async def main(reads: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "bench_loom_served.py").write_text(LOOM)
        Path(folder, "bench_floor_served.py").write_text(FLOOR)
        env = {"PYTHONPATH": os.pathsep.join([folder, str(ROOT)])}

        def served(db: str) -> StdioServerParameters:
            return StdioServerParameters(
                command=sys.executable,
                args=["-m", "loom_nb.mcp", "bench_loom_served:server"],
                env={**env, "BENCH_DB": db},
                cwd=folder,
            )

        floor = StdioServerParameters(
            command=sys.executable, args=["bench_floor_served.py"], env=env, cwd=folder
        )
        async with (
            stdio_client(served(str(Path(folder, "loom.db")))) as (lr, lw),
            ClientSession(lr, lw) as loom_session,
            stdio_client(served("")) as (mr, mw),
            ClientSession(mr, mw) as memory_session,
            stdio_client(floor) as (fr, fw),
            ClientSession(fr, fw) as floor_session,
        ):
            sides: list[tuple[str, Any, str, dict[str, Any]]] = [
                ("loom_nb", loom_session, "frames_select", LOOM_ARGS),
                ("loom_nb (memory)", memory_session, "frames_select", LOOM_ARGS),
                ("floor", floor_session, "select", FLOOR_ARGS),
            ]
            times: dict[str, list[float]] = {label: [] for label, *_ in sides}
            for _, session, _, _ in sides:
                await session.initialize()
            for _, session, name, args in sides:  # warm up: imports, first pandas calls
                for _ in range(3):
                    assert not (await session.call_tool(name, args)).is_error
            for _ in range(reads):
                for label, session, name, args in sides:
                    started = time.perf_counter()
                    result = await session.call_tool(name, args)
                    times[label].append(time.perf_counter() - started)
                    assert not result.is_error
    medians = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"one read over stdio, median of {reads} (ms):")
    for label, value in medians.items():
        print(f"  {label:17} {value:7.2f}  ({value / medians['floor']:.2f}x the floor)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main(40 if parser.parse_args().quick else 200))
