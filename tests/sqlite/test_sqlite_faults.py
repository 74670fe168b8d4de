"""The SQLite store on a disk that fills up, a file system that turns read-only, and a file
this user may not write: a loom_nb error naming the file and what was not saved; nothing that
was saved before is lost, and once there is room again the thread goes on.

The full disk is a real 2 MB tmpfs, mounted in a mount namespace of the child's own (``unshare
-rm``: no root needed, nothing to clean up); the child is a real process."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loom_nb import ReplayModel, define_agent
from loom_nb.sqlite import StoreNotWritableError, sqlite_store
from tests.conftest import require

_FILL = """
import json, os, sys
from loom_nb import ReplayModel, StoreError, UserError, define_agent
from loom_nb.sqlite import sqlite_store

folder = sys.argv[1]
with open(os.path.join(folder, "room"), "wb") as f:  # freed later, to make room again
    f.write(b"x" * 300_000)
path = os.path.join(folder, "loom.db")
replies = [f"reply {i} " + "lorem ipsum " * 4000 for i in range(500)]  # about 48 kB each
agent = define_agent(name="a", model=ReplayModel(replies), store=sqlite_store(path))
thread_id, done = None, 0
try:
    while True:
        result = agent.run_sync(f"question {done}", thread_id=thread_id)
        thread_id, done = result.thread_id, done + 1
except (StoreError, UserError) as exc:
    error = [type(exc).__name__, str(exc)]
os.remove(os.path.join(folder, "room"))
again = sqlite_store(path)
thread = again.load(thread_id)
texts = [m.text.split(" ")[0] + " " + m.text.split(" ")[1] for m in thread.messages]
after = define_agent(name="a", model=ReplayModel(["fine"]), store=again)
going_on = after.run_sync("after", thread_id=thread_id).output
print(json.dumps({"done": done, "error": error, "texts": texts, "going_on": going_on}))
"""


def fill(tmp_path: Path) -> dict:
    unshare = shutil.which("unshare")
    require(unshare is not None, "unshare (util-linux) is not installed")
    folder = tmp_path / "disk"
    folder.mkdir()
    script = tmp_path / "fill.py"
    script.write_text(textwrap.dedent(_FILL))
    child = subprocess.run(
        [
            str(unshare),
            "-rm",
            "sh",
            "-c",
            'mount -t tmpfs -o size=2m tmpfs "$1" || exit 99; exec "$2" "$3" "$1"',
            "sh",
            str(folder),
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    require(child.returncode != 99, f"cannot mount a tmpfs here: {child.stderr.strip()}")
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout)


def test_a_full_disk_is_a_store_error_naming_the_file_and_loses_nothing(tmp_path: Path):
    seen = fill(tmp_path)
    kind, said = seen["error"]
    print(f"\nafter {seen['done']} runs: {kind}: {said}")
    assert kind == "StoreError" and seen["done"] > 3
    assert "loom.db is full while saving" in said and "nothing of it was saved" in said
    assert "Free some space" in said and "sqlite3" not in said
    # Every run that completed is there, in order; the one that failed left at most its
    # question (saved before the disk filled); then the thread went on.
    expected = []
    for i in range(seen["done"]):
        expected += [f"question {i}", f"reply {i}"]
    assert seen["texts"][: len(expected)] == expected
    assert seen["texts"][len(expected) :] in ([], [f"question {seen['done']}"], ["after fine"])
    assert seen["going_on"] == "fine"


@pytest.mark.parametrize("what", ["read-only file", "read-only folder"])
def test_a_store_this_kernel_may_not_write_names_the_file_and_what_was_not_saved(
    tmp_path: Path, what: str
):
    path = tmp_path / "loom.db"
    agent = define_agent(name="a", model=ReplayModel(["one", "two"]), store=sqlite_store(path))
    thread_id = agent.run_sync("hi").thread_id
    agent.store.close()
    for f in tmp_path.glob("loom.db-*"):
        f.unlink()  # closed cleanly: the WAL is checkpointed
    code = textwrap.dedent(
        """
        import sys
        from loom_nb import ReplayModel, define_agent
        from loom_nb.sqlite import sqlite_store
        try:
            store = sqlite_store(sys.argv[1])
            agent = define_agent(name="a", model=ReplayModel(["two"]), store=store)
            agent.run_sync("again", thread_id=sys.argv[2])
            print("none")
        except Exception as exc:
            print(type(exc).__name__, exc)
        """
    )
    if what == "read-only file":
        path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    else:
        tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    # root writes any file: its kernel runs without the capability that lets it (setpriv)
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    require(os.geteuid() != 0 or shutil.which("setpriv") is not None, "setpriv is missing")
    try:
        child = subprocess.run(
            [
                *(drop if os.geteuid() == 0 else []),
                sys.executable,
                "-c",
                code,
                str(path),
                thread_id,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    finally:
        tmp_path.chmod(0o755)
        path.chmod(0o644)
    said = child.stdout.strip()
    print(f"\n{what}: {said} {child.stderr.strip()[-300:]}")
    assert said.startswith(StoreNotWritableError.__name__), child.stderr
    assert str(path) in said and "writable" in said
    if "while" in said:  # refused on a write, not on opening: it says which
        assert "nothing of it was saved" in said
    assert len(sqlite_store(path).load(thread_id).messages) == 2  # nothing lost
