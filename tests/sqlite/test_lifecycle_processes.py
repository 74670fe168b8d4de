"""An approved write runs at most once, across real processes sharing one SQLite file: kernels
racing to resume one call, SIGKILL at random moments of a write and of building its card, and
two kernels running one thread at once. Each test prints its counts (``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from loom_nb import ReplayModel, Reply, Store, define_agent, tool
from loom_nb.sqlite import sqlite_store

pytestmark = pytest.mark.slow

# The agent every child defines (a "kernel"): a write that needs approval, whose side effect
# is a line in a file, and a model with enough scripted replies for any number of runs.
_AGENT = """
import json, os, sys, time
from loom_nb import CallAlreadyDecided, ReplayModel, Reply, ThreadBusy, define_agent, tool
from loom_nb.sqlite import sqlite_store

path, side = sys.argv[1], sys.argv[2]

def open_store():  # a SQLite file, or "postgresql://...#schema"
    if path.startswith("postgresql"):
        from loom_nb.postgres import postgres_store
        dsn, schema = path.split("#")
        return postgres_store(dsn, schema=schema)
    return sqlite_store(path)

def note(line):
    with open(side, "a") as f:  # O_APPEND: whole lines, whichever process writes
        f.write(line + "\\n")

@tool(needs_approval=True)
def write_ticket(key: str, pause: float = 0.0) -> str:
    "File a ticket (the write)."
    note("start " + key)
    time.sleep(pause)
    note("effect " + key)
    time.sleep(pause)
    return "filed " + key

def agent(replies=()):
    return define_agent(name="support", model=ReplayModel(["Filed."] * 500 + list(replies)),
                        tools=[write_ticket], store=open_store())
"""


def child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_AGENT + code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# Children for the SIGKILL trials are forked from a "zygote" that has imported loom_nb once, so
# a trial costs milliseconds instead of an interpreter start. Each child is a real process,
# killed for real; it runs the same code a fresh ``python -c`` would.
_ZYGOTE = """
import os, sys, traceback
import loom_nb, loom_nb.sqlite  # imported once; no thread, no file opened before forking
# What a run imports on first use too (the package loads its agent loop lazily, a plain tool
# validates with pydantic from its first call): else every trial pays it after "go".
import loom_nb._agent, loom_nb._run, pydantic

