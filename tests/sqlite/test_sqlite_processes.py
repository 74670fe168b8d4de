"""The SQLite store across real processes: kernel restarts, SIGKILL, two writers at once."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loom_nb.sqlite import sqlite_store
from loom_nb.sqlite._schema import MIGRATIONS
from tests.stores._processes import (
    assert_concurrent_appends_kept,
    assert_reported_appends_kept,
    kill_while_appending,
    write_at_once,
)

pytestmark = pytest.mark.slow


def run_child(code: str, *args: str, timeout: float = 120) -> str:
    """Run ``code`` in a fresh Python process (a "new kernel") and return its stdout."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, f"child failed:\n{out.stderr}"
    return out.stdout


# ---- a kernel restart ------------------------------------------------------------------------

_WRITE_RICH_THREADS = """
import json, sys
from datetime import datetime, timedelta, timezone
import numpy as np
import pandas as pd
from loom_nb import Message, PendingApproval, TextPart, Thread, ToolCall, ToolResult, Usage
from loom_nb.sqlite import sqlite_store

store = sqlite_store(sys.argv[1])
t0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
orders = pd.DataFrame(
    {
        "id": pd.array([1, 2, None], dtype="Int64"),
        "status": ["open", "paid", "open"],
        "total": [120.5, np.nan, 99.0],
        "created_at": pd.to_datetime(["2025-01-06", "2025-01-07", None]).tz_localize("UTC"),
        "kind": pd.Categorical(["web", "shop", "web"]),
    },
    index=pd.Index([10, 20, 30], name="order_no"),
)
rows = pd.DataFrame({"title": ["Refund 7"], "priority": [2]})

def build(thread_id, agent, user, minutes, pending):
    at = t0 + timedelta(minutes=minutes)
    thread = Thread(id=thread_id, agent=agent, user_id=user, title=f"about {thread_id}",
                    created_at=at, updated_at=at)
    store.save_thread(thread)
    messages = [
        Message("user", [TextPart("Which orders are open? ÄÖÜ ✓")], created_at=at),
        Message("assistant",
                [TextPart("Looking."), ToolCall("call_q", "select", {"table": "orders"})],
                created_at=at + timedelta(seconds=1), usage=Usage(321, 45, 1), model="test:replay"),
        Message("tool", [ToolResult("call_q", "select", "<data rows=3>...</data>", orders)],
                created_at=at + timedelta(seconds=2)),
        Message("assistant",
                [TextPart("Two are open."), ToolCall("call_w", "insert", {"rows": [{"t": "R7"}]})],
                created_at=at + timedelta(seconds=3), usage=Usage(400, 20, 1), model="test:replay"),
    ]
    for m in messages:
        thread.messages.append(m)
        thread.updated_at = m.created_at
        store.append(thread, m)
    if pending:
        arguments = {"rows": [{"title": "R7"}]}
        thread.pending = [PendingApproval("call_w", "insert", arguments, rows)]
    else:
        thread.error = "ModelError: test:replay failed"
    store.save_thread(thread)
    return thread

threads = [
    build("t-ann", "analyst", "ann", 0, True),
    build("t-bob", "analyst", "bob", 5, False),
    build("t-open", "helper", None, 10, True),
]
dtypes = [[str(c), str(t)] for c, t in orders.dtypes.items()]
dtypes.append([orders.index.name, str(orders.index.dtype)])
out = {"threads": {t.id: [t.user_id, t.to_dict()] for t in threads}, "dtypes": dtypes}
print(json.dumps(out, sort_keys=True))
store.close()
"""

_READ_EVERYTHING = """
import json, sys
from loom_nb.sqlite import sqlite_store

store = sqlite_store(sys.argv[1])
out = {"threads": {}, "lists": {}}
for user in (None, "ann", "bob"):
    infos = store.list(user_id=user)
    out["lists"][str(user)] = [
        [i.id, i.agent, i.title, i.created_at.isoformat(), i.updated_at.isoformat(),
         i.message_count, i.pending_count] for i in infos
    ]
    for info in infos:
        thread = store.load(info.id, user_id=user)
        out["threads"][info.id] = [user, thread.to_dict()]
        frames = thread.frames
        out.setdefault("dtypes", {})[info.id] = [
            [str(c), str(t)] for f in frames for c, t in zip(f.columns, f.dtypes)
        ] + [[str(f.index.name), str(f.index.dtype)] for f in frames]
        preview = thread.pending[0].preview if thread.pending else None
        shown = None if preview is None else preview.to_dict("list")
        out.setdefault("previews", {})[info.id] = shown
print(json.dumps(out, sort_keys=True))
"""


