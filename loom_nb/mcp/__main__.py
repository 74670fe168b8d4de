"""``python -m loom_nb.mcp MODULE:OBJECT [--http PORT] [--name NAME]``: serve over MCP.

``OBJECT`` is a server made with ``mcp_server(...)``, or a connector or a list of them (served
by an agent named ``--name``, in the store ``LOOM_STORE`` names). Stdio by default; ``--http
PORT`` serves streamable HTTP on 127.0.0.1 only (at ``/mcp``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from loom_nb._errors import UserError
from loom_nb._target import user_object
from loom_nb._tools import Connector
from loom_nb.mcp._server import LoomMCPServer, mcp_server


def served(target: str, name: str | None) -> LoomMCPServer:
    """The server ``MODULE:OBJECT`` names."""
    if ":" not in target:
        raise UserError(f"{target!r}: name what to serve as MODULE:OBJECT, e.g. served:server")
    module, value = user_object(target)
    module_name = module.__name__
    if isinstance(value, LoomMCPServer):
        if name is not None and name != value.name:
            raise UserError(f"{target} is named {value.name!r} already; drop --name")
        return value
    if isinstance(value, Connector) or (
        isinstance(value, Sequence) and value and all(isinstance(c, Connector) for c in value)
    ):
        return mcp_server(connectors=value, name=name or module_name.rpartition(".")[2])
    raise UserError(
        f"{target} is {type(value).__name__}: serve a server made with mcp_server(...), a "
        "connector, or a list of connectors"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loom_nb.mcp", description=__doc__)
    parser.add_argument("target", metavar="MODULE:OBJECT")
    parser.add_argument("--http", type=int, metavar="PORT", help="streamable HTTP on loopback")
    parser.add_argument("--name", help="the agent's name, when OBJECT is connectors")
    args = parser.parse_args(argv)
    try:
        server = served(args.target, args.name)
    except UserError as exc:
        parser.exit(2, f"error: {exc}\n")
    if args.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
