"""What the MCP server tests serve: ``python -m loom_nb.mcp tests.mcp._served:server``.

The store is the SQLite file ``LOOM_TEST_DB`` names, shared by the server process, the
processes that decide, and the test. The write tool appends a line to ``LOOM_TEST_LEDGER``
each time it runs, so a test counts executions across processes.
"""

from __future__ import annotations

import os

from loom_nb import connector, tool
from loom_nb.frames import frame_tools
from loom_nb.mcp import mcp_server
from loom_nb.sqlite import sqlite_store
from tests.frames._orders import orders_frame

MAX_ROWS = 3


@tool(needs_approval=True)
def record(entry: str) -> str:
    """Write one entry to the ledger."""
    with open(os.environ["LOOM_TEST_LEDGER"], "a", encoding="utf-8") as f:
        f.write(entry + "\n")
    return f"recorded {entry!r}"


orders = orders_frame()
frames = frame_tools({"orders": {"frame": orders, "write": True}}, max_rows=MAX_ROWS, name="frames")
ledger = connector("ledger", [record])
server = mcp_server(
    connectors=[frames, ledger],
    store=sqlite_store(os.environ["LOOM_TEST_DB"]),
    name="mcp-test",
    elicit=os.environ.get("LOOM_TEST_ELICIT") == "1",
)
