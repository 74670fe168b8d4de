"""loom_nb at scale, each figure next to the floor that does the same work, in the same run.

- ``search``: ``agent.search`` of a selective word over 100,000 saved messages in 10,000
  threads, vs one FTS5 query (SQLite's default tokenizer) over the same texts in a hand-made
  file that returns the same 50 newest threads as ``ThreadInfo``; and a common word. Each
  also vs the same query through an FTS5 trigram index (any piece of text, as loom_nb finds),
  and short needles (1-2 characters, rare and common), which no trigram can hold, vs a
  ``LIKE`` scan of the same texts and the trigram table's own ``LIKE``. Then
  ``agent.threads()`` (50 newest of 10,000) vs one query on an index that fits it.
- ``first-use``: the first ``frame_tools`` + ``define_agent`` in a fresh process (loom_nb and
  pandas already imported, as in a kernel), vs pydantic-ai's ``Agent`` with one tool.
- ``turns``: one turn (a user message, an instant reply, both saved) on a saved thread of
  5,000 messages vs on one of 10, through ``agent.run(thread_id=...)`` on a SQLite store.
- ``memory``: the memory one more run keeps, over 100 runs on one thread with ``FunctionModel``
  (tracemalloc, after a garbage collection).
- ``frames``: decoding a stored 50-row frame, and every frame of a 5,000-message thread (with
  its load, and alone: ``thread.frames`` of the thread just loaded; goal: under 0.1 s).
- ``render``: a saved 1,000-message thread loaded cold and drawn as the notebook's history
  HTML, vs a hand-written floor: one SELECT, ``json.loads``, the same markdown renderer, and
  the first rows of each frame built straight from its stored columns into ``to_html``.

Run: ``python -m bench.bench_scale [--only NAME] [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import html
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)


def median_ms(fn: Callable[[], object], repeat: int, paused: bool = False) -> float:
    """Median ms of ``fn``; ``paused``: as timeit times, after a collection, collector off."""
    times = []
    for _ in range(repeat):
        if paused:
            gc.collect()
            gc.disable()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        gc.enable()
    return statistics.median(times) * 1000


def alternate(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median ms of each, run in turns so the shared machine's noise falls on all alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1000 for name, t in times.items()}


def ratio_line(label: str, ours: float, floor: float) -> str:
    return f"  {label:52} {ours:9.2f} ms vs {floor:9.2f} ms   x{ours / floor:.2f}"


# ---- search and listing ---------------------------------------------------------------------


def _word(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(length))


_rng = random.Random(11)
WORDS = [_word(_rng, 3 + i % 7) for i in range(3000)]
RARE = "zanzibarite"
#: A short needle only the rare messages hold (the chat words are lowercase letters), and one
#: that about one message in three holds.
SHORT_RARE, SHORT_COMMON = "#7", "qu"


def chat_text(rng: random.Random, rare: bool) -> str:
    words = [rng.choice(WORDS) for _ in range(48)]
    if rare:
        words[rng.randrange(len(words))] = RARE.capitalize() + " " + SHORT_RARE
    return " ".join(words)[:300]


def fill_search(threads: int, per_thread: int, loom_path: Path, floor_path: Path) -> None:
    """The same threads in loom_nb's store and in a hand-made file with an FTS5 index."""
    from loom_nb import Message, TextPart, Thread, ToolResult
    from loom_nb.sqlite import sqlite_store

    rng = random.Random(3)
    rare_at = set(rng.sample(range(threads * per_thread), 5))
    store = sqlite_store(loom_path)
    store._conn.execute("PRAGMA synchronous = OFF")  # a fast fill; reads are what is timed
    floor = sqlite3.connect(floor_path, isolation_level=None)
    floor.executescript(
        """
        PRAGMA journal_mode = WAL;
        PRAGMA synchronous = OFF;
        CREATE TABLE threads (id TEXT PRIMARY KEY, agent TEXT NOT NULL, user_id TEXT,
            title TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            updated_us INTEGER NOT NULL, message_count INTEGER NOT NULL DEFAULT 0,
            pending_count INTEGER NOT NULL DEFAULT 0);
        CREATE INDEX threads_recent ON threads (agent, user_id, updated_us);
        CREATE TABLE messages (id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, body TEXT);
        CREATE INDEX messages_thread ON messages (thread_id);
        CREATE VIRTUAL TABLE messages_fts USING fts5(body, content='messages', content_rowid='id');
        CREATE VIRTUAL TABLE messages_tri USING fts5(body, content='messages', content_rowid='id',
            tokenize='trigram');
        """
    )
    n = 0
    floor.execute("BEGIN")
    for t in range(threads):
        at = T0 + timedelta(seconds=t * per_thread)
        thread = Thread(id=f"t{t:05d}", agent="bench", created_at=at, updated_at=at)
        store.save_thread(thread)
        for i in range(per_thread):
            at = T0 + timedelta(seconds=t * per_thread + i)
            text = chat_text(rng, n in rare_at)
            if i % 5 == 4:
                message = Message("tool", [ToolResult(f"c{n}", "select", text)], created_at=at)
            else:
                message = Message("user" if i % 2 == 0 else "assistant", [TextPart(text)], at)
            thread.messages.append(message)
            thread.updated_at = at
            store.append(thread, message)
            floor.execute(
                "INSERT INTO messages (id, thread_id, body) VALUES (?, ?, ?)", (n, thread.id, text)
            )
            floor.execute("INSERT INTO messages_fts (rowid, body) VALUES (?, ?)", (n, text))
            floor.execute("INSERT INTO messages_tri (rowid, body) VALUES (?, ?)", (n, text))
            n += 1
        thread.messages = []
        floor.execute(
            "INSERT INTO threads VALUES (?, 'bench', NULL, NULL, ?, ?, ?, ?, 0)",
            (
                thread.id,
                thread.created_at.isoformat(),
                at.isoformat(),
                round(at.timestamp() * 1e6),
                per_thread,
            ),
        )
    floor.execute("COMMIT")
    floor.close()
    store.close()


