"""How a call is shown is decided once (``loom_nb._shown.shown``): every view (the live
widget, the saved thread's HTML, the static copy, the terminal text) shows each kind of
call the same way, and every sentence the views say is written once (``loom_nb._words``).
Cards read in words; a resumed card shows its rows as they are now; a cell's header says
what that cell asked."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

import loom_nb
from loom_nb import (
    PendingApproval,
    ReplayModel,
    Reply,
    Thread,
    ToolCall,
    _words,
    define_agent,
    memory_store,
    tool,
)
from loom_nb._events import ApprovalRequested, MessageAdded
from loom_nb._shown import Kind, shown
from loom_nb.charts import chart_tools
from loom_nb.frames import frame_tools
from loom_nb.notebook import session as loom_session
from loom_nb.notebook.cards import ApprovalCard
from loom_nb.notebook.history import RESULT_HTML, history_html
from loom_nb.notebook.text import RESULT_TEXT, TextView, format_pending
from loom_nb.notebook.widgets import ThreadView
from tests.notebook.hostile import visible_text

PACKAGE = Path(loom_nb.__file__).parent

ORDERS = {
    "status": ["open", "open", "closed"],
    "total": [150.0, 120.0, 300.0],
    "created_at": pd.to_datetime(["2024-01-01T10:00Z", "2024-01-03T10:00Z", "2024-01-09T10:00Z"]),
}
WEEKLY = {"table": "orders", "group_by": [{"column": "created_at", "bucket": "week"}]}
BAR = {"result": "c_frame", "kind": "bar", "x": "week_created_at", "y": "count"}
UPDATE = {
    "table": "orders",
    "values": {"status": "late"},
    "filters": [{"column": "status", "op": "eq", "value": "open"}],
}

#: The kind of each call of the thread below, in call order.
KINDS = {
    "c_frame": Kind.FRAME,
    "c_text": Kind.TEXT,
    "c_error": Kind.ERROR,
    "c_chart": Kind.CHART,
    "c_rejected": Kind.REJECTED,
}


@tool
def note(text: str) -> str:
    "Say something."
    return f"noted: {text}"


def agent_of(orders: pd.DataFrame, replies: list[Any]) -> Any:
    return define_agent(
        name="analyst",
        model=ReplayModel(replies),
        tools=[note],
        connectors=[frame_tools({"orders": {"frame": orders, "write": True}}), chart_tools()],
        store=memory_store(),
    )


@pytest.fixture(scope="module")
def every_kind() -> Thread:
    """A real run whose calls show each kind: a frame, the model's text, an error (a tool
    that does not exist), a chart, and a write the user rejected."""
    agent = agent_of(
        pd.DataFrame(ORDERS),
        [
            Reply(
                "",
                [
                    ToolCall("c_frame", "frames_aggregate", WEEKLY),
                    ToolCall("c_text", "note", {"text": "hi"}),
                    ToolCall("c_error", "no_such_tool", {}),
                ],
            ),
            Reply("", [ToolCall("c_chart", "chart", BAR)]),
            Reply("", [ToolCall("c_rejected", "frames_update", UPDATE)]),
            "Done.",
        ],
    )
    waiting = agent.run_sync("go")
    done = agent.resume_sync(waiting.thread.id, {"c_rejected": False})
    return done.thread


def waiting_calls() -> list[PendingApproval]:
    return [
        PendingApproval("c_pending", "note", {"text": "hi"}),
        PendingApproval("c_unknown", "note", {"text": "ho"}, state="unknown"),
    ]


def folds(html: str) -> dict[str, str]:
    """The kind each folded call in ``html`` is marked with, by the tool's words."""
    marked = re.findall(r'<details class="loom-tool-call loom-kind-(\w+)"', html)
    return dict(enumerate(marked))  # type: ignore[arg-type]


def test_each_view_maps_every_kind() -> None:
    assert set(RESULT_HTML) == set(Kind) and set(RESULT_TEXT) == set(Kind)


def test_the_one_decision_classifies_each_call(every_kind: Thread) -> None:
    results = {r.call_id: r for r in every_kind.tool_results()}
    assert {cid: shown(results[cid]).kind for cid in KINDS} == KINDS
    assert results["c_rejected"].is_error  # rejected outranks error
    pending, unknown = waiting_calls()
    assert shown(None, pending).kind is Kind.PENDING
    assert shown(None, unknown).kind is Kind.UNKNOWN


