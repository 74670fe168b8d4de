"""Thread storage: loom_nb's SQLite store vs openai-agents' SQLiteSession, LangGraph's
SqliteSaver and a raw sqlite3 floor, in the same run, on files in one temp folder.

Threads of 10, 100, 1,000 and 5,000 messages: user and assistant text of about 300 characters;
every fifth message a tool result holding a 50-row DataFrame. For each length: the median time
to append one more text message, and to load the whole thread with every DataFrame; then file
size per message and the import time of ``loom_nb.sqlite``.
Run: ``python -m bench.bench_store [--quick]``.

Fairness notes (also in bench/README.md):
- every file is in WAL mode with ``synchronous=FULL`` (SQLite's default, which SQLiteSession and
  SqliteSaver keep): a commit is on disk when the call returns;
- the floor is one ``INSERT`` per message into an indexed ``(thread_id, json, frame)`` table:
  the message as JSON, and its DataFrame in a column of its own as plain column lists (with the
  dtypes); its load is one ``SELECT``, ``json.loads`` per row, and a DataFrame built from the
  column lists in bulk (numpy arrays) for every frame;
- SQLiteSession gets the same content as JSON dicts (the frame as the floor's column lists);
  LangGraph gets LangChain messages (the frame as the floor's column lists in the ToolMessage
  artifact), added through a compiled graph with ``graph.update_state`` (one checkpoint per
  step, as a graph saves) and read back with ``graph.get_state``; both build the DataFrames
  on load as the floor does;
- loom_nb's load returns typed messages; ``... + decode every DataFrame`` is what is compared
  (every side parses the same DataFrame column), ``load (frames left encoded)`` is shown too;
- loads are timed as timeit times: after a garbage collection, with the collector paused (the
  process holds every system's data, and a full collection would land on whichever load set
  it off).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

LENGTHS = (10, 100, 1_000, 5_000)
TEXT = ("Open orders above 100 are mostly from the web shop; three are older than a week. " * 4)[
    :300
]


def sample_frame(seed: int) -> Any:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": np.arange(50) + seed * 50,
            "status": rng.choice(["open", "paid", "shipped"], 50),
            "total": rng.uniform(0, 500, 50).round(2),
            "created_at": pd.date_range("2025-01-01", periods=50, freq="h", tz="UTC"),
        }
    )


def conversation(n: int) -> list[Any]:
    """``n`` loom_nb messages: user, assistant, user, assistant + tool call, tool result."""
    from loom_nb import Message, TextPart, ToolCall, ToolResult, Usage
    from loom_nb._render import frame_for_model

    t0 = datetime(2025, 3, 1, tzinfo=timezone.utc)
    out: list[Any] = []
    for i in range(n):
        at = t0 + timedelta(seconds=i)
        kind = i % 5
        if kind in (0, 2):
            out.append(Message("user", [TextPart(TEXT)], created_at=at))
        elif kind == 1:
            out.append(Message("assistant", [TextPart(TEXT)], at, Usage(900, 80, 1), "bench"))
        elif kind == 3:
            call = ToolCall(f"call_{i}", "select", {"table": "orders", "limit": 50})
            out.append(Message("assistant", [TextPart(TEXT[:100]), call], at, Usage(900, 20, 1)))
        else:
            df = sample_frame(i)
            result = ToolResult(f"call_{i - 1}", "select", frame_for_model(df), df)
            out.append(Message("tool", [result], created_at=at))
    return out


def frame_payload(df: Any) -> dict[str, Any]:
    """The floor's DataFrame: column lists and dtypes, times as integers in their unit."""
    import pandas as pd

    values = []
    for name in df.columns:
        col = df[name]
        if pd.api.types.is_datetime64_any_dtype(col.dtype):
            values.append(col.array.asi8.tolist())
        else:
            values.append(col.tolist())
    return {"columns": list(df.columns), "dtypes": [str(t) for t in df.dtypes], "values": values}