class FloorStore:
    """What a careful hand-written store does for the same two calls."""

    COLUMNS = "id, agent, user_id, title, created_at, updated_at, message_count, pending_count"

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    def _infos(self, rows: list[Any]) -> list[Any]:
        from loom_nb import ThreadInfo

        return [
            ThreadInfo(
                r[0],
                r[1],
                r[2],
                r[3],
                datetime.fromisoformat(r[4]),
                datetime.fromisoformat(r[5]),
                r[6],
                r[7],
            )
            for r in rows
        ]

    def search(self, word: str, table: str = "messages_fts") -> list[Any]:
        """By the word index (``messages_fts``) or the trigram index (``messages_tri``)."""
        rows = self.conn.execute(
            f"SELECT {self.COLUMNS} FROM threads WHERE id IN (SELECT m.thread_id FROM "
            f"{table} f JOIN messages m ON m.id = f.rowid WHERE {table} MATCH ?) "
            "AND agent = 'bench' AND user_id IS NULL ORDER BY updated_us DESC LIMIT 50",
            ('"' + word.replace('"', '""') + '"',),
        ).fetchall()
        return self._infos(rows)

    def scan(self, needle: str, trigram: bool = False) -> list[Any]:
        """By ``LIKE`` over every message's text, or over the trigram table (which scans for
        a pattern under three characters)."""
        inner = (
            "SELECT m.thread_id FROM messages_tri f JOIN messages m ON m.id = f.rowid "
            "WHERE f.body LIKE ?"
            if trigram
            else "SELECT thread_id FROM messages WHERE body LIKE ?"
        )
        rows = self.conn.execute(
            f"SELECT {self.COLUMNS} FROM threads WHERE id IN ({inner}) "
            "AND agent = 'bench' AND user_id IS NULL ORDER BY updated_us DESC LIMIT 50",
            ("%" + needle + "%",),
        ).fetchall()
        return self._infos(rows)

    def list(self) -> list[Any]:
        rows = self.conn.execute(
            f"SELECT {self.COLUMNS} FROM threads WHERE agent = 'bench' AND user_id IS NULL "
            "ORDER BY updated_us DESC LIMIT 50"
        ).fetchall()
        return self._infos(rows)


#: The floor's trigram index, for :meth:`FloorStore.search`.
TRI = "messages_tri"


