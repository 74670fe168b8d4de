"""Every walkthrough notebook runs top to bottom in a real kernel (nbclient), offline, and shows
what its text promises. The Supabase notebook also runs against the test rig: real supabase-py,
real PostgreSQL with Supabase's roles and row level security.

The kernels get an environment without API keys or Supabase variables, so each notebook picks
its offline stand-in, as on a fresh machine.
"""

from __future__ import annotations

import importlib.util
import json
import os
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ALL = [
    "01-quickstart.ipynb",
    "02-supabase.ipynb",
    "03-your-own-connector.ipynb",
    "04-real-models.ipynb",
    "05-exploration.ipynb",
    "06-rules-and-questions.ipynb",
    "07-evals.ipynb",
]
#: Variables that would switch a notebook to a real service.
ONLINE = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "LOOM_OLLAMA_MODEL",
    "OLLAMA_HOST",
    "SUPABASE_URL",
    "SUPABASE_ANON_KEY",
    "SUPABASE_USER_JWT",
    "USER_A_JWT",
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _load_runner() -> Any:
    spec = importlib.util.spec_from_file_location("loom_notebooks_run", NOTEBOOKS / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runner = _load_runner()


def offline_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ONLINE}
    env["IPYTHONDIR"] = str(tmp_path / "ipython")  # no profile of this machine's user
    env.update(extra)
    return env


def run(name: str, tmp_path: Path, **extra: str) -> Any:
    return runner.execute(NOTEBOOKS / name, tmp_path / "work", env=offline_env(tmp_path, **extra))


def text_of(cell: Any) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            parts.append(o.text)
        elif o.output_type == "error":
            parts.append(f"{o.ename}: {o.evalue}")
        elif "text/plain" in o.get("data", {}):
            parts.append(o.data["text/plain"])
    return "".join(parts)


def output(nb: Any, source: str) -> str:
    """The text output of the code cell that is ``source``, or the one that contains it."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    cells = [c for c in code if c.source == source] or [c for c in code if source in c.source]
    assert len(cells) == 1, f"{len(cells)} cells contain {source!r}"
    return text_of(cells[0])


def widget_values(nb: Any, css_class: str) -> list[str]:
    """The HTML (or the outputs) of every stored widget with ``css_class``."""
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    found = []
    for model in state.values():
        s = model["state"]
        if css_class in s.get("_dom_classes", ()):
            found.append(s.get("value") or json.dumps(s.get("outputs", [])))
    return found


def shown_text(markup: str) -> str:
    """What a browser shows of ``markup``: its text, character references decoded."""

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []

        def handle_data(self, data: str) -> None:
            self.parts.append(data)

    parser = Text()
    parser.feed(markup)
    parser.close()
    return "".join(parser.parts)


def threads(db: Path) -> list[dict[str, Any]]:
    """What the store holds, read with plain sqlite3 through loom_nb's public store API."""
    from loom_nb.sqlite import sqlite_store

    store = sqlite_store(db)
    try:
        return [store.load(i.id).to_dict() for i in store.list(limit=100)]
    finally:
        store.close()


def cells(nb: Any) -> list[tuple[str, str, dict[str, Any]]]:
    return [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells]


def test_each_notebook_is_its_text_file_and_is_stored_without_outputs() -> None:
    """Each .ipynb is paired with a jupytext percent script (the reviewed, linted text): both
    hold the same cells, so an edit to one and not the other fails here."""
    import jupytext

    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == ALL
    assert sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]-*.py")) == [
        name.replace(".ipynb", ".py") for name in ALL
    ]
    for name in ALL:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(nb)
        text = jupytext.read(NOTEBOOKS / name.replace(".ipynb", ".py"))
        assert cells(nb) == cells(text), (
            f"{name} and its .py differ: run `jupytext --sync notebooks/{name}` "
            "(the file changed last wins)"
        )
        for metadata in (nb.metadata, text.metadata):
            assert metadata["jupytext"]["formats"] == "ipynb,py:percent", name
            assert metadata["jupytext"]["custom_cell_magics"] == "loom", name
            assert metadata["kernelspec"]["name"] == "python3", name
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(not c.outputs and c.execution_count is None for c in code), name
        assert "widgets" not in nb.metadata


