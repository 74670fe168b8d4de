"""A small MCP server for the walkthrough and the tests: ``python -m loom_nb.mcp._example``.

Built on the SDK alone (not on loom_nb), as any third-party server is. Its tools: two reads
(one with tabular structured content), one write that appends to the file named by
``LOOM_EXAMPLE_NOTES`` (not marked read-only, so loom_nb asks before it runs), and two that
misbehave on purpose: one hangs, one kills the server.
"""

from __future__ import annotations

import os
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server: MCPServer[Any] = MCPServer("loom-example", log_level="WARNING")

READ_ONLY = ToolAnnotations(read_only_hint=True)

STATIONS = [
    {"station": "Oslo", "temp_c": -3.5, "rain_mm": 0.0},
    {"station": "Lisbon", "temp_c": 17.0, "rain_mm": 2.5},
    {"station": "Nairobi", "temp_c": 24.5, "rain_mm": 11.0},
]


@server.tool(annotations=READ_ONLY)
def forecast(city: str) -> str:
    """Tomorrow's weather in a city, as a sentence."""
    return f"Tomorrow in {city}: light wind, 12 °C."


@server.tool(annotations=READ_ONLY, structured_output=True)
def stations() -> dict[str, Any]:
    """Today's readings of the weather stations, one row each."""
    return {"columns": ["station", "temp_c", "rain_mm"], "rows": STATIONS}


@server.tool()
def add_note(text: str) -> str:
    """Append a note to the notes file."""
    path = os.environ.get("LOOM_EXAMPLE_NOTES", "notes.txt")
    with open(path, "a", encoding="utf-8") as f:
        f.write(text + "\n")
    return f"noted ({len(text)} characters)"


@server.tool(annotations=READ_ONLY)
def slow(seconds: float) -> str:
    """Wait this many seconds, then answer (a server that hangs)."""
    time.sleep(seconds)
    return "done waiting"


@server.tool(annotations=READ_ONLY)
def crash() -> str:
    """Stop the server process at once (a server that crashes)."""
    os._exit(3)


if __name__ == "__main__":
    server.run()