def bench_search(quick: bool) -> dict[str, float]:
    from loom_nb import ReplayModel, define_agent
    from loom_nb.sqlite import sqlite_store

    threads, per_thread, repeat = (2_000, 10, 5) if quick else (10_000, 10, 15)
    with tempfile.TemporaryDirectory() as tmp:
        loom_path, floor_path = Path(tmp) / "loom.db", Path(tmp) / "floor.db"
        start = time.perf_counter()
        fill_search(threads, per_thread, loom_path, floor_path)
        print(
            f"  (filled {threads * per_thread:,} messages in {time.perf_counter() - start:.0f} s)",
            file=sys.stderr,
        )
        store = sqlite_store(loom_path)
        agent = define_agent(name="bench", model=ReplayModel([]), store=store)
        floor = FloorStore(floor_path)
        ours, theirs = agent.search(RARE), floor.search(RARE)
        assert [t.id for t in ours] == [t.id for t in theirs] and 3 <= len(ours) <= 5
        common = WORDS[6]  # nine letters: inside no other word
        assert [t.id for t in agent.search(common)] == [t.id for t in floor.search(common)]
        assert [t.id for t in agent.search(RARE)] == [t.id for t in floor.search(RARE, TRI)]
        for short in (SHORT_RARE, SHORT_COMMON):
            ids = [t.id for t in agent.search(short)]
            assert (
                ids
                == [t.id for t in floor.scan(short)]
                == [t.id for t in floor.scan(short, trigram=True)]
            )
        assert [t.id for t in agent.threads()] == [t.id for t in floor.list()]
        got = alternate(
            {
                "search": lambda: agent.search(RARE),
                "search floor": lambda: floor.search(RARE),
                "search trigram": lambda: floor.search(RARE, TRI),
                "common": lambda: agent.search(common),
                "common floor": lambda: floor.search(common),
                "common trigram": lambda: floor.search(common, TRI),
                "short rare": lambda: agent.search(SHORT_RARE),
                "short rare like": lambda: floor.scan(SHORT_RARE),
                "short rare trigram": lambda: floor.scan(SHORT_RARE, trigram=True),
                "short common": lambda: agent.search(SHORT_COMMON),
                "short common like": lambda: floor.scan(SHORT_COMMON),
                "short common trigram": lambda: floor.scan(SHORT_COMMON, trigram=True),
                "list": lambda: agent.threads(),
                "list floor": lambda: floor.list(),
            },
            repeat,
        )
        store.close()
    n = threads * per_thread
    print(f"\nsearch and listing: {n:,} messages in {threads:,} threads, median of {repeat}")
    print(ratio_line("agent.search(selective word) vs FTS5", got["search"], got["search floor"]))
    print(ratio_line("agent.search(common word) vs FTS5", got["common"], got["common floor"]))
    print(
        ratio_line(
            "agent.search(selective word) vs FTS5 trigram", got["search"], got["search trigram"]
        )
    )
    print(
        ratio_line(
            "agent.search(common word) vs FTS5 trigram", got["common"], got["common trigram"]
        )
    )
    for name, needle in (("short rare", SHORT_RARE), ("short common", SHORT_COMMON)):
        label = f"agent.search({needle!r}, {name.split()[1]})"
        print(ratio_line(f"{label} vs LIKE scan", got[name], got[f"{name} like"]))
        print(ratio_line(f"{label} vs FTS5 trigram LIKE", got[name], got[f"{name} trigram"]))
    print(ratio_line("agent.threads() vs an indexed query", got["list"], got["list floor"]))
    return got


# ---- the first define_agent in a fresh process --------------------------------------------

FIRST_USE_LOOM = """
import time, pandas as pd, loom_nb, loom_nb.frames
from loom_nb import ReplayModel, define_agent
df = pd.DataFrame({"id": [1, 2], "status": ["open", "paid"], "total": [1.5, 2.5]})
start = time.perf_counter()
tools = loom_nb.frames.frame_tools({"orders": df})
agent = define_agent(name="analyst", model=ReplayModel([]), connectors=[tools])
agent.tools["frames_select"].validate({"table": "orders", "limit": 5})
print(time.perf_counter() - start)
"""

FIRST_USE_PYDANTIC_AI = """
import time, pandas as pd, pydantic_ai
from pydantic_ai.models.function import FunctionModel
start = time.perf_counter()
agent = pydantic_ai.Agent(FunctionModel(lambda messages, info: None))
@agent.tool_plain
def select(table: str, limit: int = 50) -> str:
    "Rows of a table."
    return table
print(time.perf_counter() - start)
"""