def test_quickstart(tmp_path: Path) -> None:
    nb = run("01-quickstart.ipynb", tmp_path)
    # -o bound the DataFrame the agent found: the three open orders above 100.
    shown = output(nb, 'print(f"{len(open_big)} orders')
    assert shown.startswith("3 orders, 610.75 in total")
    assert [line.split()[1] for line in shown.splitlines()[2:]] == ["3", "7", "1"]
    # The approval card's button resumed the run, and the DataFrame changed in place.
    approved = output(nb, "card.approve_button.click()").strip()
    assert approved.startswith(
        "complete | Done. Updated 3 row(s) of 'orders' where id IN (3, 7, 1)."
    )
    # The tool's answer (which the stand-in model repeats) says where the change lives.
    assert "in the notebook's memory changed; no file was written" in approved
    flagged = output(nb, "orders[orders.priority]")
    assert [line.split()[1] for line in flagged.splitlines()[1:]] == ["1", "3", "7"]
    # After the restart: the thread is listed with its pending call, resumed, approved.
    listed = output(nb, "%loom threads analyst")
    assert "Which orders above 100 are still open?" in listed and " 1 " in listed
    assert output(nb, "waiting = analyst.threads()[0]").startswith(
        "Which orders above 100 are still open? | 1 pending"
    )
    assert "cancelled" in output(nb, "orders.loc[orders.id == 7")
    # What the person saw, from the stored widget state.
    assert any("3 rows × 6 columns" in v for v in widget_values(nb, "loom-frame"))
    assert len(widget_values(nb, "loom-approval")) >= 2
    decisions = " ".join(widget_values(nb, "loom-decision"))
    assert "Approved" in decisions
    # The store: one thread, nothing pending, both writes approved.
    [thread] = threads(tmp_path / "work" / ".loom" / "loom.db")
    assert not thread.get("pending")
    results = [p for m in thread["messages"] for p in m["parts"] if p["kind"] == "tool_result"]
    assert [r.get("approval") for r in results] == [None, "approved", "approved"]


def test_supabase_offline(tmp_path: Path) -> None:
    nb = run("02-supabase.ipynb", tmp_path)
    assert output(nb, 'print(f"MODE: {MODE}"').startswith("MODE: offline (no SUPABASE_URL")
    _check_supabase(nb)


def _check_supabase(nb: Any) -> None:
    dtypes = output(nb, "my_orders.dtypes")
    assert "total" in dtypes and "float64" in dtypes and "datetime64" in dtypes
    assert output(nb, "print(len(visitor_orders)").strip() == "0 orders for the visitor"
    assert any("3 rows × 4 columns" in v for v in widget_values(nb, "loom-frame"))
    # the refusal as a person reads it (the widget's HTML as text), not as some escaping of it
    errors = " ".join(shown_text(v) for v in widget_values(nb, "loom-error"))
    assert "table: 'secrets' is not one of [" in errors
    ticket = output(nb, "if card.decision is None:")
    assert ticket.startswith("complete") and "Order 3 is late" in ticket
    # the update's card: how many rows match, and those rows with the new value beside the old
    card = output(nb, 'print(card.pending.preview["effect"])')
    assert card.startswith("2 rows match now (shown below); if ")  # more rows / other rows
    assert "match when it runs, nothing is changed" in card
    assert "status (now)" in card and "status (new)" in card and "Order 3 is late" in card
    closed = output(nb, 'print(card.wait(timeout=30).status, "|", card.outcome)')
    # offline, the tables are DataFrames: the outcome also says files did not change
    assert closed.strip().startswith("complete | done")