def payload_frame(stored: dict[str, Any], rows: int | None = None) -> Any:
    """:func:`frame_payload` back to a DataFrame (its first ``rows`` rows), each column in bulk."""
    import numpy as np
    import pandas as pd

    data = {}
    for name, dtype, values in zip(
        stored["columns"], stored["dtypes"], stored["values"], strict=True
    ):
        head = values if rows is None else values[:rows]
        if dtype.startswith("datetime64"):
            unit, _, zone = dtype[len("datetime64[") : -1].partition(", ")
            times = pd.DatetimeIndex(np.array(head, dtype="int64").view(f"M8[{unit}]"))
            data[name] = times.tz_localize(zone) if zone else times
        elif dtype in ("str", "object"):
            data[name] = pd.array(head, dtype=dtype)
        else:
            data[name] = np.array(head, dtype=dtype)
    return pd.DataFrame(data)


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def file_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


# ---- the systems -----------------------------------------------------------------------------


class Loom:
    name = "loom_nb sqlite_store"

    def __init__(self, path: Path) -> None:
        from loom_nb import Thread
        from loom_nb.sqlite import sqlite_store

        self.store = sqlite_store(path)
        self.thread = Thread(id="bench", agent="bench")
        self.store.save_thread(self.thread)

    def fill(self, messages: list[Any]) -> None:
        for m in messages:
            self.append(m)

    def append(self, message: Any) -> None:
        self.thread.messages.append(message)
        self.thread.updated_at = message.created_at
        self.store.append(self.thread, message)

    def load(self) -> object:
        thread = self.store.load("bench")
        assert thread is not None
        return thread.frames

    def connection(self) -> sqlite3.Connection:
        return self.store._conn

    def load_lazy(self) -> object:
        return self.store.load("bench")

    def close(self) -> None:
        self.store.close()


class Floor:
    name = "raw floor (INSERT / SELECT+loads)"

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute(
            "CREATE TABLE raw (thread_id TEXT NOT NULL, json TEXT NOT NULL, frame TEXT)"
        )
        self.conn.execute("CREATE INDEX raw_thread ON raw (thread_id)")

    def fill(self, messages: list[Any]) -> None:
        for m in messages:
            self.append(m)

    def append(self, message: Any) -> None:
        self.conn.execute(
            "INSERT INTO raw (thread_id, json, frame) VALUES (?, ?, ?)",
            ("bench", *floor_row(message)),
        )

    def connection(self) -> sqlite3.Connection:
        return self.conn

    def load(self) -> object:
        rows = self.conn.execute(
            "SELECT json, frame FROM raw WHERE thread_id = ? ORDER BY rowid", ("bench",)
        ).fetchall()
        return [floor_message(text, frame) for text, frame in rows]

    def close(self) -> None:
        self.conn.close()


def floor_row(message: Any) -> tuple[str, str | None]:
    """A floor's row of a message: its JSON without the DataFrame, and the DataFrame as
    :func:`frame_payload` JSON (None without one)."""
    out = message.to_dict()
    frame = None
    for part, result in zip(out["parts"], message.parts, strict=True):
        if part.pop("data", None) is not None:
            frame = json.dumps(frame_payload(result.data))
    return json.dumps(out), frame


def floor_message(text: str, frame: str | None) -> dict[str, Any]:
    """:func:`floor_row` read back, its DataFrame built (as every system's load does)."""
    message: dict[str, Any] = json.loads(text)
    if frame is not None:
        message["frame"] = payload_frame(json.loads(frame))
    return message


def session_item(message: Any) -> dict[str, Any]:
    """The same content in the OpenAI Responses item shape SQLiteSession stores."""
    if message.role == "tool":
        r = message.tool_results[0]
        return {
            "type": "function_call_output",
            "call_id": r.call_id,
            "output": r.content,
            "data": frame_payload(r.data),
        }
    if message.tool_calls:
        c = message.tool_calls[0]
        return {
            "type": "function_call",
            "call_id": c.id,
            "name": c.name,
            "arguments": json.dumps(c.arguments),
        }
    return {"role": message.role, "content": message.text}


