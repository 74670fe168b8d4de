"""Widget benchmarks: rendering a saved 1,000-message thread, and streaming a 2,000-token reply.

Run: ``.venv/bin/python -m bench.bench_widget`` (``--runs N``, ``--quick``, ``--json FILE``,
``--browser`` to also time ``%loom resume`` in JupyterLab + Debian's chromium).

(a) render: a saved thread of 1,000 messages (user text, assistant text with tool calls, tool
    results holding 50-row DataFrames) is loaded from a SQLite store and rendered into the
    notebook widget in-process. Every widget's comm is replaced by a counter, so we also count
    the comm messages (and bytes) the same render would send to a real frontend. The same
    thread is then shown in a real kernel with ``%loom resume ID`` and the comm messages on
    iopub are counted; with ``--browser``, also in JupyterLab, counting the assistant
    messages that reached the page (JupyterLab drops iopub messages above 1,000/s).
(b) stream: in a real kernel (jupyter_client), ``%%loom`` streams one reply of 2,000 words
    (one text delta each) from a ReplayModel. We count the comm messages on iopub and time the
    cell to the end; the baseline, measured in the same kernel and the same run, streams the
    same reply through ``agent.run_sync(on_event=...)`` setting an ``ipywidgets.HTML`` value on
    every delta (what a naive widget does).

Medians over ``--runs`` runs. Numbers depend on the machine; compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------------------------
# A saved thread of N messages
# --------------------------------------------------------------------------------------------


def make_frame(rows: int, seed: int) -> Any:
    import pandas as pd

    return pd.DataFrame(
        {
            "id": range(seed * rows, seed * rows + rows),
            "status": ["open" if (i + seed) % 3 else "shipped" for i in range(rows)],
            "total": [round(10.5 + ((i * 37 + seed) % 400) * 1.25, 2) for i in range(rows)],
            "customer": [f"customer {(i * 7 + seed) % 97}" for i in range(rows)],
            "created_at": pd.date_range("2024-01-01", periods=rows, freq="h", tz="UTC"),
        }
    )


def make_thread(messages: int = 1000, rows: int = 50) -> Any:
    """A thread with ``messages`` messages in rounds of four: the user asks; the assistant
    says something and calls a tool; the tool returns a ``rows``-row DataFrame; the assistant
    answers in a paragraph of markdown."""
    from loom_nb import Message, TextPart, Thread, ToolCall, ToolResult, Usage
    from loom_nb._messages import new_call_id, new_thread_id
    from loom_nb._render import frame_for_model

    thread = Thread(id=new_thread_id(), agent="bench", title="A long analysis")
    i = 0
    while len(thread.messages) < messages:
        call = ToolCall(new_call_id(), "orders_select", {"status": "open", "limit": rows})
        frame = make_frame(rows, i)
        batch = [
            Message.user(f"Round {i}: which orders above {100 + i} are still open?"),
            Message(
                "assistant",
                [TextPart(f"Let me query the **orders** table (round {i})."), call],
                usage=Usage(1200 + i, 40, 1),
                model="test:bench",
            ),
            Message("tool", [ToolResult(call.id, call.name, frame_for_model(frame), frame)]),
            Message(
                "assistant",
                [
                    TextPart(
                        f"I found **{rows} open orders** in round {i}. The largest total is "
                        f"{frame['total'].max():.2f}; most are from `customer {i % 97}`.\n\n"
                        "- open orders are spread evenly over the week\n"
                        "- nothing looks unusual\n"
                    )
                ],
                usage=Usage(2400 + i, 120, 1),
                model="test:bench",
            ),
        ]
        thread.messages.extend(batch[: messages - len(thread.messages)])
        i += 1
    return thread


def open_store(path: Path) -> Any:
    """The SQLite store when it exists in this checkout, else the memory store."""
    try:
        from loom_nb.sqlite import sqlite_store
    except ImportError:
        from loom_nb import memory_store

        return memory_store(), "memory"
    return sqlite_store(str(path)), "sqlite"


def save_thread(store: Any, thread: Any) -> None:
    store.save_thread(thread)
    for m in thread.messages:
        store.append(thread, m)
    store.save_thread(thread)


# --------------------------------------------------------------------------------------------
# Counting comm messages without a kernel
# --------------------------------------------------------------------------------------------


@dataclass
class CommTally:
    messages: Counter[str] = field(default_factory=Counter)
    bytes: int = 0

    @property
    def total(self) -> int:
        return sum(self.messages.values())


@contextmanager
def counting_comms() -> Iterator[CommTally]:
    """Replace ``comm.create_comm`` (what ipywidgets calls) by comms that count what they
    would publish: one ``comm_open`` per widget, one ``comm_msg`` per state update."""
    import comm
    from comm.base_comm import BaseComm

    tally = CommTally()

    class CountingComm(BaseComm):  # type: ignore[misc]
        def publish_msg(
            self,
            msg_type: str,
            data: Any = None,
            metadata: Any = None,
            buffers: Any = None,
            **keys: Any,
        ) -> None:
            tally.messages[msg_type] += 1
            tally.bytes += len(json.dumps(data or {}, default=str))
            tally.bytes += sum(len(b) for b in buffers or ())

    original = comm.create_comm
    comm.create_comm = CountingComm
    try:
        yield tally
    finally:
        comm.create_comm = original


# --------------------------------------------------------------------------------------------
# A real kernel
# --------------------------------------------------------------------------------------------


@dataclass
class CellRun:
    seconds: float
    iopub: Counter[str]
    comm_bytes: int
    stdout: str
    error: str | None

    @property
    def comm_messages(self) -> int:
        return sum(n for t, n in self.iopub.items() if t.startswith("comm_"))


class Kernel:
    """An ipykernel started with jupyter_client, this checkout on its path."""

    def __init__(self, workdir: Path) -> None:
        from jupyter_client.manager import KernelManager

        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        env["IPYTHONDIR"] = str(workdir / "ipython")
        # IPC sockets in the work dir: local only, and no "TCP without encryption" warning.
        self.km = KernelManager(kernel_name="python3", transport="ipc", ip=str(workdir / "kernel"))
        self.km.start_kernel(cwd=str(workdir), env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)

    def run(self, code: str, timeout: float = 600) -> CellRun:
        """Execute ``code``; collect iopub until the kernel is idle for it."""
        kc = self.kc
        while True:  # drop what earlier cells left behind
            try:
                kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                break
        start = time.perf_counter()
        msg_id = kc.execute(code, store_history=False)
        counts: Counter[str] = Counter()
        comm_bytes = 0
        out: list[str] = []
        error = None
        deadline = start + timeout
        while True:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.perf_counter()))
            kind = msg["msg_type"]
            counts[kind] += 1
            if kind.startswith("comm_"):
                comm_bytes += len(json.dumps(msg["content"], default=str))
                comm_bytes += sum(len(b) for b in msg.get("buffers") or ())
            parent = msg["parent_header"].get("msg_id")
            if kind == "stream" and parent == msg_id:
                out.append(msg["content"]["text"])
            if kind == "error" and parent == msg_id:
                error = "\n".join(msg["content"]["traceback"])
            if (
                kind == "status"
                and parent == msg_id
                and (msg["content"]["execution_state"] == "idle")
            ):
                break
        seconds = time.perf_counter() - start
        return CellRun(seconds, counts, comm_bytes, "".join(out), error)

    def check(self, code: str) -> CellRun:
        result = self.run(code)
        if result.error:
            raise RuntimeError(f"cell failed:\n{code}\n{result.error}")
        return result

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# --------------------------------------------------------------------------------------------
# (b) A streamed 2,000-token reply in a real kernel
# --------------------------------------------------------------------------------------------


def long_reply(words: int) -> str:
    """``words`` words of markdown-ish prose; ReplayModel streams one word per delta."""
    vocabulary = [
        "orders",
        "revenue",
        "week",
        "customers",
        "open",
        "shipped",
        "totals",
        "increased",
        "while",
        "returns",
        "stayed",
        "flat",
        "across",
        "regions",
        "and",
        "the",
        "**largest**",
        "accounts",
        "grew",
        "steadily",
    ]
    out = []
    for i in range(words):
        word = vocabulary[i % len(vocabulary)]
        out.append(word + ("\n\n" if i % 60 == 59 else " "))
    return "".join(out).rstrip() + "."


SETUP = """
import ipywidgets as widgets
from IPython.display import display
from loom_nb import ReplayModel, TextDelta, define_agent
%load_ext loom_nb
REPLY = {reply!r}
DELAY = {delay!r}
"""

#: The naive baseline: one widget update (the whole text so far) per delta.
BASELINE = """
naive = define_agent(name="naive", model=ReplayModel([REPLY], delay=DELAY))
html = widgets.HTML()
display(html)
parts = []
def on_event(event):
    if isinstance(event, TextDelta):
        parts.append(event.text)
        html.value = "".join(parts)