@pytest.fixture
def rig_env(tmp_path: Path) -> Any:
    from tests.supabase.rig import USER_A, Rig, missing_reason

    reason = missing_reason()
    require(reason is None, f"Supabase rig: {reason}")
    rig = Rig.start()
    try:
        yield (
            rig,
            {
                "SUPABASE_URL": rig.url,
                "SUPABASE_ANON_KEY": rig.anon_key,
                "USER_A_JWT": rig.jwt(USER_A),
            },
        )
    finally:
        rig.stop()


@pytest.mark.postgres
def test_supabase_against_the_rig(tmp_path: Path, rig_env: Any) -> None:
    from tests.supabase.rig import USER_A, USER_B

    rig, env = rig_env
    nb = run("02-supabase.ipynb", tmp_path, **env)
    assert output(nb, 'print(f"MODE: {MODE}"').startswith(f"MODE: local test rig ({rig.url})")
    _check_supabase(nb)
    with rig.superuser() as conn:
        rows = conn.execute(
            "SELECT subject, user_id::text, status FROM tickets WHERE subject = 'Order 3 is late'"
        ).fetchall()
    assert rows == [("Order 3 is late", USER_A.id, "closed")]
    with rig.superuser() as conn:  # Ada's two tickets were closed; Bob's was not counted
        statuses = conn.execute("SELECT user_id::text, status FROM tickets ORDER BY id").fetchall()
    assert statuses == [(USER_A.id, "closed"), (USER_B.id, "pending"), (USER_A.id, "closed")]
    # Every request was in the PostgREST grammar, as the signed-in user or anon.
    assert rig.shim.log and all(s.kind in ("ok", "database") for s in rig.shim.log)
    assert {s.role for s in rig.shim.log} == {"authenticated", "anon"}


def test_your_own_connector(tmp_path: Path) -> None:
    nb = run("03-your-own-connector.ipynb", tmp_path)
    clash = output(nb, "except DuplicateToolError")
    assert clash.startswith(
        "DuplicateToolError: two tools are named 'get_invoice': "
        "in connector 'billing' and connector 'crm'"
    )
    rejected = output(nb, "card.reject_button.click()")
    assert rejected.splitlines() == [
        "Understood: you rejected the refund, so nothing was sent.",
        "refunds sent: [('INV-2', 20.0)]",
    ]
    ctx = output(nb, 'context={"customer": "acme"}')
    assert ctx.startswith("complete | 2 overdue: INV-2, INV-4.")
    resumed = output(nb, "billing_bot.resume_sync").splitlines()
    assert resumed[0] == "awaiting_approval refund {'invoice_id': 'INV-3', 'amount': 500}"
    assert resumed[1].endswith("refunds sent: [('INV-2', 20.0), ('INV-3', 500.0)]")
    assert any("no invoice" in v for v in widget_values(nb, "loom-error"))
    # 6. MCP: a third-party server's write ran once approved; loom_nb's server held the other
    # agent's refund as a card until it was approved here, then ran it once.
    assert output(nb, "weather.close()") == "The server says: noted (27 characters)\n"
    asked = output(nb, 'asked = other_agent.run_sync("Please refund').splitlines()
    assert "(refund) waits for a person's decision; nothing has run" in asked[0]
    assert asked[1] == "refunds sent: [('INV-2', 20.0), ('INV-3', 500.0)]"
    assert output(nb, "Did it go through?").splitlines() == [
        "refunds sent: [('INV-2', 20.0), ('INV-3', 500.0), ('INV-1', 100.0)]",
        "Refunded 100.00 on INV-1.",
    ]


#: The table 04-real-models shows, whichever model answered: region, total, count.
SALES_BY_REGION = [["North", "1150.0", "3"], ["South", "610.0", "2"], ["West", "95.0", "1"]]


def sales_by_region(nb: Any) -> list[list[str]]:
    """The rows of the ``by_region`` frame the notebook prints, without its index."""
    table = output(nb, "by_region").splitlines()
    return [line.split()[1:] for line in table[1:]]


