"""An eval report's HTML summary: what the thread and the data wrote (the question, the
tool's arguments, column names, values) reaches the page as text, through ``safe_html``."""

from __future__ import annotations

import pandas as pd

from loom_nb import ReplayModel, Reply, define_agent, memory_store, tool
from loom_nb.notebook._html import safe_html
from tests.notebook.hostile import HOSTILE_LINE, problems, visible_text


def test_a_hostile_thread_and_its_rows_in_the_summary_are_inert():
    hostile = HOSTILE_LINE

    @tool
    def rows(pick: str) -> pd.DataFrame:
        """Rows whose column names and values are hostile."""
        n = 3 if pick == "all" else 2
        return pd.DataFrame({"id": list(range(n)), hostile: [hostile] * n})

    agent = define_agent(
        name="hostile",
        model=ReplayModel([Reply("", [("rows", {"pick": "all"})]), hostile]),
        tools=[rows],
        store=memory_store(),
    )
    first = agent.run_sync(hostile)
    report = agent.eval(
        [first.thread_id],
        model=ReplayModel([Reply("", [("rows", {"pick": hostile})]), hostile]),
    )
    assert not report.equal
    shown = report._repr_html_()
    assert problems(shown) == [], shown
    assert safe_html(shown) == shown
    text = visible_text(shown)
    assert "0 of 1 threads equal" in text
    assert "missing rows (1)" in text  # the row with id 2
    assert "<img" in text  # the payload is shown as the text it is
