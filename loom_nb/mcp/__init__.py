"""MCP both ways, under loom_nb's rules.

As a server, loom_nb lets another agent (Claude Code, Claude Desktop, Cursor, ...) use its
connectors: the same tools, schemas, allowlists, bounds and data blocks. A write does not run:
it becomes a pending card in the store, decided in the notebook (``%loom approvals``) or over
the HTTP API, and runs once::

    # served.py
    from loom_nb.frames import frame_tools
    from loom_nb.mcp import mcp_server

    server = mcp_server(connectors=[frame_tools({"orders": orders})], name="orders-mcp")

    $ python -m loom_nb.mcp served:server              # stdio
    $ python -m loom_nb.mcp served:server --http 8765  # streamable HTTP on 127.0.0.1:8765/mcp

Each MCP session is a thread of the agent ``name`` in the store (a new thread once one waits
for a decision). ``server.agent`` is that agent: put it in the notebook to decide its calls.
The client reads a decided call's outcome with the ``loom_call_status`` tool.

As a client, an MCP server's tools become a connector::

    from loom_nb.mcp import mcp_tools

    files = mcp_tools(command=["python", "-m", "my_server"], name="files")
    agent = define_agent(name="a", model=..., connectors=[files])

Names are prefixed (``files_read``); tools without the read-only hint wait for approval
(``approve="writes"``; or ``"all"``, ``"none"``, a set of tool names); results reach the model
inside a data block, tabular structured content as DataFrames; errors and timeouts are error
results. The server process stops with ``files.close()``, when the connector is no longer
used, or when Python exits.
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401  (the extra this module needs)
except ImportError:
    from loom_nb._errors import MissingExtra

    raise MissingExtra("mcp", "mcp", "loom_nb.mcp") from None

from loom_nb import _public
from loom_nb.mcp._client import MCPConnector, mcp_tools
from loom_nb.mcp._server import LoomMCPServer, mcp_server

__all__ = ["LoomMCPServer", "MCPConnector", "mcp_server", "mcp_tools"]

_public.publish(__name__, [LoomMCPServer, MCPConnector, mcp_server, mcp_tools])