def test_a_new_process_lists_and_loads_every_thread_exactly_as_it_was(tmp_path: Path):
    path = str(tmp_path / ".loom" / "loom.db")
    written = json.loads(run_child(_WRITE_RICH_THREADS, path))
    before = written["threads"]
    after = json.loads(run_child(_READ_EVERYTHING, path))
    assert sorted(after["threads"]) == ["t-ann", "t-bob", "t-open"]
    for thread_id, (user, saved) in before.items():
        assert after["threads"][thread_id] == [user, saved], thread_id
    assert [row[0] for row in after["lists"]["None"]] == ["t-open"]
    assert after["lists"]["ann"] == [
        [
            "t-ann",
            "analyst",
            "about t-ann",
            "2025-03-01T09:00:00+00:00",
            "2025-03-01T09:00:03+00:00",
            4,
            1,
        ]
    ]
    assert after["lists"]["bob"][0][5:] == [4, 0]
    assert after["dtypes"]["t-ann"] == written["dtypes"]
    assert [t for _, t in written["dtypes"]][:1] + [t for _, t in written["dtypes"]][2:] == [
        "Int64",
        "float64",
        "datetime64[us, UTC]",
        "category",
        "int64",
    ]
    assert after["previews"]["t-ann"] == {"title": ["Refund 7"], "priority": [2]}
    assert before["t-bob"][1]["error"] == after["threads"]["t-bob"][1]["error"] != None  # noqa: E711


# ---- an approval that waits across a restart -------------------------------------------------

_AGENT = """
import json, sys
import pandas as pd
from loom_nb import Decision, ReplayModel, Reply, define_agent, tool
from loom_nb.sqlite import sqlite_store

path, log = sys.argv[1], sys.argv[2]

def preview(args):
    return pd.DataFrame(args["rows"])

@tool(needs_approval=True, preview=preview)
def insert_tickets(rows: list[dict]) -> str:
    "Insert tickets."
    with open(log, "a") as f:
        f.write(json.dumps(rows) + "\\n")
    return f"inserted {len(rows)}"

def agent(replies):
    return define_agent(name="support", model=ReplayModel(replies), tools=[insert_tickets],
                        store=sqlite_store(path), auth=lambda ctx: ctx.get("user"))
"""

_FIRST_KERNEL = (
    _AGENT
    + """
rows = [{"title": "Refund order 7", "priority": 2}]
reply = Reply("I'll file it.", tool_calls=[("insert_tickets", {"rows": rows})])
result = agent([reply]).run_sync("File a refund ticket for order 7", context={"user": "ann"})
print(json.dumps({"status": result.status, "thread_id": result.thread_id,
                  "call_id": result.pending[0].call_id, "digest": result.pending[0].digest,
                  "thread": result.thread.to_dict()}))
"""
)

_SECOND_KERNEL = (
    _AGENT
    + """
thread_id, call_id, digest = sys.argv[3:6]
support = agent(["Filed: ticket for order 7."])
thread = support.thread(thread_id, context={"user": "ann"})
before = thread.to_dict()
pending = thread.pending[0]
result = support.resume_sync(thread_id, {call_id: Decision(True, digest)}, context={"user": "ann"})
print(json.dumps({"before": before, "preview": pending.preview.to_dict("records"),
                  "arguments": pending.arguments, "status": result.status,
                  "output": result.output, "after": result.thread.to_dict()}))
"""
)


def test_a_pending_approval_is_resumed_by_a_new_process(tmp_path: Path):
    path, log = str(tmp_path / "loom.db"), str(tmp_path / "writes.log")
    first = json.loads(run_child(_FIRST_KERNEL, path, log))
    assert first["status"] == "awaiting_approval"
    assert not Path(log).exists()  # nothing written before approval
    second = json.loads(
        run_child(_SECOND_KERNEL, path, log, first["thread_id"], first["call_id"], first["digest"])
    )
    assert second["before"] == first["thread"]  # the restart lost nothing, pending included
    assert second["preview"] == [{"title": "Refund order 7", "priority": 2}]
    assert second["status"] == "complete"
    assert second["output"] == "Filed: ticket for order 7."
    writes = [json.loads(line) for line in Path(log).read_text().splitlines()]
    assert writes == [[{"title": "Refund order 7", "priority": 2}]]  # once, exact arguments
    store = sqlite_store(path)
    final = store.load(first["thread_id"], user_id="ann")
    assert json.dumps(final.to_dict()) == json.dumps(second["after"])
    assert final.pending == [] and final.status == "complete"
    assert [r.approval for r in final.tool_results()] == ["approved"]
    assert store.load(first["thread_id"], user_id="bob") is None
    store.close()


# ---- SIGKILL in the middle of appending ------------------------------------------------------


def test_sigkill_while_appending_loses_nothing_that_completed(tmp_path: Path):
    path = str(tmp_path / "loom.db")
    reported = kill_while_appending(path, 25, random.Random(4), most_appends=120, most_pause=0.02)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    store = sqlite_store(path)
    assert_reported_appends_kept(store, reported)
    assert sum(last + 1 for last in reported.values()) > 25
    store.close()


# ---- two kernels writing one file at once ----------------------------------------------------


def test_two_processes_appending_at_once_lose_nothing_and_never_lock(tmp_path: Path):
    path, count = str(tmp_path / "shared.db"), 150
    write_at_once(path, ["k1", "k2"], count, tmp_path)  # both create and migrate the new file
    store = sqlite_store(path)
    assert_concurrent_appends_kept(store, ["k1", "k2"], count)
    assert store.schema_version == len(MIGRATIONS)
    store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert conn.execute("SELECT count(*) FROM loom_migrations").fetchone()[0] == len(MIGRATIONS)
    conn.close()


def test_the_import_stays_light():
    out = run_child(
        "import sys, loom_nb.sqlite; "
        "print(sorted(m for m in ('pandas', 'numpy', 'IPython', 'ipywidgets') if m in sys.modules))"
    )
    assert out.strip() == "[]"