def test_real_models_offline(tmp_path: Path) -> None:
    nb = run("04-real-models.ipynb", tmp_path)
    assert output(nb, 'print("MODEL:"').strip() == "MODEL: offline replay model (scripted, no LLM)"
    # The replay's text must match the data the tool returned.
    assert sales_by_region(nb) == SALES_BY_REGION
    said = json.dumps(widget_values(nb, "loom-assistant"))
    assert "North leads with <strong>1,150.00</strong> over 3 sales" in said
    assert "MissingAPIKey: openai:gpt-4.1-mini needs an OpenAI API key" in output(
        nb, "no_key.run_sync"
    )
    # The budget card: paused before the turn that would pass 4,000 tokens, Continue went on.
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    shown = [shown_text(str(m["state"].get("value") or "")) for m in state.values()]
    assert "This run has used 2,640 tokens of 4,000 tokens; the next model turn needs" in (
        " ".join(shown)
    )
    assert '"continued with 4,000 tokens more"' in output(nb, "%%loom frugal --new")
    assert output(nb, "card.approve_button.click()").splitlines() == [
        "complete | North sells the most: 1,150.00 over 3 sales.",
        "thread: 5,500 tokens in · 100 out · $0.0024",
    ]
    assert "thread: 5,500 tokens in · 100 out · $0.0024" in json.dumps(
        widget_values(nb, "loom-usage"), ensure_ascii=False
    )
    listed = output(nb, "%loom threads")
    assert "tokens in" in listed and "$0.0024" in listed and "price unknown" in listed


def test_rules_and_questions(tmp_path: Path) -> None:
    nb = run("06-rules-and-questions.ipynb", tmp_path)
    assert output(nb, "print(rule.describe())").startswith(
        "allow frames_append on tickets up to 20 rows in thread "
    )
    assert "1 rule in force" in output(nb, "%loom rules")
    # thirty appends under the rule; the batch of 25 outside it waits, and is rejected
    filed = output(nb, "ran = [r for m in filed.new_messages").splitlines()
    assert filed[0] == "33 tickets | 30 approved by the rule | True"
    assert filed[1] == "awaiting_approval | frames_append 25 rows | pending"
    assert "the batch of 25 was yours to decide" in output(nb, "%loom reject {call_id}")
    # after the restart, the question's card is back and a click answers it
    assert output(nb, "card.choice_buttons[0].click()").strip() == (
        "complete | Counting by the fiscal quarter: 12 tickets."
    )
    assert widget_values(nb, "loom-question")
    [first, second] = sorted(threads(tmp_path / "work" / ".loom" / "loom.db"), key=len)
    for thread in (first, second):
        assert not thread.get("pending")
    results = [
        p
        for t in (first, second)
        for m in t["messages"]
        for p in m["parts"]
        if p["kind"] == "tool_result"
    ]
    assert [r.get("approval") for r in results].count("rule") == 30
    assert [r["content"] for r in results if r["name"] == "ask_user"] == ["fiscal"]