#: What a person reads for each kind, in every view.
def sentence(kind: Kind) -> str:
    return {
        Kind.FRAME: "DataFrame",
        Kind.CHART: "bar chart",
        Kind.REJECTED: f"frames_update {_words.REJECTED}",
        Kind.ERROR: f"no_such_tool {_words.FAILED}",
        Kind.TEXT: "noted: hi",
        Kind.PENDING: f"note {_words.WAITS}",
        Kind.UNKNOWN: f"note {_words.UNKNOWN}",
    }[kind]


def test_every_view_shows_each_kind_alike(every_kind: Thread) -> None:
    order = [KINDS[c.id] for m in every_kind.messages for c in m.tool_calls]
    live = ThreadView(agent_name="analyst", tools=None)
    for message in every_kind.messages:
        live.on_event(MessageAdded(message, every_kind.id))
    live.on_event(ApprovalRequested(waiting_calls(), every_kind.id))
    saved = ThreadView(agent_name="analyst")
    saved.render(
        Thread(
            id=every_kind.id, agent="analyst", messages=every_kind.messages, pending=waiting_calls()
        )
    )

    # HTML: each call's fold says its kind, in the live widget, the saved thread, the
    # static copies of both
    accordions = [w for w in live.body.children if "loom-tool-call" in w._dom_classes]
    marked = [c[len("loom-kind-") :] for w in accordions for c in w._dom_classes if "kind-" in c]
    assert marked == [k.value for k in order]
    for html in (history_html(every_kind.messages, 10), live.static_html(), saved.static_html()):
        assert list(folds(html).values()) == [k.value for k in order]
    # and every view says each kind's sentence
    text = TextView(title="analyst", out=(out := _Out()))
    text.render(
        Thread(
            id=every_kind.id, agent="analyst", messages=every_kind.messages, pending=waiting_calls()
        )
    )
    seen = {
        "live widget": visible_text(_widget_html(live)),
        "saved widget": visible_text(_widget_html(saved)),
        "static copy": visible_text(saved.static_html()),
        "text": out.text,
    }
    for kind in Kind:
        for view, said in seen.items():
            assert sentence(kind) in " ".join(said.split()), (view, kind)


class _Out:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def _widget_html(widget: Any) -> str:
    """Every HTML value under ``widget`` (and accordion titles), as the page would hold it."""
    found = []
    for child in getattr(widget, "children", ()):
        found.extend(getattr(child, "titles", ()))
        found.append(_widget_html(child))
    value = getattr(widget, "value", "")
    if isinstance(value, str) and "<style>" not in value:
        found.append(value)
    return " ".join(found)


# ---- each sentence written once ----------------------------------------------------------

#: The modules that say things to a person about a thread.
VIEWS = [
    "_export.py",
    "_words.py",
    "notebook/_calls.py",
    "notebook/_html.py",
    "notebook/_page.py",
    "notebook/_static.py",
    "notebook/cards.py",
    "notebook/history.py",
    "notebook/text.py",
    "notebook/widgets.py",
    "http/_page.py",
]


