"""Rules and questions in real kernels: ``%loom rules`` / ``%loom revoke`` over thirty appends
under one rule, a card's "Allow writes like this", and a question answered with a button
after a restart, or with ``%loom answer``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.notebook.nb_kernels import execute, text_of, with_class

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SETUP = """
%load_ext loom_nb
import pandas as pd
from loom_nb import define_agent, ReplayModel, Reply
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store

tickets = pd.DataFrame({{"id": [1, 2], "status": ["open", "open"]}})
data = frame_tools({{"tickets": {{"frame": tickets, "write": True}}}})

def append(i, n=1):
    rows = [{{"id": 100 + i + k, "status": "new"}} for k in range(n)]
    return Reply("", [("frames_append", {{"table": "tickets", "rows": rows}})])

ASK = Reply("", [("ask_user", {{"question": "Last quarter: fiscal or calendar?",
                                "choices": ["fiscal", "calendar"]}})])
model = ReplayModel({replies})
cleaner = define_agent(name="cleaner", model=model, connectors=[data], max_steps=60,
                       store=sqlite_store({db!r}))
"""


def test_thirty_appends_under_a_rule_made_from_a_card(kernel: tuple[str, Path], tmp_path: Path):
    db = str(tmp_path / "loom.db")
    replies = "[append(0)] + [append(i) for i in range(1, 31)] + [append(40, 25), 'Done.']"
    nb = execute(
        [
            SETUP.format(replies=replies, db=db),
            "%%loom cleaner --result r\nClean the tickets.",
            textwrap.dedent("""
                from loom_nb.notebook import session
                view = session().last_view
                card = view.cards[0]
                print(card.offers())
                card.allow_button.click()   # a rule from this card's effect, and Approve
                done = view.wait(60)
                print(done.status, len(tickets), done.pending[0].tool, done.pending[0].state)
                ran = [x for m in done.new_messages for x in m.tool_results]
                print([x.approval for x in ran].count("rule"), ran[0].approval)
            """),
            "%loom rules",
            "rules = cleaner.rules()\nprint(rules[0].max_rows, rules[0].table, rules[0].scope)",
            'get_ipython().run_line_magic("loom", f"revoke {rules[0].id}")\nprint(cleaner.rules())',
        ],
        kernel,
        tmp_path,
    )
    out = [text_of(c) for c in nb.cells]
    assert "['approve', 'reject', 'allow']" in out[2]
    # the card's own append approved by the click; thirty more by the rule; 25 rows wait
    assert "awaiting_approval 33 frames_append pending" in out[2]
    assert "30 approved" in out[2]
    assert "1 rule in force" in out[3] and "frames_append" in out[3] and "tickets" in out[3]
    assert out[4].strip() == "1 tickets thread"  # up to the 1 row the card counted
    assert "revoked rule_" in out[5] and out[5].strip().endswith("[]")
    assert with_class(nb, "loom-allow")


def test_a_question_is_answered_with_a_button_after_a_restart(
    kernel: tuple[str, Path], tmp_path: Path
):
    db = str(tmp_path / "loom.db")
    first = execute(
        [
            SETUP.format(replies="[ASK]", db=db),
            "%%loom cleaner --result r\nSales last quarter?",
            "print(r.thread.id, r.status, r.pending[0].tool)",
        ],
        kernel,
        tmp_path,
    )
    thread_id, status, tool = text_of(first.cells[2]).split()
    assert (status, tool) == ("awaiting_approval", "ask_user")
    assert with_class(first, "loom-question")
    # a new kernel on the same file: the question card comes back, its buttons live
    second = execute(
        [
            SETUP.format(replies="['Fiscal, then: 1.2M.']", db=db),
            f"%loom resume {thread_id}",
            textwrap.dedent("""
                from loom_nb.notebook import session
                view = session().last_view
                card = view.cards[0]
                print(type(card).__name__, card.offers())
                card.choice_buttons[0].click()
                card.choice_buttons[1].click()   # answered once
                done = view.wait(60)
                print(done.status, "|", done.output, "|", card.decision_label.value)
                print([x.content for m in done.thread.messages for x in m.tool_results])
            """),
        ],
        kernel,
        tmp_path,
    )
    out = text_of(second.cells[2])
    assert "QuestionCard ['fiscal', 'calendar']" in out
    assert "complete | Fiscal, then: 1.2M. |" in out and "fiscal" in out
    assert "['fiscal']" in out


def test_percent_loom_answer_answers_in_text_mode(kernel: tuple[str, Path], tmp_path: Path):
    db = str(tmp_path / "loom.db")
    nb = execute(
        [
            SETUP.format(replies="[ASK, 'Calendar it is.']", db=db),
            "%config LoomMagics.display = 'text'",
            "%%loom cleaner --result r\nSales last quarter?",
            "call = r.pending[0].call_id",
            "%loom answer {call} calendar",
            textwrap.dedent("""
                try:
                    get_ipython().run_line_magic("loom", f"answer {call} fiscal")
                except Exception as exc:
                    print(type(exc).__name__, exc)
            """),
        ],
        kernel,
        tmp_path,
    )
    asked, answered, again = (text_of(nb.cells[i]) for i in (2, 4, 5))
    assert "? the agent asks" in asked and "fiscal | calendar" in asked
    assert "%loom answer call_" in asked
    assert "Calendar it is." in answered
    assert "no call" in again and "already" in again  # answered once