class Session:
    name = "openai-agents SQLiteSession"

    def __init__(self, path: Path) -> None:
        from agents import SQLiteSession

        self.session = SQLiteSession("bench", path)
        self.loop = asyncio.new_event_loop()

    def fill(self, messages: list[Any]) -> None:
        items = [session_item(m) for m in messages]
        for i in range(0, len(items), 500):
            self.loop.run_until_complete(self.session.add_items(items[i : i + 500]))

    def append(self, message: Any) -> None:
        self.loop.run_until_complete(self.session.add_items([session_item(message)]))

    def load(self) -> object:
        items = self.loop.run_until_complete(self.session.get_items())
        for item in items:
            if "data" in item:
                item["data"] = payload_frame(item["data"])  # type: ignore[typeddict-unknown-key]
        return items

    def close(self) -> None:
        self.session.close()
        self.loop.close()


def langchain_message(message: Any) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    if message.role == "tool":
        r = message.tool_results[0]
        return ToolMessage(r.content, tool_call_id=r.call_id, artifact=frame_payload(r.data))
    if message.role == "user":
        return HumanMessage(message.text)
    calls = [{"name": c.name, "args": c.arguments, "id": c.id} for c in message.tool_calls]
    return AIMessage(message.text, tool_calls=calls)


class LangGraph:
    """A compiled LangGraph graph (the prebuilt ``MessagesState``) with a ``SqliteSaver``:
    messages go in with ``update_state`` and come back with ``get_state``, as a user's code
    adds to and reads a thread."""

    name = "LangGraph SqliteSaver (graph)"

    def __init__(self, path: Path) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import START, MessagesState, StateGraph

        conn = sqlite3.connect(path, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        saver = SqliteSaver(conn)
        builder = StateGraph(MessagesState)
        builder.add_node("agent", lambda state: {})
        builder.add_edge(START, "agent")
        self.graph = builder.compile(checkpointer=saver)
        self.saver = saver
        self.config: Any = {"configurable": {"thread_id": "bench"}}

    def fill(self, messages: list[Any]) -> None:
        batch = [langchain_message(m) for m in messages]
        self.graph.update_state(self.config, {"messages": batch})

    def append(self, message: Any) -> None:
        self.graph.update_state(self.config, {"messages": [langchain_message(message)]})

    def load(self) -> object:
        messages = self.graph.get_state(self.config).values["messages"]
        return [payload_frame(m.artifact) for m in messages if getattr(m, "artifact", None)]

    def close(self) -> None:
        self.saver.conn.close()


SYSTEMS: list[type[Any]] = [Floor, Loom, Session, LangGraph]


# ---- the run ---------------------------------------------------------------------------------


# ---- a whole run, saved ---------------------------------------------------------------------


def new_thread_runs(folder: Path, runs: int, rounds: int) -> dict[str, list[float]]:
    """Seconds per new-thread run with one tool call (``bench_agent``'s: an instant model asks
    for ``lookup``, then answers), saved to a SQLite file in WAL with ``synchronous=FULL``:
    loom_nb's ``sqlite_store`` (each message durable as it completes, under the thread's
    lease) vs pydantic-ai plus one autocommitted row of the run's messages at its end (one
    fsync). The sides alternate ``rounds`` times, so the machine's fsync noise hits both."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from bench.bench_agent import lookup
    from loom_nb import FunctionModel as LoomFunctionModel
    from loom_nb import Reply, define_agent, memory_store, tool
    from loom_nb.models import ModelRequest
    from loom_nb.sqlite import sqlite_store

    memory = memory_store()

    answer = "It is 21°C and clear in Oslo."

    def loom_model(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "tool":
            return Reply(answer)
        return Reply("", [("lookup", {"city": "Oslo"})])

    store = sqlite_store(folder / "runs-loom.db")
    loom = define_agent(
        name="bench", model=LoomFunctionModel(loom_model), tools=[tool(lookup)], store=store
    )
    unsaved = define_agent(  # the same run in memory: what the saving costs is the difference
        name="bench", model=LoomFunctionModel(loom_model), tools=[tool(lookup)], store=memory
    )

    def pydantic_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if messages[-1].parts[-1].part_kind == "tool-return":
            return ModelResponse(parts=[TextPart(answer)])
        return ModelResponse(parts=[ToolCallPart("lookup", {"city": "Oslo"})])

    pydantic = Agent(FunctionModel(pydantic_model))
    pydantic.tool_plain(lookup)
    row = sqlite3.connect(folder / "runs-pydantic.db", isolation_level=None)
    row.execute("PRAGMA journal_mode=WAL")
    row.execute("PRAGMA synchronous=FULL")
    row.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, messages TEXT NOT NULL)")

    async def loom_run() -> None:
        result = await loom.run("Weather in Oslo?")
        assert result.output == answer and len(result.new_messages) == 4

    async def pydantic_run() -> None:
        result = await pydantic.run("Weather in Oslo?")
        assert result.output == answer
        row.execute("INSERT INTO runs (messages) VALUES (?)", (result.all_messages_json(),))

    async def memory_run() -> None:
        result = await unsaved.run("Weather in Oslo?")
        assert result.output == answer

    async def row_alone() -> None:  # the row pydantic-ai's side writes, without its run
        row.execute("INSERT INTO runs (messages) VALUES (?)", (sample,))

    sample = b""
    sides = {
        "loom_nb sqlite_store": loom_run,
        "pydantic-ai + one SQLite row": pydantic_run,
        "  loom_nb memory_store (no saving)": memory_run,
        "  the SQLite row alone": row_alone,
    }
    times: dict[str, list[float]] = {name: [] for name in sides}

    async def measure() -> None:
        nonlocal sample
        sample = (await pydantic.run("Weather in Oslo?")).all_messages_json()
        for run in sides.values():  # warm up
            for _ in range(5):
                await run()
        for _ in range(rounds):
            for name, run in sides.items():
                for _ in range(max(runs // rounds, 1)):
                    start = time.perf_counter()
                    await run()
                    times[name].append(time.perf_counter() - start)

    asyncio.run(measure())
    store.close()
    row.close()
    return times


def report_runs(times: dict[str, list[float]]) -> None:
    medians = {name: statistics.median(t) * 1000 for name, t in times.items()}
    loom, pydantic, *_ = medians.values()
    runs = len(next(iter(times.values())))
    print(f"\na new-thread run with one tool call, saved (WAL, synchronous=FULL), {runs} runs each")
    print(f"{'':38}{'median ms':>12}{'p90 ms':>12}")
    for name, t in times.items():
        p90 = statistics.quantiles(t, n=10)[-1] * 1000 if len(t) > 1 else t[0] * 1000
        print(f"{name:38}{medians[name]:12.3f}{p90:12.3f}")
    print(f"{'  loom / pydantic-ai + one row':38}{loom / pydantic:11.2f}x")


def import_ms(statement: str, repeat: int, after: str = "") -> float:
    timed = ["import time", "t = time.perf_counter()", statement, "print(time.perf_counter() - t)"]
    code = "\n".join([after, *timed])
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(repeat)
    ]
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, up to 1,000")
    parser.add_argument(
        "--no-fsync",
        action="store_true",
        help="loom_nb and the floor only, with synchronous=NORMAL: the software's own cost",
    )
    parser.add_argument(
        "--runs", type=int, default=None, help="new-thread runs per side (default 300; quick 40)"
    )
    parser.add_argument(
        "--runs-only", action="store_true", help="only the new-thread runs, saved (a minute)"
    )
    args = parser.parse_args()
    if args.runs is None:
        args.runs = 40 if args.quick else 300
    if args.runs_only:
        with tempfile.TemporaryDirectory() as tmp:
            report_runs(new_thread_runs(Path(tmp), args.runs, 1 if args.quick else 5))
        return
    lengths = LENGTHS[:3] if args.quick else LENGTHS
    appends, loads = (10, 3) if args.quick else (60, 7)
    systems = [Floor, Loom] if args.no_fsync else SYSTEMS
    base = conversation(max(lengths) + appends * 2)
    extra = [m for m in base if m.role == "user"][:appends]

    results: dict[str, dict[int, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in lengths:
            opened = []
            for system in systems:
                path = Path(tmp) / f"{system.__name__}-{n}.db"
                s = system(path)
                if args.no_fsync:
                    s.connection().execute("PRAGMA synchronous = NORMAL")
                s.fill(base[:n])
                row = results.setdefault(system.name, {}).setdefault(n, {})
                row["size"] = file_bytes(path) / n
                opened.append((s, row))
            # Round-robin, so that the shared machine's noise (fsync latency above all) falls
            # on every system alike.
            times: dict[str, list[float]] = {system.name: [] for system in systems}
            for m in extra:
                for s, _ in opened:
                    start = time.perf_counter()
                    s.append(m)
                    times[s.name].append(time.perf_counter() - start)
            for _ in range(loads):
                for s, _ in opened:
                    # As timeit does: after a collection, with the collector paused. One
                    # process holds all four systems' data, and whichever load happens to set
                    # off a full collection would pay for every system's objects.
                    gc.collect()
                    gc.disable()
                    start = time.perf_counter()
                    s.load()
                    elapsed = time.perf_counter() - start
                    gc.enable()
                    times[s.name + " load"] = [*times.get(s.name + " load", []), elapsed]
            for s, row in opened:
                row["append"] = statistics.median(times[s.name]) * 1000
                row["load"] = statistics.median(times[s.name + " load"]) * 1000
                if isinstance(s, Loom):
                    row["load_lazy"] = median_ms(s.load_lazy, max(3, loads // 2))
                s.close()
                print(
                    f"  {s.name:36} n={n:5}: append {row['append']:8.3f} ms, "
                    f"load {row['load']:9.2f} ms",
                    file=sys.stderr,
                )
    report(results, lengths)
    with tempfile.TemporaryDirectory() as tmp:
        report_runs(new_thread_runs(Path(tmp), args.runs, 1 if args.quick else 5))
    core = import_ms("import loom_nb", 9)
    store = import_ms("import loom_nb.sqlite", 9)
    alone = import_ms("import loom_nb.sqlite", 9, after="import loom_nb")
    print(
        f"\nimport time, median of 9 fresh processes: loom_nb {core:.0f} ms; loom_nb.sqlite "
        f"{store:.0f} ms in all, {alone:.1f} ms on top of an imported loom_nb"
    )


def report(results: dict[str, dict[int, dict[str, float]]], lengths: tuple[int, ...]) -> None:
    floor = results[Floor.name]
    session = results.get(Session.name)
    print("\nappend one message (median ms)")
    print(f"{'':38}" + "".join(f"{n:>12,}" for n in lengths))
    for name, rows in results.items():
        print(f"{name:38}" + "".join(f"{rows[n]['append']:12.3f}" for n in lengths))
    for name in (Loom.name,):
        print(
            f"{'  loom / floor':38}"
            + "".join(f"{results[name][n]['append'] / floor[n]['append']:11.2f}x" for n in lengths)
        )
        if session:
            print(
                f"{'  loom / SQLiteSession':38}"
                + "".join(
                    f"{results[name][n]['append'] / session[n]['append']:11.2f}x" for n in lengths
                )
            )
    print("\nload the whole thread and every DataFrame in it (median ms)")
    print(f"{'':38}" + "".join(f"{n:>12,}" for n in lengths))
    for name, rows in results.items():
        print(f"{name:38}" + "".join(f"{rows[n]['load']:12.2f}" for n in lengths))
        if name == Loom.name:
            print(
                f"{'  load (frames left encoded)':38}"
                + "".join(f"{rows[n]['load_lazy']:12.2f}" for n in lengths)
            )
    print(
        f"{'  loom / floor':38}"
        + "".join(f"{results[Loom.name][n]['load'] / floor[n]['load']:11.2f}x" for n in lengths)
    )
    if session:
        print(
            f"{'  loom / SQLiteSession':38}"
            + "".join(
                f"{results[Loom.name][n]['load'] / session[n]['load']:11.2f}x" for n in lengths
            )
        )
    print("\nfile size per message (bytes, after a WAL checkpoint)")
    print(f"{'':38}" + "".join(f"{n:>12,}" for n in lengths))
    for name, rows in results.items():
        print(f"{name:38}" + "".join(f"{rows[n]['size']:12,.0f}" for n in lengths))
    print(
        f"{'  loom / floor':38}"
        + "".join(f"{results[Loom.name][n]['size'] / floor[n]['size']:11.2f}x" for n in lengths)
    )


if __name__ == "__main__":
    main()
