"""Exporting a 200-call thread as a notebook (goal: at most 1 s, and 3x its floor), medians.

The thread: a frames agent (a 10,000-row orders frame) that made 100 calls over 25 turns:
selects with filters, orders and pages, aggregates grouped by a column, a write the user
rejected every tenth call. Timed: ``agent.export(thread_id, path)`` as a user runs it (the
thread loaded from its SQLite file, every call's code written, the file saved) to ``.ipynb``
(nbformat) and to ``.py`` (jupytext); and the cells alone (the code of every call). The
floor, timed alternating with the ``.ipynb`` export, is the exporter a skilled user would
write for these three tools instead (``hand_export``): load the thread from the store, a
markdown cell per message and a code cell per call written from its arguments with
f-strings, the cells made with ``nbformat.from_dict`` (no validation per cell) and written
with ``nbformat.writes`` (one validation). It writes the same cells, of about the same code;
not what loom_nb adds: the words and counts of each call, the escaping of the model's and the
data's text, the frame's dtypes in each value, the check of the file read back.
Run: ``python -m bench.bench_export [--calls N] [--runs N]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def calls(n: int) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    statuses = ["open", "paid", "shipped", "cancelled"]
    for i in range(n):
        status = statuses[i % 4]
        if i % 10 == 9:
            out.append(
                (
                    "frames_update",
                    {
                        "table": "orders",
                        "values": {"status": "flagged"},
                        "filters": [{"column": "id", "op": "eq", "value": i}],
                    },
                )
            )
        elif i % 3 == 2:
            out.append(
                (
                    "frames_aggregate",
                    {
                        "table": "orders",
                        "group_by": ["status"],
                        "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "total"}],
                        "filters": [{"column": "total", "op": "gt", "value": i}],
                        "order": [{"column": "sum_total", "desc": True}],
                    },
                )
            )
        else:
            out.append(
                (
                    "frames_select",
                    {
                        "table": "orders",
                        "filters": [
                            {"column": "status", "op": "eq", "value": status},
                            {"column": "total", "op": "gt", "value": i},
                            {"column": "customer", "op": "like", "value": f"c0{i % 10}%"},
                        ],
                        "order": [{"column": "total", "desc": True}],
                        "limit": 20,
                        "offset": i % 3,
                    },
                )
            )
    return out


_COMPARE = {"eq": "==", "gt": ">"}


def _hand_mask(filters: list[dict[str, Any]]) -> str:
    terms = []
    for f in filters:
        column = f"orders[{f['column']!r}]"
        if f["op"] == "like":  # the bench's patterns are all prefixes
            terms.append(f"{column}.str.startswith({f['value'][:-1]!r}, na=False)")
        else:
            terms.append(f"({column} {_COMPARE[f['op']]} {f['value']!r})")
    return " & ".join(terms)


def _hand_code(name: str, args: dict[str, Any], result: str) -> str:
    """The pandas of one call, as a user writes it for these three tools."""
    mask = _hand_mask(args["filters"])
    if name == "frames_update":
        column, value = next(iter(args["values"].items()))
        return f"# orders.loc[{mask}, {column!r}] = {value!r}"
    order = args["order"][0]
    if name == "frames_aggregate":
        return (
            f"matched = orders[{mask}]\n"
            f"groups = matched.groupby({args['group_by']!r}, observed=True)\n"
            f"{result} = (\n"
            '    pd.DataFrame({"count": groups.size(), "sum_total": groups["total"].sum()})\n'
            f"    .reset_index().sort_values({order['column']!r}, ascending=False)\n"
            ")\n"
            f"{result}"
        )
    start = args.get("offset", 0)
    return (
        f"mask = {mask}\n"
        f"{result} = orders[mask].sort_values({order['column']!r}, ascending=False)"
        f".iloc[{start}:{start + args['limit']}]\n"
        f"{result}"
    )


def hand_export(store: Any, thread_id: str, path: Path) -> int:
    """The floor: the thread as a notebook, by hand (see the module's docstring); returns the
    number of cells."""
    import nbformat

    thread = store.load(thread_id)
    cells = [("markdown", f"# {thread.title}"), ("code", "import pandas as pd")]
    number = 0
    for message in thread.messages:
        if message.role == "user" and message.text:
            cells.append(("markdown", f"**You:**\n\n{message.text}"))
        elif message.role == "assistant":
            if message.text:
                cells.append(("markdown", f"**{thread.agent}:**\n\n{message.text}"))
            for call in message.tool_calls:
                number += 1
                code = _hand_code(call.name, call.arguments, f"result_{number}")
                cells.append(("code", f"# Call {number} · {call.name}\n{code}"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.from_dict(
            {"id": f"c{i}", "cell_type": "markdown", "source": text, "metadata": {}}
            if kind == "markdown"
            else {
                "id": f"c{i}",
                "cell_type": "code",
                "source": text,
                "metadata": {},
                "execution_count": None,
                "outputs": [],
            }
        )
        for i, (kind, text) in enumerate(cells)
    ]
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    return len(cells)


def _code_chars(path: Path) -> int:
    import nbformat

    cells = nbformat.read(path, as_version=4).cells
    return sum(len(c.source) for c in cells if c.cell_type == "code")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()

    from bench.bench_frames import make_orders
    from loom_nb import ReplayModel, Reply, define_agent
    from loom_nb._export import thread_cells
    from loom_nb.frames import frame_tools
    from loom_nb.sqlite import sqlite_store

    todo = calls(args.calls)
    replies: list[Reply | str] = [
        Reply(f"Step {i // 4 + 1}.", todo[i : i + 4]) for i in range(0, len(todo), 4)
    ]
    replies.append("Done.")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        orders = make_orders(10_000)
        agent = define_agent(
            name="analyst",
            model=ReplayModel(replies),
            connectors=[frame_tools({"orders": {"frame": orders, "write": True}}, max_rows=20)],
            store=sqlite_store(folder / "loom.db"),
            max_steps=len(replies) + 1,
        )
        result = agent.run_sync("Explore the orders.")
        while result.status == "awaiting_approval":
            result = agent.resume_sync(result.thread_id, {p.call_id: False for p in result.pending})
        thread_id = result.thread_id
        made = sum(len(m.tool_calls) for m in result.thread.messages)
        assert made == args.calls, made

        def timed(fn: Any) -> float:
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            return statistics.median(times) * 1000

        thread = agent.thread(thread_id)
        store = agent.store
        exported = thread_cells(thread, agent.tools).cells
        by_hand = hand_export(store, thread_id, folder / "floor.ipynb")
        assert by_hand == len(exported), (by_hand, len(exported))  # the same cells

        def floor() -> None:
            hand_export(store, thread_id, folder / "floor.ipynb")

        side: dict[str, list[float]] = {"export": [], "floor": []}
        cpu: dict[str, list[float]] = {"export": [], "floor": []}
        for _ in range(args.runs):  # alternating, so the machine's noise falls on both alike
            for name, fn in (
                ("export", lambda: agent.export(thread_id, folder / "t.ipynb")),
                ("floor", floor),
            ):
                # each side starts from a collected heap: the other side's garbage (and a
                # collection it makes due) is not charged to it
                gc.collect()
                start, start_cpu = time.perf_counter(), time.process_time()
                fn()
                side[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
        export_ms, floor_ms = (statistics.median(side[k]) * 1000 for k in ("export", "floor"))
        export_cpu, floor_cpu = (statistics.median(cpu[k]) * 1000 for k in ("export", "floor"))
        rows = [
            ("agent.export -> .ipynb", export_ms),
            ("floor: hand_export (see above)", floor_ms),
            ("agent.export -> .py", timed(lambda: agent.export(thread_id, folder / "t.py"))),
            ("cells only (frames decoded)", timed(lambda: thread_cells(thread, agent.tools))),
        ]
        code = [c.source for c in exported if c.kind == "code"]
        print(f"export of a {made}-call thread ({len(exported)} cells); median of {args.runs} runs")
        for label, ms in rows:
            print(f"{label:<34}{ms:>9.1f} ms")
        print(
            f"the same in CPU time (the machine's other work left out): {export_cpu:.1f} ms vs "
            f"{floor_cpu:.1f} ms, x{export_cpu / floor_cpu:.2f}"
        )
        print(
            f"code written: {sum(map(len, code)):,} characters by agent.export, "
            f"{_code_chars(folder / 'floor.ipynb'):,} by hand_export"
        )
        print(f"ratio agent.export -> .ipynb / floor: x{export_ms / floor_ms:.2f} (goal: x3)")
        print("goal: at most 1000 ms for agent.export")
        agent.store.close()


if __name__ == "__main__":
    main()
