"""Thread storage in PostgreSQL: loom_nb's postgres_store vs a raw psycopg floor and
LangGraph's PostgresSaver, in the same run, on one throwaway PostgreSQL on loopback.

1. Append one text message to threads of 100, 1,000 and 5,000 messages (the same conversation
   as ``bench_store``: ~300-character texts, every fifth message a 50-row DataFrame result):
   median time per append, round-robin across loom_nb and the two floors; LangGraph's saver
   after them, on its own (its checkpoints grow to megabytes, whose commits would slow the
   others' if they ran in between).
2. Load a 5,000-message thread.
3. Search over 100,000 messages in 200 threads: the 50 newest threads holding a word or phrase
   (a rare word, a phrase in 1 % of messages, a word in every message).

Run: ``python -m bench.bench_postgres [--quick]``. It starts PostgreSQL with the repository's
test helper (``tests/postgres_server.py``: Debian's server, initdb in a temp folder), with
PostgreSQL's own durability on (fsync, synchronous commit): every system's append is one
commit when the call returns.

Fairness notes (also in bench/README.md):
- the floor appends with one autocommitted ``INSERT`` of the message's JSON and its DataFrame
  (``bench_store.floor_row``) into a ``(thread_id, seq)``-keyed table, and loads with one
  ``SELECT``, ``json.loads`` per row and each DataFrame built; every system's load returns the
  thread's DataFrames built (loom_nb's ``thread.frames``, LangGraph's artifacts), as in
  ``bench_store``;
  loom_nb's append also updates the thread's record (message count, updated time: what listing
  needs) and feeds the word index, in the same transaction; so a second floor does that same
  work by hand (one statement: the thread's count and time under a listing index, the row with
  a generated tsvector under a GIN index, one commit);
- the search floor is the raw tsvector query a user writes on tables of their own with the same
  rows (a tsvector of each message's text, with positions, under a GIN index): the 50 newest
  matching threads' records, found with ``plainto_tsquery`` for a word and ``phraseto_tsquery``
  for a phrase (both answers are checked equal to loom_nb's); loom_nb's query also checks the
  exact text (punctuation, spacing), covers messages too long to index and text without words,
  and builds ``ThreadInfo`` objects;
- LangGraph's saver writes a checkpoint holding the whole message list per step (how a
  LangGraph agent saves), so its append grows with the thread.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.bench_store import (
    conversation,
    floor_message,
    floor_row,
    langchain_message,
    payload_frame,
)

ROOT = Path(__file__).resolve().parents[1]
LENGTHS = (100, 1_000, 5_000)
NEEDLES = {
    "rare word (10 messages)": "zyxwvut",
    "phrase (1 % of messages)": "quarterly revenue",
    "word in every message": "orders",
}


class Loom:
    name = "loom_nb postgres_store"

    def __init__(self, dsn: str, thread_id: str) -> None:
        from loom_nb import Thread
        from loom_nb.postgres import postgres_store

        self.store = postgres_store(dsn, schema="bench")
        self.thread = Thread(id=thread_id, agent="bench")
        self.store.save_thread(self.thread)

    def fill(self, messages: list[Any]) -> None:
        for m in messages:
            self.append(m)

    def append(self, message: Any) -> None:
        self.thread.messages.append(message)
        self.thread.updated_at = message.created_at
        self.store.append(self.thread, message)

    def load(self) -> object:
        thread = self.store.load(self.thread.id)
        assert thread is not None
        return thread.frames  # every DataFrame decoded, as the floors build theirs

    def close(self) -> None:
        self.store.close()


class Floor:
    name = "raw psycopg INSERT (floor)"

    def __init__(self, dsn: str, thread_id: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS raw_messages (thread_id text NOT NULL, seq int NOT NULL, "
            "json text NOT NULL, frame text, PRIMARY KEY (thread_id, seq))"
        )
        self.thread_id, self.seq = thread_id, 0

    def fill(self, messages: list[Any]) -> None:
        for m in messages:
            self.append(m)

    def append(self, message: Any) -> None:
        self.conn.execute(
            "INSERT INTO raw_messages (thread_id, seq, json, frame) VALUES (%s, %s, %s, %s)",
            (self.thread_id, self.seq, *floor_row(message)),
        )
        self.seq += 1

    def load(self) -> object:
        rows = self.conn.execute(
            "SELECT json, frame FROM raw_messages WHERE thread_id = %s ORDER BY seq",
            (self.thread_id,),
        ).fetchall()
        return [floor_message(text, frame) for text, frame in rows]

    def close(self) -> None:
        self.conn.close()


class SameWorkFloor(Floor):
    """The work loom_nb's append does, as a skilled user would write it by hand: one statement
    that counts the message on its thread's record (whose listing index keeps it non-HOT, as
    ours) and inserts the row, whose generated tsvector feeds a GIN index, in one commit."""

    name = "raw psycopg, same work (floor)"

    def __init__(self, dsn: str, thread_id: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS raw_threads (id text PRIMARY KEY, user_id text, "
            "agent text NOT NULL, message_count int NOT NULL DEFAULT 0, updated_at text, "
            "updated_us bigint NOT NULL DEFAULT 0)"
        )
        self.conn.execute(
            "CREATE INDEX IF NOT EXISTS raw_threads_listing "
            "ON raw_threads (user_id, agent, updated_us DESC)"
        )
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS raw_indexed_messages (thread_id text NOT NULL "
            "REFERENCES raw_threads (id) ON DELETE CASCADE, seq int NOT NULL, json text NOT NULL, "
            "frame text, "
            "words tsvector GENERATED ALWAYS AS (to_tsvector('simple', json)) STORED, "
            "PRIMARY KEY (thread_id, seq))"
        )
        self.conn.execute(
            "CREATE INDEX IF NOT EXISTS raw_indexed_words ON raw_indexed_messages USING gin (words)"
        )
        self.conn.execute("INSERT INTO raw_threads (id, agent) VALUES (%s, 'bench')", (thread_id,))
        self.thread_id = thread_id

    def append(self, message: Any) -> None:
        self.conn.execute(
            "WITH t AS (UPDATE raw_threads SET message_count = message_count + 1, "
            "updated_at = %s, updated_us = %s WHERE id = %s RETURNING message_count) "
            "INSERT INTO raw_indexed_messages (thread_id, seq, json, frame) "
            "SELECT %s, message_count - 1, %s, %s FROM t",
            (
                message.created_at.isoformat(),
                round(message.created_at.timestamp() * 1_000_000),
                self.thread_id,
                self.thread_id,
                *floor_row(message),
            ),
        )

    def load(self) -> object:
        rows = self.conn.execute(
            "SELECT json, frame FROM raw_indexed_messages WHERE thread_id = %s ORDER BY seq",
            (self.thread_id,),
        ).fetchall()
        return [floor_message(text, frame) for text, frame in rows]


class LangGraph:
    name = "LangGraph PostgresSaver"

    def __init__(self, dsn: str, thread_id: str) -> None:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        self.conn = psycopg.connect(dsn, autocommit=True, row_factory=dict_row)  # as it asks
        self.saver = PostgresSaver(self.conn)  # type: ignore[arg-type]
        self.saver.setup()
        self.config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.thread_id = thread_id
        self.messages: list[Any] = []
        self.step = 0

    def fill(self, messages: list[Any]) -> None:
        self.messages = [langchain_message(m) for m in messages[:-1]]
        self.append(messages[-1])

    def append(self, message: Any) -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        self.messages.append(langchain_message(message))
        self.step += 1
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": self.messages}
        checkpoint["channel_versions"] = {"messages": self.step}
        self.config = self.saver.put(
            self.config, checkpoint, {"source": "loop", "step": self.step}, {"messages": self.step}
        )

    def load(self) -> object:
        config: Any = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}
        found = self.saver.get_tuple(config)
        assert found is not None
        messages = found.checkpoint["channel_values"]["messages"]
        return [payload_frame(m.artifact) for m in messages if getattr(m, "artifact", None)]

    def close(self) -> None:
        self.conn.close()


#: Timed round-robin.
SYSTEMS: list[type[Any]] = [Floor, SameWorkFloor, Loom]
#: Timed one at a time, after them.
ALONE: list[type[Any]] = [LangGraph]


def start_server() -> Any:
    sys.path.insert(0, str(ROOT))
    from tests.postgres_server import Postgres, find_bin_dir, missing_reason

    reason = missing_reason()
    if reason:
        raise SystemExit(f"cannot start PostgreSQL: {reason}")
    bin_dir = find_bin_dir()
    assert bin_dir is not None
    return Postgres(bin_dir, durable=True).start()


def bench_appends(
    dsn: str, lengths: tuple[int, ...], appends: int, loads: int, alone: int
) -> dict[str, Any]:
    """Round-robin across :data:`SYSTEMS` (the machine's noise falls on each alike), then each
    of :data:`ALONE` by itself for ``alone`` appends."""
    base = conversation(max(lengths) + appends * 2)
    extra = [m for m in base if m.role == "user"][:appends]
    out: dict[str, Any] = {}
    for n in lengths:
        for group, count in ((SYSTEMS, appends), *(([s], alone) for s in ALONE)):
            opened = []
            for system in group:
                s = system(dsn, f"{system.__name__}-{n}")
                s.fill(base[:n])
                opened.append(s)
            times: dict[str, list[float]] = {s.name: [] for s in opened}
            for m in extra[:count]:
                for s in opened:
                    start = time.perf_counter()
                    s.append(m)
                    times[s.name].append(time.perf_counter() - start)
            for s in opened:
                out.setdefault(s.name, {})[n] = {"append": statistics.median(times[s.name]) * 1000}
            if n == max(lengths):
                load_times: dict[str, list[float]] = {s.name: [] for s in opened}
                for _ in range(loads):
                    for s in opened:  # as timeit does: no collection of another's garbage
                        gc.collect()
                        gc.disable()
                        start = time.perf_counter()
                        s.load()
                        load_times[s.name].append(time.perf_counter() - start)
                        gc.enable()
                for s in opened:
                    out[s.name]["load"] = statistics.median(load_times[s.name]) * 1000
            for s in opened:
                s.close()
                ms = out[s.name][n]["append"]
                print(f"  {s.name:28} n={n:5}: append {ms:7.3f} ms", file=sys.stderr)
    return out


def bench_search(dsn: str, total: int, repeat: int) -> dict[str, dict[str, float]]:
    """200 threads of ``total / 200`` messages, filled in bulk (the same rows appends make)."""
    from loom_nb import Message, TextPart, Thread
    from loom_nb._sql_stores.rows import message_row
    from loom_nb.postgres import postgres_store

    store = postgres_store(dsn, schema="bench_search")
    threads = 200
    per = total // threads
    text = "Open orders above 100 are mostly from the web shop; three are older than a week. "
    rows = []
    for t in range(threads):
        thread = Thread(id=f"s{t}", agent="bench")
        store.save_thread(thread)
        for i in range(per):
            k = t * per + i
            body = text + f"Item {k} of batch {k % 97}."
            if k % 100 == 7:
                body += " Quarterly revenue grew."
            if k % 100 == 57:  # both words, not as the phrase: neither answer has these
                body += " Revenue was flat in the quarterly review."
            if k % (total // 10) == 3:
                body += " Code zyxwvut."
            role, created_at, js, data, search = message_row(Message("user", [TextPart(body)]))
            rows.append((thread.id, i, role, created_at, js, data, search))
    with psycopg.connect(dsn, autocommit=True) as conn:
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY bench_search.messages (thread_id, seq, role, created_at, json, data, search) "
                "FROM STDIN"
            ) as copy,
        ):
            for row in rows:
                copy.write_row(row)
        conn.execute(
            "UPDATE bench_search.threads t SET message_count = %s, "
            "updated_us = (substr(id, 2))::int",
            (per,),
        )
        # The floor's own tables, with the same rows: the records, and each message's JSON
        # and text with a tsvector (positions kept, as to_tsvector makes it) under GIN.
        conn.execute("CREATE SCHEMA bench_floor")
        conn.execute(
            "CREATE TABLE bench_floor.threads AS SELECT id, agent, user_id, title, created_at, "
            "updated_at, pending, error, message_count, pending_count, updated_us "
            "FROM bench_search.threads"
        )
        conn.execute("ALTER TABLE bench_floor.threads ADD PRIMARY KEY (id)")
        conn.execute("CREATE INDEX ON bench_floor.threads (user_id, updated_us DESC)")
        conn.execute(
            "CREATE TABLE bench_floor.messages (thread_id text NOT NULL, seq int NOT NULL, "
            "json text NOT NULL, text text NOT NULL, words tsvector GENERATED ALWAYS AS "
            "(to_tsvector('simple', text)) STORED, PRIMARY KEY (thread_id, seq))"
        )
        conn.execute(
            "INSERT INTO bench_floor.messages (thread_id, seq, json, text) "
            "SELECT thread_id, seq, json, search FROM bench_search.messages"
        )
        conn.execute("CREATE INDEX ON bench_floor.messages USING gin (words)")
        for table in ("search.messages", "search.threads", "floor.messages", "floor.threads"):
            conn.execute(f"VACUUM ANALYZE bench_{table}")  # as autovacuum does after bulk inserts
        # The floor: the raw tsvector query for the same answer (a word or a phrase).
        floor_sql = (
            "SELECT id, agent, user_id, title, created_at, updated_at, pending, error, "
            "message_count, pending_count FROM bench_floor.threads WHERE user_id IS NULL AND "
            "id IN (SELECT thread_id FROM bench_floor.messages "
            "WHERE words @@ phraseto_tsquery('simple', %s)) ORDER BY updated_us DESC LIMIT 50"
        )
        out: dict[str, dict[str, float]] = {}
        for label, needle in NEEDLES.items():
            loom_t, floor_t = [], []
            found = [i.id for i in store.search(needle)]
            floor_found = [r[0] for r in conn.execute(floor_sql, (needle,))]
            assert found == floor_found, (label, found[:5], floor_found[:5])
            for _ in range(repeat):
                start = time.perf_counter()
                store.search(needle)
                loom_t.append(time.perf_counter() - start)
                start = time.perf_counter()
                conn.execute(floor_sql, (needle,)).fetchall()
                floor_t.append(time.perf_counter() - start)
            out[label] = {
                "loom": statistics.median(loom_t) * 1000,
                "floor": statistics.median(floor_t) * 1000,
                "threads": len(found),
            }
    store.close()
    return out


def bench_turns(dsn: str, long: int, turns: int) -> dict[str, float]:
    """One turn on a saved thread of ``long`` messages vs one of 10: the agent keeps the
    threads it runs and checks the thread's version (one row) instead of loading it."""
    from bench.bench_scale import alternate
    from loom_nb import FunctionModel, Thread, define_agent
    from loom_nb.postgres import postgres_store

    store = postgres_store(dsn, schema="bench_turns")
    base = conversation(long)  # ends with a tool result at any multiple of 5
    for thread_id, n in (("short", 10), ("long", long)):
        thread = Thread(id=thread_id, agent="bench")
        store.save_thread(thread)
        for m in base[:n]:
            thread.messages.append(m)
            store.append(thread, m)
    agent = define_agent(name="bench", model=FunctionModel(lambda r: "Done."), store=store)
    for thread_id in ("short", "long"):
        agent.run_sync("warm up", thread_id=thread_id)
    got = alternate(
        {
            name: lambda name=name: agent.run_sync("One more question.", thread_id=name)
            for name in ("short", "long")
        },
        turns,
    )
    store.close()
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, smaller search")
    args = parser.parse_args()
    appends, loads, repeat, alone = (30, 3, 7, 5) if args.quick else (200, 7, 31, 20)
    total = 20_000 if args.quick else 100_000
    server = start_server()
    try:
        dsn = server.dsn()
        results = bench_appends(dsn, LENGTHS, appends, loads, alone)
        searches = bench_search(dsn, total, repeat)
        turns = bench_turns(dsn, LENGTHS[-1], repeat)
    finally:
        server.stop()
    report(results, searches, total)
    print(f"\none turn on a saved thread (median ms of {repeat})")
    print(f"{'10 messages':34}{turns['short']:12.2f}")
    print(f"{f'{LENGTHS[-1]:,} messages':34}{turns['long']:12.2f}")
    print(f"{f'  {LENGTHS[-1]:,} / 10':34}{turns['long'] / turns['short']:11.2f}x")


def report(results: dict[str, Any], searches: dict[str, dict[str, float]], total: int) -> None:
    floor, loom = results[Floor.name], results[Loom.name]
    print("\nappend one message (median ms; PostgreSQL on loopback, fsync on)")
    print(f"{'':34}" + "".join(f"{n:>12,}" for n in LENGTHS))
    for name, rows in results.items():
        print(f"{name:34}" + "".join(f"{rows[n]['append']:12.3f}" for n in LENGTHS))
    same = results[SameWorkFloor.name]
    for label, base in (("  loom / floor", floor), ("  loom / same-work floor", same)):
        print(
            f"{label:34}"
            + "".join(f"{loom[n]['append'] / base[n]['append']:11.2f}x" for n in LENGTHS)
        )
    if LangGraph.name in results:
        lg = results[LangGraph.name]
        print(
            f"{'  loom / PostgresSaver':34}"
            + "".join(f"{loom[n]['append'] / lg[n]['append']:11.2f}x" for n in LENGTHS)
        )
    print(f"\nload a {max(LENGTHS):,}-message thread (median ms)")
    for name, rows in results.items():
        print(f"{name:34}{rows['load']:12.2f}")
    print(f"{'  loom / floor':34}{loom['load'] / floor['load']:11.2f}x")
    print(f"\nsearch {total:,} messages in 200 threads, 50 newest matches (median ms)")
    print(f"{'':34}{'loom':>10}{'floor':>10}{'ratio':>9}{'threads':>9}")
    for label, row in searches.items():
        print(
            f"{label:34}{row['loom']:10.2f}{row['floor']:10.2f}"
            f"{row['loom'] / row['floor']:8.2f}x{row['threads']:9.0f}"
        )


if __name__ == "__main__":
    main()