def _clauses(path: Path) -> list[tuple[str, int]]:
    """Each clause (4 words or more) of each string literal of ``path``, docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            for clause in re.split(r"[.;:()\n]", node.value):
                words = " ".join(clause.split()).lower()
                if len(words.split()) >= 4 and not words.startswith(("<", "{", ".")):
                    found.append((words, node.lineno))
    return found


def test_no_view_spells_a_sentence_twice() -> None:
    where: dict[str, list[str]] = {}
    for name in VIEWS:
        for words, line in _clauses(PACKAGE / name):
            where.setdefault(words, []).append(f"{name}:{line}")
    twice = {words: places for words, places in where.items() if len(places) > 1}
    assert not twice, f"said in more than one place (put it in loom_nb/_words.py): {twice}"


def test_the_words_are_spelt_nowhere_else() -> None:
    mine = [
        " ".join(value.lower().split())
        for name, value in vars(_words).items()
        if name.isupper() and isinstance(value, str) and len(value.split()) >= 3
    ]
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_words.py":
            continue
        said = " ".join(words for words, _line in _clauses(path))
        for sentence in mine:
            assert sentence not in said, f"{path.relative_to(PACKAGE)} spells {sentence!r}"


# ---- cards in words ---------------------------------------------------------------------


def update_waiting(orders: pd.DataFrame) -> tuple[Any, Any]:
    agent = agent_of(orders, [Reply("", [ToolCall("c_update", "frames_update", UPDATE)])])
    return agent, agent.run_sync("Mark the open orders late")


def test_a_card_reads_as_sentences_with_labels_in_words() -> None:
    _agent, run = update_waiting(pd.DataFrame(ORDERS))
    [pending] = run.pending
    card = ApprovalCard(pending, thread_id=run.thread.id)
    header = visible_text(card.header.value)
    said = " ".join(visible_text(card.preview.value).split("arguments")[0].split())
    assert header == f"frames_update {_words.WAITS}"  # no call id in the sentence
    assert "Table: orders" in said and "Where: status = 'open'" in said
    assert "2 rows match now (shown below); if other rows match when it runs" in said
    assert "Changes status late" in said  # the new values as a table: column, value
    for raw in ('"orders"', '"late"', "rows_matched", "Rows matched", "effect", "call_"):
        assert raw not in said and raw not in header
    text = format_pending(pending, rows=10)
    assert "  Table: orders\n" in text and '"' not in text.split("approve:")[0]


def test_a_resumed_card_shows_the_rows_as_they_are_now(shell: InteractiveShell) -> None:
    orders = pd.DataFrame(ORDERS)
    agent, run = update_waiting(orders)
    orders.loc[1, "total"] = 999.0  # the data changed after the card was made
    shell.user_ns["agent"] = agent
    shell.run_cell("%config LoomMagics.display = 'widgets'")
    assert shell.run_cell(f"%loom show {run.thread.id}").success
    view: Any = loom_session(shell).last_view
    [card] = view.cards
    now = visible_text(card.preview.value)
    assert _words.ROWS_NOW in now and "999.0" in now
    assert _words.ROWS_NOW in visible_text(view.static_html())
    # text mode says it too
    shell.run_cell("%config LoomMagics.display = 'text'")
    out = _capture(shell, "%loom approvals")
    assert f"ℹ {_words.ROWS_NOW}" in out and "999.0" in out
    # a live card (asked just now) is not marked
    live = ApprovalCard(run.pending[0], thread_id=run.thread.id)
    assert _words.ROWS_NOW not in visible_text(live.preview.value)
    shell.user_ns.pop("agent")


def _capture(shell: InteractiveShell, line: str) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert shell.run_cell(line).success
    return out.getvalue()


def test_a_cells_header_shows_what_that_cell_asked(shell: InteractiveShell) -> None:
    shell.run_cell("%config LoomMagics.display = 'widgets'")
    shell.user_ns["model"].add("First answer.", "Second answer.")
    assert shell.run_cell("%%loom analyst\nWhich orders are late?").success
    first: Any = loom_session(shell).last_view
    assert shell.run_cell("%%loom analyst\nAnd which are open?").success
    second: Any = loom_session(shell).last_view
    assert first.thread_id == second.thread_id
    assert "Which orders are late?" in visible_text(first.header.value)
    head = visible_text(second.header.value)
    assert "And which are open?" in head and "Which orders are late?" not in head
    assert "And which are open?" in visible_text(second.static_html()).split("You")[0]
    shell.run_cell("%config LoomMagics.display = 'text'")


def test_messages_for_a_view_use_the_same_kinds(every_kind: Thread) -> None:
    """A saved thread's text and its live text agree too."""
    live, saved = _Out(), _Out()
    view = TextView(out=live)  # type: ignore[arg-type]
    for message in every_kind.messages:
        view.on_event(MessageAdded(message, every_kind.id))
    TextView(out=saved).render(  # type: ignore[arg-type]
        Thread(id=every_kind.id, agent="analyst", messages=every_kind.messages)
    )
    assert live.text.strip() == saved.text.split("\n[thread ")[0].strip()  # less its usage