result = naive.run_sync("Write the long report.", on_event=on_event)
print("WORDS", len(result.output.split()), "SHOWN", len(html.value.split()))
"""

#: The product: the same reply streamed by %%loom into its widget.
LOOM_AGENT = """
writer = define_agent(name="writer", model=ReplayModel([REPLY], delay=DELAY))
"""
LOOM_CELL = """%%loom writer --new
Write the long report.
"""
#: What the widget shows at the end, and how many streamed updates it sent.
LOOM_CHECK = """
import re as _re
import loom_nb.notebook as _nb
_view = _nb.session().last_view
_shown = _re.sub(r"<[^>]*>", " ", _view.body.children[-1].value)  # the reply's HTML, as text
print("WORDS", len(writer.thread(_view.thread_id).last_text.split()),
      "SHOWN", len(_shown.split()), "UPDATES", _view.stream_updates)
"""


@dataclass
class StreamResult:
    variant: str
    seconds: list[float] = field(default_factory=list)
    comm_messages: list[int] = field(default_factory=list)
    comm_bytes: list[int] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "runs": len(self.seconds),
            "median_seconds": round(median(self.seconds), 3),
            "median_comm_messages": median([float(n) for n in self.comm_messages]),
            "median_comm_bytes": median([float(n) for n in self.comm_bytes]),
            "last_check": self.checks[-1] if self.checks else "",
        }


def bench_stream(runs: int, words: int, delay: float, workdir: Path) -> list[StreamResult]:
    """Stream a ``words``-word reply ``runs`` times with %%loom and with the naive baseline,
    alternating, in one kernel."""
    kernel = Kernel(workdir)
    loom, naive = StreamResult("%%loom widget"), StreamResult("naive: HTML.value per delta")
    try:
        kernel.check(SETUP.format(reply=long_reply(words), delay=delay))
        for _ in range(runs):
            kernel.check(LOOM_AGENT)
            run = kernel.check(LOOM_CELL)
            loom.seconds.append(run.seconds)
            loom.comm_messages.append(run.comm_messages)
            loom.comm_bytes.append(run.comm_bytes)
            loom.checks.append(kernel.check(LOOM_CHECK).stdout.strip())
            run = kernel.check(BASELINE)
            naive.seconds.append(run.seconds)
            naive.comm_messages.append(run.comm_messages)
            naive.comm_bytes.append(run.comm_bytes)
            naive.checks.append(run.stdout.strip())
    finally:
        kernel.close()
    return [loom, naive]


# --------------------------------------------------------------------------------------------
# (a) Rendering a saved 1,000-message thread
# --------------------------------------------------------------------------------------------


@dataclass
class RenderResult:
    store: str = ""
    load_seconds: list[float] = field(default_factory=list)
    render_seconds: list[float] = field(default_factory=list)
    comm_messages: list[int] = field(default_factory=list)
    comm_bytes: list[int] = field(default_factory=list)
    widgets: list[int] = field(default_factory=list)
    batched_seconds: list[float] = field(default_factory=list)
    batched_comm_messages: list[int] = field(default_factory=list)
    batched_comm_bytes: list[int] = field(default_factory=list)
    kernel_seconds: list[float] = field(default_factory=list)
    kernel_comm_messages: list[int] = field(default_factory=list)
    kernel_comm_bytes: list[int] = field(default_factory=list)
    thread: Any = None

    def summary(self) -> dict[str, Any]:
        def med(values: list[Any]) -> float:
            return round(median([float(v) for v in values]), 3)

        return {
            "store": self.store,
            "runs": len(self.render_seconds),
            "median_load_seconds": med(self.load_seconds),
            "median_render_seconds": med(self.render_seconds),
            "median_comm_messages": med(self.comm_messages),
            "median_comm_bytes": med(self.comm_bytes),
            "widgets": med(self.widgets),
            "batched_median_render_seconds": med(self.batched_seconds),
            "batched_median_comm_messages": med(self.batched_comm_messages),
            "batched_median_comm_bytes": med(self.batched_comm_bytes),
            "kernel_median_seconds": med(self.kernel_seconds),
            "kernel_median_comm_messages": med(self.kernel_comm_messages),
            "kernel_median_comm_bytes": med(self.kernel_comm_bytes),
            # Fewer than in-process means iopub dropped some (ZMQ high-water mark).
            "kernel_comm_messages_per_run": list(self.kernel_comm_messages),
        }


def bench_render(
    runs: int, messages: int, rows: int, workdir: Path, kernel_runs: int | None = None
) -> RenderResult:
    """Load the saved thread and render it into a ThreadView, ``runs`` times in-process
    (comms counted), then ``kernel_runs`` times with ``%loom resume`` in a real kernel."""
    from loom_nb.notebook.widgets import ThreadView

    db = workdir / "render.db"
    store, kind = open_store(db)
    thread = make_thread(messages, rows)
    save_thread(store, thread)
    result = RenderResult(store=kind, thread=thread)
    for _ in range(runs):
        start = time.perf_counter()
        loaded = store.load(thread.id)
        load_s = time.perf_counter() - start
        assert loaded is not None and len(loaded.messages) == messages
        with counting_comms() as tally:
            start = time.perf_counter()
            view = ThreadView(agent_name="bench", rows=10)
            view.render(loaded)
            render_s = time.perf_counter() - start
        result.load_seconds.append(load_s)
        result.render_seconds.append(render_s)
        result.comm_messages.append(tally.total)
        result.comm_bytes.append(tally.bytes)
        result.widgets.append(tally.messages["comm_open"])
        _close(view)
        cold = store.load(thread.id)  # like ThreadView's, its frames are not decoded yet
        with counting_comms() as tally:
            start = time.perf_counter()
            view = batched_render(cold)
            result.batched_seconds.append(time.perf_counter() - start)
        result.batched_comm_messages.append(tally.total)
        result.batched_comm_bytes.append(tally.bytes)
        _close(view)
    store.close()
    if kind != "sqlite" or kernel_runs == 0:
        return result
    kernel = Kernel(workdir)
    try:
        kernel.check(
            "from loom_nb import ReplayModel, define_agent\n"
            "from loom_nb.sqlite import sqlite_store\n"
            "%load_ext loom_nb\n"
            f"bench = define_agent(name='bench', model=ReplayModel([]), "
            f"store=sqlite_store({str(db)!r}))"
        )
        for _ in range(runs if kernel_runs is None else kernel_runs):
            run = kernel.check(f"%loom resume {thread.id}")
            result.kernel_seconds.append(run.seconds)
            result.kernel_comm_messages.append(run.comm_messages)
            result.kernel_comm_bytes.append(run.comm_bytes)
            kernel.check("import loom_nb.notebook as _nb; _nb.session().last_view.close()")
    finally:
        kernel.close()
    return result


def batched_render(thread: Any) -> Any:
    """A prototype for comparison, not the product: the same ThreadView, but the rendered
    children are assigned to the body once instead of one assignment per message (each
    assignment re-sends the whole list of children: O(n²) comm bytes when every message is
    its own widget, as the first ThreadView did)."""
    from loom_nb.notebook.widgets import ThreadView

    view = ThreadView(agent_name="bench", rows=10)
    collected: list[Any] = []
    view._append = lambda *items: collected.extend(items)  # type: ignore[method-assign]
    try:
        view.render(thread)
    finally:
        del view._append
    view.body.children = (*view.body.children, *collected)
    return view


def bench_browser_render(runs: int, thread: Any, db: Path, workdir: Path) -> dict[str, Any]:
    """What a person waits for: ``%loom resume ID`` of the saved thread in JupyterLab, in
    Debian's chromium, until every assistant message of the thread is in the page. Uses the
    browser test harness (tests/notebook/browser)."""
    import shutil

    sys.path.insert(0, str(REPO_ROOT / "tests" / "notebook"))
    from browser.lab import chromium_path, start_lab
    from browser.page import (
        chromium_context,
        open_notebook,
        run_cell,
        wait_cell_done,
        write_notebook,
    )
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    chromium = chromium_path()
    if chromium is None:
        raise SystemExit("--browser needs Debian's chromium: apt-get install chromium")
    texts = sum(1 for m in thread.messages if m.role == "assistant" and m.text)
    lab = start_lab(workdir / "lab")
    shutil.copy(db, lab.root / "render.db")
    cells = [
        "from loom_nb import ReplayModel, define_agent\n"
        "from loom_nb.sqlite import sqlite_store\n"
        "%load_ext loom_nb\n"
        "bench = define_agent(name='bench', model=ReplayModel([]), "
        "store=sqlite_store('render.db'))",
        f"%loom resume {thread.id}",
    ]
    write_notebook(lab.root / "render.ipynb", cells)
    cell_s: list[float] = []
    visible_s: list[float] = []
    counts: list[int] = []
    dropped: list[bool] = []
    stuck = 0
    try:
        with chromium_context(chromium, workdir / "chromium-profile") as context:
            for _ in range(runs):
                page = context.new_page()
                open_notebook(page, lab, "render.ipynb")
                run_cell(page, 0)
                wait_cell_done(page, 0)
                start = time.perf_counter()
                run_cell(page, 1)
                try:
                    wait_cell_done(page, 1)
                except PlaywrightTimeout:  # seen once in five runs: record it, go on
                    stuck += 1
                    page.close()
                    lab.shutdown_kernels()
                    continue
                cell_s.append(time.perf_counter() - start)
                seen, last_change = _wait_settled(page, texts, start)
                visible_s.append(last_change)
                counts.append(seen)
                dropped.append(page.locator("text=IOPub message rate exceeded").count() > 0)
                page.close()
                lab.shutdown_kernels()
    finally:
        lab.stop()
    return {
        "runs": runs,
        "median_cell_seconds": round(median(cell_s), 3),
        "median_last_change_seconds": round(median(visible_s), 3),
        "assistant_messages": texts,
        "assistant_messages_in_page": counts,
        "iopub_rate_exceeded": dropped,
        "runs_where_the_cell_never_finished_in_the_page": stuck,
    }


def _wait_settled(page: Any, want: int, start: float, quiet: float = 10) -> tuple[int, float]:
    """Poll the number of assistant messages in the page until it reaches ``want`` or stops
    changing for ``quiet`` seconds; (count, seconds from ``start`` to its last change)."""
    js = "() => document.querySelectorAll('.loom-thread .loom-assistant').length"
    count, changed = page.evaluate(js), time.perf_counter()
    while count < want and time.perf_counter() - changed < quiet:
        time.sleep(0.1)
        now = page.evaluate(js)
        if now != count:
            count, changed = now, time.perf_counter()
    return count, changed - start


def _close(view: Any) -> None:
    """Close the view and every widget under it (their comms), so runs do not pile up."""
    import ipywidgets as widgets

    def walk(w: Any) -> None:
        for child in getattr(w, "children", ()) or ():
            walk(child)
        if isinstance(w, widgets.Widget):
            w.close()

    walk(view)


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=50, help="rows per DataFrame result")
    parser.add_argument("--words", type=int, default=2000, help="deltas in the streamed reply")
    parser.add_argument("--delay", type=float, default=0.001, help="seconds between deltas")
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 runs (a smoke run)")
    parser.add_argument("--only", choices=["render", "stream"], help="run one benchmark")
    parser.add_argument(
        "--browser",
        action="store_true",
        help="also time %%loom resume of the saved thread in JupyterLab + chromium",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.messages, args.words = 2, 100, 200

    out: dict[str, Any] = {"python": sys.version.split()[0], "settings": vars(args)}
    with tempfile.TemporaryDirectory(prefix="loom-bench-") as tmp:
        workdir = Path(tmp)
        if args.only in (None, "render"):
            render = bench_render(args.runs, args.messages, args.rows, workdir)
            out["render"] = render.summary()
            _print_render(out["render"], args)
            if args.browser:
                out["render_browser"] = bench_browser_render(
                    args.runs, render.thread, workdir / "render.db", workdir
                )
                b = out["render_browser"]
                print(
                    f"    JupyterLab + chromium, %loom resume: cell done "
                    f"{b['median_cell_seconds']:.2f} s, last message added to the page "
                    f"{b['median_last_change_seconds']:.2f} s (median of {b['runs']}); "
                    f"assistant messages shown {b['assistant_messages_in_page']} of "
                    f"{b['assistant_messages']}; 'IOPub message rate exceeded' shown: "
                    f"{b['iopub_rate_exceeded']}; runs where the cell never showed done "
                    f"(180 s): {b['runs_where_the_cell_never_finished_in_the_page']}"
                )
        if args.only in (None, "stream"):
            stream = bench_stream(args.runs, args.words, args.delay, workdir)
            out["stream"] = [r.summary() for r in stream]
            _print_stream(out["stream"], args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    return out


def _print_render(r: dict[str, Any], args: Any) -> None:
    print(
        f"\n(a) render a saved {args.messages}-message thread ({args.rows}-row DataFrames), "
        f"{r['store']} store, median of {r['runs']} runs"
    )
    print(f"    load (frames decode lazily){r['median_load_seconds'] * 1000:9.1f} ms")
    print(f"    render into ThreadView     {r['median_render_seconds'] * 1000:9.1f} ms")
    print(f"    widgets (comm_open)        {r['widgets']:9.0f}")
    print(f"    comm messages              {r['median_comm_messages']:9.0f}")
    print(f"    comm bytes                 {r['median_comm_bytes'] / 1e6:9.2f} MB")
    print(
        f"    prototype, one children assignment: "
        f"{r['batched_median_render_seconds'] * 1000:.1f} ms, "
        f"{r['batched_median_comm_messages']:.0f} comm messages, "
        f"{r['batched_median_comm_bytes'] / 1e6:.2f} MB"
    )
    print(
        f"    real kernel, %loom resume  {r['kernel_median_seconds'] * 1000:9.1f} ms, "
        f"{r['kernel_median_comm_messages']:.0f} comm messages, "
        f"{r['kernel_median_comm_bytes'] / 1e6:.2f} MB on iopub "
        f"(per run: {r['kernel_comm_messages_per_run']})"
    )


def _print_stream(rows: list[dict[str, Any]], args: Any) -> None:
    print(
        f"\n(b) stream a {args.words}-delta reply (one word each, {args.delay * 1000:g} ms "
        f"apart) in a real kernel, median of {rows[0]['runs']} runs"
    )
    print(f"    {'variant':32} {'cell s':>8} {'comm msgs':>10} {'comm MB':>9}  check")
    for r in rows:
        print(
            f"    {r['variant']:32} {r['median_seconds']:8.2f} "
            f"{r['median_comm_messages']:10.0f} {r['median_comm_bytes'] / 1e6:9.2f}  "
            f"{r['last_check']}"
        )


if __name__ == "__main__":
    main()
