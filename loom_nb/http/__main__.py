"""``python -m loom_nb.http MODULE [--host H] [--port P]``: serve the agents a module defines.

``MODULE`` is an importable module (``analytics.agents``) or ``module:name`` naming one agent or
a list of them; without ``:name`` every agent the module defines at its top level is served.
The same app, for uvicorn's own options: ``uvicorn --factory 'loom_nb.http.__main__:app'`` with
``LOOM_AGENTS=MODULE`` set.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from loom_nb._agent import Agent
from loom_nb._errors import UserError
from loom_nb._target import user_object
from loom_nb.http import thread_app

#: The variable :func:`app` reads MODULE from.
AGENTS_VARIABLE = "LOOM_AGENTS"


def agents_in(spec: str) -> list[Agent]:
    """The agents ``spec`` names (see the module's docs)."""
    module, found = user_object(spec)
    if found is not None:
        agents = [found] if isinstance(found, Agent) else list(found)
    else:
        agents = [v for v in vars(module).values() if isinstance(v, Agent)]
    if not agents:
        raise UserError(f"{spec!r} defines no agent (define_agent(...) at its top level)")
    return agents


def app():  # type: ignore[no-untyped-def]
    """The app for ``uvicorn --factory``: the agents of ``LOOM_AGENTS``."""
    spec = os.environ.get(AGENTS_VARIABLE)
    if not spec:
        raise UserError(f"set {AGENTS_VARIABLE}=module (or module:name) to name the agents")
    return thread_app(agents_in(spec))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m loom_nb.http", description="Serve agents' saved threads over HTTP."
    )
    parser.add_argument("module", help="module (or module:name) that defines the agents")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    try:
        import uvicorn
    except ImportError:
        from loom_nb._errors import MissingExtra

        raise MissingExtra("uvicorn", "http", "python -m loom_nb.http") from None
    try:
        served = thread_app(agents_in(args.module))
    except UserError as exc:
        parser.exit(2, f"error: {exc}\n")
    uvicorn.run(served, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
