"""The agents the HTTP tests serve, on a store they are given, with a scripted model.

A prompt starting ``table`` makes the agent fetch a frame of every dtype (more rows than a
thread page holds); ``write TEXT`` asks to write a note, which waits for approval and, once
approved, appends a line to the file it was given (so executions are counted across
processes); ``ask TEXT`` asks the user TEXT with the choices yes / no; anything else is
echoed. Child processes import it too.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
from typing import Any

from loom_nb import Agent, FunctionModel, ModelRequest, Reply, Store, define_agent, tool

ROWS = 120


def frame() -> Any:
    import numpy as np
    import pandas as pd

    n = ROWS
    return pd.DataFrame(
        {
            "id": np.arange(n, dtype="int64"),
            "total": [float(i) + 0.5 if i % 7 else float("nan") for i in range(n)],
            "count": pd.array([i if i % 5 else None for i in range(n)], dtype="Int64"),
            "name": [f"<b onmouseover=alert({i})>row {i}</b>" for i in range(n)],
            "status": pd.Categorical(["paid" if i % 2 else "open" for i in range(n)]),
            "paid": [bool(i % 2) for i in range(n)],
            "at": pd.date_range("2026-01-01", periods=n, freq="h", tz="UTC"),
            "day": [dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in range(n)],
            "price": [decimal.Decimal(f"{i}.10") for i in range(n)],
            "wait": pd.to_timedelta(list(range(n)), unit="s"),
        }
    )


def _script(request: ModelRequest) -> str | Reply:
    last = request.messages[-1]
    if last.role == "user":
        text = last.text
        if text.startswith("table"):
            return Reply("Fetching.", tool_calls=[("orders", {"limit": ROWS})])
        if text.startswith("ask "):  # a question (ask_user), answered yes or no
            question = {"question": text[4:], "choices": ["yes", "no"]}
            return Reply("", tool_calls=[("ask_user", question)])
        if text.startswith("write "):
            return Reply("Writing.", tool_calls=[("write_note", {"text": text[6:]})])
        return f"You said: {text}"
    result = last.tool_results[0]
    return f"Done: {result.content[:40]}"


def _tools(writes: str | None) -> list[Any]:
    @tool(describe=lambda args: f"the first {args['limit']} orders")
    def orders(limit: int) -> Any:
        """The orders."""
        return frame().head(limit)

    @tool(needs_approval=True, preview=lambda args: {"will_write": args["text"]})
    def write_note(text: str) -> str:
        """Write a note."""
        path = writes or os.environ["LOOM_TEST_WRITES"]
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()} {text}\n")
            out.flush()
            os.fsync(out.fileno())
        return "written"

    return [orders, write_note]


def user_of(context: Any) -> str | None:
    """Over HTTP, the user a request names in its ``X-User`` header (a stand-in for a session
    cookie); in a kernel, ``context={"user": ...}``."""
    if "request" in context:
        return context["request"].headers.get("x-user") or None
    return context.get("user")


def make(store: Store | None = None, writes: str | None = None) -> tuple[Agent, Agent]:
    """``notes`` (no auth: threads private by their ids) and ``team`` (threads per user)."""
    notes = define_agent(
        name="notes", model=FunctionModel(_script), tools=_tools(writes), store=store
    )
    team = define_agent(
        name="team",
        model=FunctionModel(_script),
        tools=_tools(writes),
        store=store,
        auth=user_of,
    )
    return notes, team
