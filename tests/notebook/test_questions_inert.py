"""A question's card (``ask_user``) and the rule a card makes are drawn from the model's text:
every hostile payload in a question or a choice stays text, in the live card, its static HTML,
the text view, and the thread's saved views."""

from __future__ import annotations

import io
from typing import Any

import ipywidgets as widgets
import pytest

from loom_nb import PendingApproval, Thread
from loom_nb.notebook._html import TABLE_STYLE
from loom_nb.notebook.questions import QuestionCard
from loom_nb.notebook.text import TextView
from loom_nb.notebook.widgets import ThreadView
from tests.notebook.hostile import ATTACK, PAYLOADS, fill, problems, visible_text

RAW = {name: fill(template, ATTACK) for name, template in PAYLOADS.items()}


def html_values(widget: Any) -> list[str]:
    """Every HTML value a widget tree would put on the page (but the project's stylesheet)."""
    own = "loom-style" in getattr(widget, "_dom_classes", ())
    out = [widget.value] if isinstance(widget, widgets.HTML) and not own else []
    for child in getattr(widget, "children", ()):
        out += html_values(child)
    return out


def question(text: str, choices: list[str] | None) -> PendingApproval:
    return PendingApproval("call_q1", "ask_user", {"question": text, "choices": choices})


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_a_hostile_question_and_its_choices_stay_text(name: str) -> None:
    raw = RAW[name]
    view = ThreadView(agent_name="analyst", resumer=lambda *a: None)  # type: ignore[arg-type,return-value]
    view.render(Thread(id="t1", agent="analyst", pending=[question(raw, [raw, "plain"])]))
    (card,) = view.cards
    assert isinstance(card, QuestionCard)
    for value in [
        *html_values(view),
        card.static_html(),
        view.static_html().replace(TABLE_STYLE, ""),
    ]:
        assert problems(value) == [], value
    assert raw in visible_text(card.question.value)  # what the model wrote, shown as text
    assert [b.description for b in card.choice_buttons] == [raw, "plain"]  # a label is text


def test_a_hostile_free_question_gets_a_text_box_and_stays_text() -> None:
    raw = RAW["img-onerror"]
    card = QuestionCard(question(raw, None), thread_id="t1")
    assert card.offers() == ["text"] and card.text is not None
    assert card.answer("") is None and card.decision is None  # an empty answer waits
    card.answer(raw)  # an answer that is itself hostile is shown as text too
    for value in [*html_values(card), card.static_html()]:
        assert problems(value) == [], value
    assert card.offers() == []


def test_the_text_view_prints_the_question_and_how_to_answer() -> None:
    out = io.StringIO()
    TextView(title="analyst", out=out).render(
        Thread(
            id="t1",
            agent="analyst",
            pending=[question("fiscal or calendar?", ["fiscal", "calendar"])],
        )
    )
    printed = out.getvalue()
    assert "? the agent asks (call call_q1): fiscal or calendar?" in printed
    assert "choices: fiscal | calendar" in printed and "%loom answer call_q1 TEXT" in printed