def test_exploration(tmp_path: Path) -> None:
    nb = run("05-exploration.ipynb", tmp_path)
    # -o bound the weekly aggregate of the open orders above 100: weeks start on Monday.
    weekly = output(nb, "weekly").splitlines()
    assert [line.split()[1:] for line in weekly[1:]] == [
        ["2026-01-05", "2", "430.50"],
        ["2026-02-02", "2", "385.25"],
        ["2026-03-02", "2", "540.00"],
    ]
    # The chart was drawn in the thread and is saved with it: displayed again, it is a PNG.
    assert widget_values(nb, "loom-chart")[0].startswith('<img class="loom-chart-image"')
    [chart_cell] = [c for c in nb.cells if "thread.charts[0]" in c.source]
    assert "image/png" in chart_cell.outputs[0].data
    said = json.dumps(widget_values(nb, "loom-assistant"))
    assert "<strong>6</strong> open orders above 100 in <strong>3</strong> weeks" in said
    assert "the week of 02 Mar has the most (540.00)" in said
    # the careless stand-in's invented figure, and only it, is marked in no result
    assert said.count(
        "(in no result)"
    ) == 1 and '>11</span><span class="loom-no-result"' in said.replace("\\", "")
    traced = output(nb, "for n in trace_numbers(careless")
    assert (
        "('8', 'shown'" in traced
        and "('1,542.75', 'shown'" in traced
        and "('11', None, None)" in traced
    )
    # The export: what it expects, its code, and the same frame as the thread's.
    assert "Exported thread " in output(nb, "%loom export --to")
    ran = output(nb, "NotebookClient(exported")
    assert "- `orders`: the DataFrame the agent read as table 'orders'" in ran
    assert 'bucket_start(matched["created_at"], "week")' in output(nb, 'if "result_1 =" in')
    assert output(nb, "pd.testing.assert_frame_equal").strip() == (
        "the exported notebook gives the thread's frame: 3 weeks, 1,355.75 in total"
    )
    exported = nbformat.read(tmp_path / "work" / "exported" / "weekly-open-orders.ipynb", 4)
    assert any('result_2 = draw_chart(result_1, "bar"' in c.source for c in exported.cells)
    # it opens on the story: the helpers' cell folded, the chart's comment in result_N terms
    assert exported.cells[1].metadata["jupyter"] == {"source_hidden": True}
    assert any(c.source.startswith("# Call 2 · chart · bar of result_1") for c in exported.cells)
    assert exported.metadata["kernelspec"]["display_name"] == "Python 3 (ipykernel)"
    nbformat.validate(exported)
    # the export cell's kernel logs no warning in red
    ran_cell = next(c for c in nb.cells if "NotebookClient(exported" in c.source)
    assert not [o for o in ran_cell.outputs if o.get("name") == "stderr"]
    # Every row, and two tables: a join with a p90, a histogram of every row, 53 weeks.
    tiers = output(nb, "tiers")
    assert "customers.tier" in tiers and "p90_total" in tiers
    by_hand = output(nb, "print(by_hand.sum()").splitlines()
    for tier, total in eval(by_hand[0]).items():  # the hand-written merge + groupby
        assert f"{tier}" in tiers and f"{total:.2f}"[:6] in tiers.replace(",", "")
    assert output(nb, "print(f\"{int(bins['count'].sum()):,} orders in").strip() == (
        "20,000 orders in 19 of 20 bins (empty bins are not rows)"
    )
    assert output(nb, "print(weeks.shape").startswith("(53, 2) 53 weeks matched")
    shown = json.dumps(widget_values(nb, "loom-chart"))
    assert "20,000 rows in 20 bins" in shown and "53 bars, one week each" in shown
    # The store: one thread, the aggregate then the chart of its result.
    [thread] = threads(tmp_path / "work" / ".loom" / "loom.db")
    calls = [p for m in thread["messages"] for p in m["parts"] if p["kind"] == "tool_call"]
    assert [c["name"] for c in calls] == ["frames_aggregate", "chart"]
    assert calls[1]["arguments"]["result"] == calls[0]["id"]


@pytest.fixture
def openai_server() -> Any:
    """The model adapters' scripted OpenAI wire-protocol server, on 127.0.0.1."""
    from tests.models._wire import WireServer

    server = WireServer()
    try:
        yield server
    finally:
        server.close()