def fresh_seconds(code: str, repeat: int) -> float:
    out = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout.split()[-1]
        )
        for _ in range(repeat)
    ]
    return statistics.median(out)


def bench_first_use(quick: bool) -> dict[str, float]:
    repeat = 3 if quick else 7
    ours = fresh_seconds(FIRST_USE_LOOM, repeat) * 1000
    theirs = fresh_seconds(FIRST_USE_PYDANTIC_AI, repeat) * 1000
    print(f"\nfirst use in a fresh process (imports done), median of {repeat}")
    print(ratio_line("frame_tools + define_agent + one validation", ours, theirs))
    print("  (the second figure is pydantic-ai's Agent with one tool)")
    return {"first_use": ours, "pydantic_ai": theirs}


# ---- one turn vs thread length ---------------------------------------------------------------


def saved_thread(store: Any, n: int, thread_id: str) -> None:
    from loom_nb import Message, TextPart, Thread

    thread = Thread(id=thread_id, agent="bench", created_at=T0, updated_at=T0)
    store.save_thread(thread)
    store._conn.execute("PRAGMA synchronous = OFF")
    for i in range(n):
        at = T0 + timedelta(seconds=i)
        role = "user" if i % 2 == 0 else "assistant"
        message = Message(role, [TextPart(f"message {i}: " + "some words " * 25)], at)
        thread.messages.append(message)
        thread.updated_at = at
        store.append(thread, message)
    store._conn.execute("PRAGMA synchronous = FULL")


def bench_turns(quick: bool) -> dict[str, float]:
    from loom_nb import FunctionModel, define_agent
    from loom_nb.sqlite import sqlite_store

    long, turns = (1_000, 10) if quick else (5_000, 30)
    with tempfile.TemporaryDirectory() as tmp:
        store = sqlite_store(Path(tmp) / "turns.db")
        saved_thread(store, 10, "short")
        saved_thread(store, long, "long")
        agent = define_agent(name="bench", model=FunctionModel(lambda r: "Done."), store=store)
        agent.run_sync("warm up", thread_id="short")
        agent.run_sync("warm up", thread_id="long")
        got = alternate(
            {
                "short": lambda: agent.run_sync("One more question.", thread_id="short"),
                "long": lambda: agent.run_sync("One more question.", thread_id="long"),
            },
            turns,
        )
        store.close()
    print(f"\none turn on a saved thread (SQLite, synchronous=FULL), median of {turns}")
    print(ratio_line(f"{long:,} messages vs 10 messages", got["long"], got["short"]))
    return got


# ---- memory per run --------------------------------------------------------------------------


def bench_memory(quick: bool) -> dict[str, float]:
    from loom_nb import FunctionModel, define_agent
    from loom_nb.sqlite import sqlite_store

    runs = 40 if quick else 100
    with tempfile.TemporaryDirectory() as tmp:
        store = sqlite_store(Path(tmp) / "memory.db")
        store._conn.execute("PRAGMA synchronous = OFF")
        model = FunctionModel(lambda r: "An answer of a few words. " * 10)
        agent = define_agent(name="bench", model=model, store=store)
        thread_id = agent.run_sync("Start.").thread_id
        tracemalloc.start()
        kept = []
        for _ in range(runs):
            agent.run_sync("And then? " * 10, thread_id=thread_id)
            gc.collect()
            kept.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
        store.close()
    last = kept[-10:]
    per_run = (last[-1] - last[0]) / (len(last) - 1) / 1e6
    print(f"\nmemory kept per run, runs {runs - 9}-{runs} of {runs} on one thread (FunctionModel)")
    print(f"  {per_run:.3f} MB per run; {kept[-1] / 1e6:.1f} MB after {runs} runs")
    return {"mb_per_run": per_run, "mb_total": kept[-1] / 1e6}


# ---- stored frames ----------------------------------------------------------------------------


