"""A store's appends under SIGKILL, the same trial for every store that outlives a process:
children append numbered messages and say so after each commit, are killed mid-stream, and a
new store must hold every message a child reported, in order, with no gap."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections.abc import Callable

from loom_nb import Store


def kill_while_appending(
    start: Callable[[str], subprocess.Popen[str]],
    runs: int,
    rng: random.Random,
    most_appends: int,
    most_pause: float,
) -> dict[str, int]:
    """``start(run)`` runs a child that writes ``<thread id> <index>`` after each append it
    commits; each is killed after 1 to ``most_appends`` lines and a pause of up to
    ``most_pause`` seconds. The last index each thread was reported to reach."""
    reported: dict[str, int] = {}

    def note(line: str) -> None:
        thread_id, seq = line.split()
        reported[thread_id] = max(reported.get(thread_id, -1), int(seq))

    for run in range(runs):
        child = start(f"r{run}")
        assert child.stdout is not None
        for _ in range(rng.randint(1, most_appends)):  # let it commit some, then kill it
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.stderr else ""
            note(line)
        time.sleep(rng.random() * most_pause)
        child.send_signal(signal.SIGKILL)
        rest, _ = child.communicate()
        for line in rest.splitlines():  # appends it reported before dying
            note(line)
        assert child.returncode == -signal.SIGKILL
    return reported


def assert_reported_appends_kept(store: Store, reported: dict[str, int]) -> None:
    """Every message a child reported is in its thread, in order, with no gap; a message's
    first word (or its tool result) is ``<run>/<n>/<index>``."""
    infos = {i.id: i for i in store.list(limit=10_000)}
    for thread_id, last in reported.items():
        thread = store.load(thread_id)
        assert thread is not None, thread_id
        run, n = thread_id.split("-")
        texts = [
            m.text.split(" ")[0] if m.role == "assistant" else m.tool_results[0].content
            for m in thread.messages
        ]
        assert len(texts) >= last + 1  # nothing that completed is lost
        assert texts == [f"{run}/{n}/{i}" for i in range(len(texts))]  # in order, no gaps
        assert infos[thread_id].message_count == len(thread.messages)  # record and rows agree