def test_real_models_against_a_local_openai_compatible_server(
    tmp_path: Path, openai_server: Any
) -> None:
    from tests.models._wire import call_args, call_start, stream, text

    aggregate = {
        "table": "sales",
        "group_by": ["region"],
        "aggregates": [{"fn": "sum", "column": "amount"}, {"fn": "count"}],
        "order": [{"column": "sum_amount", "desc": True}],
    }
    openai_server.add(
        stream(
            {"content": "Totalling by region."},
            call_start(0, "call_1", "frames_aggregate"),
            call_args(0, json.dumps(aggregate)),
            finish="tool_calls",
            usage=(120, 30),
        ),
        text(
            "North sells the most: ",
            "1,150.00 over 3 sales (from the local server).",
            usage=(260, 14),
        ),
    )
    base_url = openai_server.url + "/v1"
    nb = run(
        "04-real-models.ipynb",
        tmp_path,
        OPENAI_API_KEY="test",
        OPENAI_BASE_URL=base_url,
        LOOM_OPENAI_MODEL="loom-test-model",
    )

    # The notebook took the real-model path, and says which server it talks to.
    assert output(nb, 'print("MODEL:"').strip() == (
        f"MODEL: OpenAIModel('loom-test-model', base_url='{base_url}')"
    )
    # The tool call the server sent really ran on the DataFrame; its answer and tokens show.
    assert sales_by_region(nb) == SALES_BY_REGION
    said = json.dumps(widget_values(nb, "loom-assistant"))
    assert "North sells the most: 1,150.00 over 3 sales (from the local server)." in said
    # the analyst's usage line first; then the budget section's scripted stand-in's
    assert widget_values(nb, "loom-usage")[0] == (
        '<span style="color:#888;font-size:85%">thread: 380 tokens in · 44 out · price unknown '
        "(this run: 380 tokens in · 44 out · price unknown)</span>"
    )
    assert output(nb, "no_key.run_sync") == ""  # the missing-key demo is for offline only

    # What the server received: two streamed turns with the key, the model, the settings and
    # the tools; the second one carries the tool call and its result.
    first, second = openai_server.requests
    assert [(r.method, r.path, r.headers["authorization"]) for r in (first, second)] == [
        ("POST", "/v1/chat/completions", "Bearer test")
    ] * 2
    for body in (first.body, second.body):
        assert (body["model"], body["stream"], body["temperature"], body["max_tokens"]) == (
            "loom-test-model",
            True,
            0,
            800,
        )
        assert sorted(t["function"]["name"] for t in body["tools"]) == [
            "ask_user",  # the built-in question tool
            "frames_aggregate",
            "frames_list_tables",
            "frames_select",
        ]
    question = [
        {
            "role": "system",
            "content": "You answer questions about the sales table. Use the tools; be brief.",
        },
        {"role": "user", "content": "Which region sells the most? Total the amounts by region."},
    ]
    assert first.body["messages"] == question
    assert second.body["messages"][:2] == question
    call, result = second.body["messages"][2:]
    assert call["content"] == "Totalling by region."
    assert [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in call["tool_calls"]
    ] == [("call_1", "frames_aggregate", aggregate)]
    assert result["role"] == "tool" and result["tool_call_id"] == "call_1"
    assert "North,1150.0,3" in result["content"]


def test_evals(tmp_path: Path) -> None:
    nb = run("07-evals.ipynb", tmp_path)
    [shown] = [c for c in nb.cells if c.source.strip() == "%loom eval --model careless"]
    html = shown.outputs[0]["data"]["text/html"]
    assert "2 of 3 threads equal" in html and "missing rows (2)" in html
    assert "Which orders are above 100?" in html
    frame = output(nb, "report.to_frame()")
    assert "Which orders are above 100?  False" in frame
    call = output(nb, "wrong = next(")
    assert "'value': 150}] | kept: [{'column': 'total', 'op': 'gt', 'value': 100}]" in call
    # orders 2 (150.0: not above 150) and 4 (120.0) are the rows the careless model missed
    assert "150.0" in call and "120.0" in call
    assert output(nb, 'print(analyst.eval(suite="default").equal)').strip() == "True"
    # the replays are kept in the report only: the store holds the three saved threads
    assert len(threads(tmp_path / "work" / ".loom" / "loom.db")) == 3
