"""An approval card means what will be written, for every value: a text holding a character
that would not show as itself (a line break, a right-to-left override) reads as a PostgreSQL
escape string (``E'a\\nb'``) in the filter, the changes and the rows, in the widget card and
in the text view alike."""

from __future__ import annotations

import html
from typing import Any

import pandas as pd
import pytest

from loom_nb import PendingApproval, ReplayModel, Reply, define_agent, memory_store
from loom_nb.frames import frame_tools
from loom_nb.notebook._html import card_values
from loom_nb.notebook.cards import ApprovalCard
from loom_nb.notebook.text import format_pending
from tests.notebook.hostile import visible_text

RLO = "\u202e"  # right-to-left override: "evil\u202etxt.exe" displays as "evilexe.txt"


def pending_card(call: tuple[str, dict[str, Any]], orders: pd.DataFrame) -> PendingApproval:
    agent = define_agent(
        name="a",
        model=ReplayModel([Reply("", [call])]),
        connectors=[frame_tools({"orders": {"frame": orders, "write": True}})],
        store=memory_store(),
    )
    [pending] = agent.run_sync("go").pending
    return pending


def shown_both_ways(pending: PendingApproval) -> list[str]:
    card = ApprovalCard(pending, thread_id="t")
    return [visible_text(card.preview.value), format_pending(pending, rows=10)]


def test_an_update_card_writes_out_unseen_characters_in_its_filter_changes_and_rows() -> None:
    orders = pd.DataFrame({"id": [1, 2], "status": ["open", f"x{RLO}b"]})
    pending = pending_card(
        (
            "frames_update",
            {
                "table": "orders",
                "values": {"status": f"evil{RLO}txt.exe"},
                "filters": [{"column": "status", "op": "eq", "value": f"x{RLO}b"}],
            },
        ),
        orders,
    )
    for shown in shown_both_ways(pending):
        assert RLO not in shown
        assert "Where: status = E'x\\u202eb'" in shown  # the filter, in words, unquoted
        assert "E'evil\\u202etxt.exe'" in shown and "E'x\\u202eb'" in shown  # new, old


def test_rows_to_write_show_a_line_break_as_an_escape() -> None:
    pending = pending_card(
        ("frames_append", {"table": "orders", "rows": [{"id": 3, "status": "a\nb"}]}),
        pd.DataFrame({"id": [1], "status": ["open"]}),
    )
    for shown in shown_both_ways(pending):
        assert "E'a\\nb'" in shown


def test_the_cards_raw_arguments_escape_unseen_characters_as_json_does() -> None:
    pending = pending_card(
        ("frames_append", {"table": "orders", "rows": [{"id": 3, "status": f"a{RLO}b"}]}),
        pd.DataFrame({"id": [1], "status": ["open"]}),
    )
    card = ApprovalCard(pending, thread_id="t")
    arguments = html.unescape(card.preview.value).split("<summary>arguments</summary>")[1]
    assert '"a\\u202eb"' in arguments


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("open", "open"),
        ("it's é 中", "it's é 中"),  # every character shows: as it is
        ("a\nb", "E'a\\nb'"),
        ("tab\there", "E'tab\\there'"),
        ("zero\u200bwidth", "E'zero\\u200bwidth'"),
        ("E'x'", "E'E\\'x\\''"),  # a text that reads like an escape string is written out too
    ],
)
def test_texts_show_as_they_are_unless_a_character_would_not_show(value: str, shown: str) -> None:
    assert card_values(value) == shown
    assert card_values({"changes": [value]}) == {"changes": [shown]}
    frame = pd.DataFrame({"n": [1], "v": [value]})
    assert card_values(frame)["v"].tolist() == [shown]
    assert card_values(frame)["n"].tolist() == [1]


def test_a_rules_frame_draws_hostile_values_as_text_in_portable_html() -> None:
    """``%loom rules``' frame (its ``where`` can hold a model's filter): each value is text in
    an aligned ``<pre>``, no tag or CSS of the value's own, and no pandas ``<style>``."""
    from loom_nb.notebook._static import shown_frame
    from tests.notebook.hostile import HOSTILE_LINE, problems

    frame = shown_frame(pd.DataFrame({"where": [HOSTILE_LINE], "rule": ["allow x"]}))
    drawn = frame._repr_html_()
    assert problems(drawn) == []
    assert "<style" not in drawn and "<table" not in drawn
    assert " ".join(HOSTILE_LINE.split()) in " ".join(visible_text(drawn).split())
    assert type(frame.head()) is pd.DataFrame  # what one does with it is a plain frame