for line in sys.stdin:
    command, *words = line.split()
    if command == "wait":
        _, status = os.waitpid(int(words[0]), 0)
        print("status", status, flush=True)
        continue
    code_file, out_file, *args = words
    pid = os.fork()
    if pid:
        print("pid", pid, flush=True)
        continue
    out = os.open(out_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    sys.argv = ["-c", *args]
    try:
        exec(compile(open(code_file).read(), code_file, "exec"), {"__name__": "__main__"})
        sys.stdout.flush()
        os._exit(0)
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
"""


class Zygote:
    """A process that forks trial children on request."""

    def __init__(self, folder: Path, code: str) -> None:
        self.folder = folder
        self.code = folder / f"trial-{id(self)}.py"
        self.code.write_text(textwrap.dedent(_AGENT + code))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.trials = 0

    def _ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().split()[1]

    def kill_at(self, delay: float, *args: str) -> str:
        """Fork a child with ``args``; SIGKILL it ``delay`` s after it prints "go". Returns
        "killed", or "finished" when it was done first."""
        self.trials += 1
        out = self.folder / f"out-{id(self)}-{self.trials}.txt"
        pid = int(self._ask(f"run {self.code} {out} {' '.join(args)}"))
        deadline = time.monotonic() + 30
        while not (out.exists() and out.read_text().startswith("go")):
            assert time.monotonic() < deadline, out.read_text() if out.exists() else "no output"
            time.sleep(0.0005)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        status = int(self._ask(f"wait {pid}"))
        text = out.read_text()
        assert status in (signal.SIGKILL, 0), text  # killed, or exited cleanly first
        return "finished" if "finished" in text else "killed"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def kill_trials(folder: Path, code: str, wanted: int, trial_args, delays) -> list[str]:
    """Run trials on two zygotes at once until ``wanted`` children were killed (or the trials
    run out): the outcome of each trial that ran, in order."""
    zygotes = [Zygote(folder, code) for _ in range(2)]
    ended: list[str] = []
    try:
        with ThreadPoolExecutor(2) as lanes:
            trial = 0
            while sum(e == "killed" for e in ended) < wanted and trial < len(delays):
                batch = range(trial, min(trial + 2, len(delays)))
                ended += lanes.map(
                    lambda i: zygotes[i % 2].kill_at(delays[i], *trial_args(i)), batch
                )
                trial += len(batch)
    finally:
        for z in zygotes:
            z.close()
    return ended


def side_lines(side: Path) -> Counter[str]:
    return Counter(side.read_text().splitlines()) if side.exists() else Counter()


def open_store(path: Path | str) -> Store:
    """The store a child opens from its first argument (see ``_AGENT``)."""
    if str(path).startswith("postgresql"):
        from loom_nb.postgres import postgres_store

        dsn, schema = str(path).split("#")
        return postgres_store(dsn, schema=schema)
    return sqlite_store(path)


def waiting_threads(
    path: Path | str, side: Path, count: int, pause: float = 0.0
) -> list[tuple[str, str]]:
    """``count`` threads, each stopped at one pending write_ticket call: (thread id, call id)."""

    @tool(needs_approval=True)
    def write_ticket(key: str, pause: float = 0.0) -> str:
        "File a ticket (the write)."
        raise AssertionError("never run here")

    replies = [
        Reply("", [("write_ticket", {"key": f"k{i}", "pause": pause})]) for i in range(count)
    ]
    store = open_store(path)
    agent = define_agent(
        name="support", model=ReplayModel(replies), tools=[write_ticket], store=store
    )
    out = []
    for i in range(count):
        result = agent.run_sync(f"ticket {i}")
        assert result.status == "awaiting_approval"
        out.append((result.thread_id, result.pending[0].call_id))
    store.close()
    return out


# ---- N kernels resume one pending call at once --------------------------------------------------

_RESUMER = """
support = agent()
for line in sys.stdin:  # one trial per line, sent to every resumer
    thread_id, call_id, at = line.split()
    while time.time() < float(at):  # all start at one moment, to the millisecond
        pass
    try:
        support.resume_sync(thread_id, {call_id: True})
        print("won", flush=True)
    except CallAlreadyDecided as exc:
        print("lost " + str(exc), flush=True)
    except Exception as exc:
        print("error " + type(exc).__name__ + ": " + str(exc), flush=True)
"""


@pytest.mark.parametrize(
    ("kind", "kernels"),
    [("sqlite", 2), ("sqlite", 4), pytest.param("postgres", 4, marks=pytest.mark.postgres)],
)
def test_of_n_kernels_resuming_one_call_exactly_one_runs_it(
    tmp_path: Path, kind: str, kernels: int, request: pytest.FixtureRequest
):
    path: Path | str = tmp_path / "loom.db"
    if kind == "postgres":
        database = request.getfixturevalue("loom_database")
        path = f"{database.dsn()}#{request.getfixturevalue('postgres_schema')}"
    side, trials = tmp_path / "side.log", 50
    calls = waiting_threads(path, side, trials)
    resumers = [child(_RESUMER, str(path), str(side)) for _ in range(kernels)]
    outcomes: list[list[str]] = []
    try:
        for thread_id, call_id in calls:
            at = time.time() + 0.05
            for r in resumers:
                assert r.stdin is not None
                r.stdin.write(f"{thread_id} {call_id} {at}\n")
                r.stdin.flush()
            outcomes.append([r.stdout.readline().strip() for r in resumers])  # type: ignore[union-attr]
    finally:
        for r in resumers:
            r.stdin.close()  # type: ignore[union-attr]
            r.wait(30)
    writes = side_lines(side)
    winners = [sum(o == "won" for o in trial) for trial in outcomes]
    losers = [o for trial in outcomes for o in trial if o != "won"]
    seen_as = Counter(o.split("(it is ")[-1].split(" now")[0] for o in losers)
    effects = Counter(v for k, v in writes.items() if k.startswith("effect"))
    print(
        f"\n{kind}, {kernels} kernels x {trials} trials: runs per call {dict(Counter(winners))}, "
        f"effects per call {dict(effects)}, {len(losers)} losers told 'already decided' "
        f"(the call was {dict(seen_as)} when they tried)"
    )

    assert winners == [1] * trials
    assert all("already decided in another kernel" in o for o in losers), losers[:3]
    assert len(losers) == trials * (kernels - 1)
    assert {k: v for k, v in writes.items() if k.startswith("effect")} == {
        f"effect k{i}": 1 for i in range(trials)
    }
    store = open_store(path)
    for thread_id, call_id in calls:
        thread = store.load(thread_id)
        assert thread.status == "complete" and thread.pending == []
        assert [r.call_id for r in thread.tool_results()] == [call_id]  # one result per call
    store.close()


# ---- SIGKILL during an approved write ------------------------------------------------------------

_APPROVER = """
thread_id, call_id = sys.argv[3:5]
support = agent()
support.model.delay = 0.01  # the answer after the write streams for a while: kills land there too
# A plain tool builds its pydantic validator on its first call (tens of ms in a new process):
# built before "go", so that the kills spread over the write and not over that.
write_ticket.validate({"key": "warm-up"})
print("go", flush=True)
support.resume_sync(thread_id, {call_id: True})
print("finished", flush=True)
"""

# A fresh kernel after the kills: reloads each thread and does what its card offers.
_RECOVER = """
import random
support = agent()
rng = random.Random(int(sys.argv[3]))
report = {}
for thread_id, call_id in json.loads(sys.stdin.read()):
    thread = support.thread(thread_id)
    found = {p.call_id: p.state for p in thread.pending}.get(call_id, "done")
    choice = None
    if found == "pending":
        choice = True              # the card offers Approve
    elif found == "approved":
        choice = "continue"        # decided before the kill, never claimed: go on
    elif found == "unknown":
        choice = rng.choice(["happened", "retry", "failed"])
    if choice == "continue":
        support.resume_sync(thread_id, {})
    elif choice is not None:
        support.resume_sync(thread_id, {call_id: choice})
    after = support.thread(thread_id)
    results = [r.call_id for r in after.tool_results()]
    report[thread_id] = {"found": found, "choice": choice, "status": after.status,
                         "results": results.count(call_id)}
print(json.dumps(report))
"""


def test_sigkill_during_an_approved_write_never_runs_it_twice_unasked(tmp_path: Path):
    path, side = tmp_path / "loom.db", tmp_path / "side.log"
    calls = waiting_threads(path, side, 180, pause=0.015)
    rng = random.Random(12)
    delays = [rng.uniform(0.0, 0.07) for _ in calls]
    ended = kill_trials(
        tmp_path, _APPROVER, 105, lambda i: (str(path), str(side), *calls[i]), delays
    )
    calls = calls[: len(ended)]
    before = side_lines(side)
    recover = child(_RECOVER, str(path), str(side), "7")
    out, err = recover.communicate(json.dumps(calls), timeout=120)
    assert recover.returncode == 0, err
    report = json.loads(out)
    after = side_lines(side)

    phases: Counter[str] = Counter()
    twice_unasked = 0
    for i, (thread_id, _) in enumerate(calls):
        key, seen = f"k{i}", report[thread_id]
        started, effect = before[f"start {key}"], before[f"effect {key}"]
        saved_before = seen["found"] == "done"
        if ended[i] == "finished":
            phase = "finished before the kill"
        elif not started:
            phase = "killed before the tool started"
        elif saved_before:
            phase = "killed after its result was saved"
        elif not effect:
            phase = "killed in the tool, before its side effect"
        else:
            phase = "killed in the tool, after its side effect"
        phases[phase] += 1
        if started and not saved_before:  # killed mid-tool: the card must say so
            assert seen["found"] == "unknown", (phase, seen)
        runs = after[f"effect {key}"]
        if runs > 1 and seen["choice"] != "retry":
            twice_unasked += 1
        assert runs <= 1 + (seen["choice"] == "retry"), (phase, seen, runs)
        assert seen["status"] == "complete" and seen["results"] == 1, (phase, seen)
    killed = sum(e == "killed" for e in ended)
    print(
        f"\n{len(ended)} approved writes, {killed} SIGKILLed: {dict(phases)}; "
        f"choices {Counter(str(r['choice']) for r in report.values())}; "
        f"executed twice without 'run it again': {twice_unasked}"
    )
    assert twice_unasked == 0
    assert killed >= 100
    assert phases["killed in the tool, before its side effect"] > 0
    assert phases["killed in the tool, after its side effect"] > 0
    assert phases["killed before the tool started"] > 0


# ---- SIGKILL while the approval card is built ----------------------------------------------------

_CARD_BUILDER = """
def preview(args):
    note("preview " + args["key"])
    import pandas as pd  # slow the first time: the kill lands while the card is built
    frame = pd.DataFrame([{"key": args["key"], "priority": 2}])
    note("previewed " + args["key"])
    return frame

from loom_nb import tool as make_tool
ticket = make_tool(write_ticket.function, name="write_ticket", needs_approval=True, preview=preview)
model = ReplayModel([Reply("Filing it.", [("write_ticket", {"key": sys.argv[3]})])])
support = define_agent(name="support", model=model, tools=[ticket], store=sqlite_store(path))
print("go", flush=True)
support.run_sync("file ticket " + sys.argv[3])
print("finished", flush=True)
"""

_AUDIT = """
store = sqlite_store(path)
out = []
for info in store.list(limit=1000):
    thread = store.load(info.id)
    answered = {r.call_id for r in thread.tool_results()}
    carded = {p.call_id for p in thread.pending}
    calls = [c.id for m in thread.messages for c in m.tool_calls]
    key = thread.title.split()[-1]
    out.append({"key": key, "status": thread.status, "calls": len(calls),
                "orphans": [c for c in calls if c not in answered and c not in carded],
                "cards": len(carded), "preview": [p.preview is not None for p in thread.pending]})
print(json.dumps(out))
"""


def test_sigkill_while_the_card_is_built_never_leaves_a_call_without_its_card(tmp_path: Path):
    path, side = tmp_path / "loom.db", tmp_path / "side.log"
    sqlite_store(path).close()  # the file exists before the children race to open it
    rng = random.Random(5)
    delays = [rng.uniform(0.0, 0.4) for _ in range(150)]
    ended = kill_trials(
        tmp_path, _CARD_BUILDER, 42, lambda i: (str(path), str(side), f"k{i}"), delays
    )
    trials = len(ended)
    audit = child(_AUDIT, str(path), str(side))
    out, err = audit.communicate("", timeout=60)
    assert audit.returncode == 0, err
    threads = {t["key"]: t for t in json.loads(out)}
    notes = side_lines(side)
    phases: Counter[str] = Counter()
    for i, how in enumerate(ended):
        key, saved = f"k{i}", threads.get(f"k{i}")
        if how == "finished":
            phases["finished before the kill"] += 1
        elif saved and saved["cards"]:
            phases["killed after the card was saved"] += 1
        elif notes[f"previewed {key}"]:
            phases["killed after the preview, before the card was saved"] += 1
        elif notes[f"preview {key}"]:
            phases["killed while the preview ran"] += 1
        else:
            phases["killed before the preview started"] += 1
    broken = [t for t in threads.values() if t["orphans"]]
    complete_without = [t for t in broken if t["status"] == "complete"]
    killed = sum(e == "killed" for e in ended)
    print(
        f"\n{trials} runs, {killed} SIGKILLed while the card was built: {dict(phases)}; "
        f"threads that read complete with a call that has neither result nor card: "
        f"{len(complete_without)} (any status: {len(broken)})"
    )
    assert killed >= 40
    assert broken == []
    assert phases["killed while the preview ran"] > 0
    for t in threads.values():  # a saved call always has its card, preview included
        assert t["cards"] == t["calls"] and all(t["preview"])
        assert t["status"] == ("awaiting_approval" if t["cards"] else "complete")
    assert not any(line.startswith("effect") for line in notes)  # nothing ran unapproved


# ---- two kernels run one thread at once ----------------------------------------------------------

_RUNNER = """
@tool
def lookup(key: str) -> str:
    "Look something up (slowly)."
    time.sleep(0.3)
    return "found " + key

replies = []
for i in range(40):
    replies += [Reply("Looking.", [("lookup", {"key": f"{sys.argv[3]}{i}"})]), f"done {i}"]
runner = define_agent(name="support", model=ReplayModel(replies), tools=[lookup],
                      store=sqlite_store(path))
for line in sys.stdin:
    thread_id, at = line.split()
    while time.time() < float(at):
        pass
    try:
        runner.run_sync("look it up", thread_id=thread_id)
        print("ran", flush=True)
    except ThreadBusy as exc:
        print("busy " + str(exc), flush=True)
    except Exception as exc:
        print("error " + type(exc).__name__ + ": " + str(exc), flush=True)
"""


def test_two_kernels_running_one_thread_one_runs_and_the_other_is_told(tmp_path: Path):
    path, side, trials = tmp_path / "loom.db", tmp_path / "side.log", 8
    store = sqlite_store(path)
    thread_id = (
        define_agent(name="support", model=ReplayModel(["hi"]), store=store)
        .run_sync("hi")
        .thread_id
    )
    store.close()
    runners = [child(_RUNNER, str(path), str(side), name) for name in ("a", "b")]
    outcomes = []
    try:
        for _ in range(trials):
            at = time.time() + 0.05
            for r in runners:
                r.stdin.write(f"{thread_id} {at}\n")  # type: ignore[union-attr]
                r.stdin.flush()  # type: ignore[union-attr]
            outcomes.append(sorted(r.stdout.readline().strip()[:4] for r in runners))  # type: ignore[union-attr]
    finally:
        for r in runners:
            r.stdin.close()  # type: ignore[union-attr]
            r.wait(30)
    store = sqlite_store(path)
    thread = store.load(thread_id)
    store.close()
    answered = {r.call_id for r in thread.tool_results()}
    calls = [(i, c.id) for i, m in enumerate(thread.messages) for c in m.tool_calls]
    orphans = [c for _, c in calls if c not in answered]
    apart = [  # a result must come right after the message that called for it
        c for i, c in calls if c not in {r.call_id for r in thread.messages[i + 1].tool_results}
    ]
    print(
        f"\n{trials} trials of two kernels on one thread: {Counter(map(tuple, outcomes))}; "
        f"{len(calls)} tool calls, {len(orphans)} without results, {len(apart)} apart from them"
    )
    assert outcomes == [["busy", "ran"]] * trials
    assert orphans == [] and apart == []
    assert len(calls) == trials
    assert thread.lease is None and thread.status == "complete"