def bench_frames(quick: bool) -> dict[str, float]:
    from bench.bench_store import Loom, conversation, sample_frame
    from loom_nb._codec import decode, encode

    text = json.dumps(encode(sample_frame(1)))
    one = median_ms(lambda: decode(json.loads(text)), 200)
    n = 1_000 if quick else 5_000
    with tempfile.TemporaryDirectory() as tmp:
        loom = Loom(Path(tmp) / "frames.db")
        loom.store._conn.execute("PRAGMA synchronous = OFF")
        loom.fill(conversation(n))
        every = median_ms(loom.load, 5)
        paused = median_ms(loom.load, 5, paused=True)
        load = median_ms(loom.load_lazy, 5)
        decoding: list[float] = []  # thread.frames of a thread just loaded, the load untimed
        for _ in range(7):
            thread: Any = loom.load_lazy()
            start = time.perf_counter()
            frames = thread.frames
            decoding.append(time.perf_counter() - start)
            del thread, frames
        decode_ms = statistics.median(decoding) * 1000
        loom.close()
    print("\nstored DataFrames")
    print(f"  decode one 50-row frame                              {one:9.3f} ms")
    print(
        f"  load a {n:,}-message thread + decode its {n // 5:,} frames   {every:9.1f} ms "
        f"(load alone {load:.1f} ms; {paused:.1f} ms with the garbage collector paused)"
    )
    print(f"  decode alone: thread.frames of the loaded thread          {decode_ms:9.1f} ms")
    return {
        "one": one,
        "thread": every,
        "thread_gc_paused": paused,
        "load": load,
        "decode": decode_ms,
    }


# ---- a saved thread drawn as history HTML ----------------------------------------------------


def floor_render(conn: sqlite3.Connection, rows: int) -> str:
    from bench.bench_store import payload_frame
    from loom_nb.notebook._html import markdown_html

    out = []
    for (body,) in conn.execute("SELECT body FROM messages ORDER BY id"):
        m = json.loads(body)
        if m["role"] == "user":
            out.append(f'<div class="loom-user">{html.escape(m["text"])}</div>')
        elif m["role"] == "assistant":
            if m["text"]:
                out.append(f'<div class="loom-assistant">{markdown_html(m["text"])}</div>')
            for call in m["calls"]:
                args = html.escape(json.dumps(call["arguments"], indent=2))
                out.append(f"<details><summary>{call['name']}</summary><pre>{args}</pre></details>")
        elif m.get("frame"):
            df = payload_frame(m["frame"], rows)
            shape = f"{m['frame']['rows']} rows × {len(m['frame']['columns'])} columns"
            out.append(f"<div>{shape}</div>" + df.to_html(border=0, index=False))
    return "".join(out)


def bench_render(quick: bool) -> dict[str, float]:
    from bench.bench_store import frame_payload
    from bench.bench_widget import make_thread, save_thread
    from loom_nb.notebook.history import history_html
    from loom_nb.sqlite import sqlite_store

    n, repeat, rows = (200, 3, 10) if quick else (1_000, 7, 10)
    thread = make_thread(n)
    with tempfile.TemporaryDirectory() as tmp:
        store = sqlite_store(Path(tmp) / "render.db")
        store._conn.execute("PRAGMA synchronous = OFF")
        save_thread(store, thread)
        floor = sqlite3.connect(Path(tmp) / "floor.db", isolation_level=None)
        floor.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT)")
        for m in thread.messages:
            body: dict[str, Any] = {"role": m.role, "text": m.text}
            body["calls"] = [{"name": c.name, "arguments": c.arguments} for c in m.tool_calls]
            for r in m.tool_results:
                body["frame"] = {**frame_payload(r.data), "rows": len(r.data)}
            floor.execute("INSERT INTO messages (body) VALUES (?)", (json.dumps(body),))

        def ours() -> str:
            loaded = store.load(thread.id)
            assert loaded is not None
            return history_html(loaded.messages, rows)

        got = alternate({"ours": ours, "floor": lambda: floor_render(floor, rows)}, repeat)
        floor.close()
        store.close()
    print(
        f"\na saved {n:,}-message thread, loaded cold and drawn as history HTML "
        f"({rows} rows per frame), median of {repeat}"
    )
    print(ratio_line("load + history_html vs the hand-written floor", got["ours"], got["floor"]))
    return got


BENCHES: dict[str, Callable[[bool], dict[str, float]]] = {
    "search": bench_search,
    "first-use": bench_first_use,
    "turns": bench_turns,
    "memory": bench_memory,
    "frames": bench_frames,
    "render": bench_render,
}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(BENCHES), action="append")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    out = {name: BENCHES[name](args.quick) for name in args.only or BENCHES}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
