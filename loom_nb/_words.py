"""The sentences a person reads about a thread, each written once.

The widgets, the static HTML, the terminal text, the HTTP thread page and the exported
notebook all say these; they take them from here, so a sentence changes in one place and
every view keeps saying the same thing (``tests/notebook/test_shown.py`` checks that no
view spells one of them again).
"""

from __future__ import annotations

from loom_nb._messages import Usage

#: What a rejected call did.
NOTHING_DONE = "nothing was run or written"
#: A rejected call's line, after the tool's name.
REJECTED = f"rejected: {NOTHING_DONE}."
#: A failed call's line, after the tool's name (the error follows).
FAILED = "failed:"
#: A call that waits for Approve / Reject, after the tool's name.
WAITS = "waits for your approval"
#: A call whose run stopped while it ran, after the tool's name.
UNKNOWN = "may have run: its outcome is unknown"
#: Why the outcome is unknown, and what to do.
UNKNOWN_WHY = (
    "Its run stopped while this call was running (the kernel stopped, or was interrupted, or "
    "lost its store), before its result was saved: the write may have happened. Check where "
    "it writes, then choose. Nothing runs until you do."
)
#: A call another live kernel runs now, after the tool's name.
RUNNING_ELSEWHERE = "is running in another kernel"
#: What a card says where its buttons cannot work (a saved notebook, a restarted kernel).
DECIDE_ELSEWHERE = "waiting for approval — run %loom approvals to decide"
#: A resumed card's rows were read again when it was drawn, not kept from when it was asked.
ROWS_NOW = "rows as they are now"
#: The card of a call decided later than the output holding it was saved.
#: What a view says while a run goes on.
WORKING = "the agent is working…"
#: A streamed reply the run did not finish.
CUT_SHORT = "(cut short)"


def not_run_yet(state: str) -> str:
    """A call decided (``approved``, ``rejected``) that has not run yet."""
    return f"{state}, not run yet"


def newer_parts(count: int, newer: str) -> str:
    """``2 part(s) from a newer loom_nb: …``."""
    return f"{count} part(s) {newer}"


def earlier_messages(count: int) -> str:
    """What a static copy says of the messages it leaves out."""
    return f"… {count} earlier messages (%loom show draws them all)"


def more_rows(count: int) -> str:
    """``… 3 more rows``, under a table cut to its first rows."""
    return f"… {count:,} more row{'s' if count != 1 else ''}"


def shape(rows: int, columns: int) -> str:
    """``3 rows × 2 columns``."""
    return f"{rows} row{'s' if rows != 1 else ''} × {columns} column{'s' if columns != 1 else ''}"


def usage(total: Usage, run: Usage | None = None) -> str:
    """``thread: 380 tokens in · 44 out · $0.0061 (this run: ...)``, "price unknown" where the
    model's price is not known."""
    text = f"thread: {total.line()}"
    if run is not None and run.requests:
        text += f" (this run: {run.line()})"
    return text


def label(key: str) -> str:
    """A card's key in words: ``rows_matched`` -> ``Rows matched``."""
    words = " ".join(str(key).replace("_", " ").split())
    return words[:1].upper() + words[1:]
