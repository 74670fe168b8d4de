"""The magics through a real IPython shell (in-process): parsing, options, interpolation,
bindings, one-line UsageErrors, text rendering, approvals by line magic, widgets in-process."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from loom_nb import ReplayModel, Reply, Usage, define_agent
from loom_nb.notebook import session as loom_session
from loom_nb.notebook.interpolate import interpolate


def cell(sh: InteractiveShell, line: str, body: str | None = None) -> Any:
    code = line if body is None else f"{line}\n{body}"
    result = sh.run_cell(code, store_history=False)
    return result


def error_of(result: Any) -> str:
    exc = result.error_in_exec or result.error_before_exec
    return f"{type(exc).__name__}: {exc}" if exc is not None else ""


# ---- interpolation ---------------------------------------------------------------------------


def test_interpolation_replaces_known_names_and_leaves_code_and_json() -> None:
    class Obj:
        shape = (3, 2)

    ns = {"x": 5, "df": Obj(), "name": "orders"}
    text = 'Use {name} with {x} rows, shape {df.shape}; {"json": {"a": 1}} {unknown} {x + 1} {{x}}'
    assert interpolate(text, ns) == (
        'Use orders with 5 rows, shape (3, 2); {"json": {"a": 1}} {unknown} {x + 1} {x}'
    )
    assert interpolate("def f(): return {k: v for k in d}", ns) == (
        "def f(): return {k: v for k in d}"
    )
    assert interpolate("{df.missing}", ns) == "{df.missing}"


# ---- %%loom ----------------------------------------------------------------------------------


def test_cell_streams_as_text_binds_frames_and_continues_the_thread(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    model = shell.user_ns["model"]
    model.add(
        Reply("Looking.", [("orders", {"min_total": 100})]),
        "There are **2** of them.",
        "Still open.",
    )
    line = "%%loom analyst -o big -O all_ --result res"
    r = cell(shell, line, 'Orders above {threshold}? {"raw": 1}')
    assert r.success, error_of(r)
    out = capsys.readouterr().out
    assert 'you: Orders above 100? {"raw": 1}' in out
    assert "→ orders · min_total: 100" in out
    assert "[DataFrame 2 rows × 2 columns]" in out
    assert "There are **2** of them." in out
    big = shell.user_ns["big"]
    assert list(big.id) == [2, 3] and len(shell.user_ns["all_"]) == 1
    first = shell.user_ns["res"].thread.id
    assert cell(shell, "%%loom analyst --result res", "Open?").success
    assert shell.user_ns["res"].thread.id == first
    assert model.requests[-1].messages[0].text == 'Orders above 100? {"raw": 1}'
    assert cell(shell, "%%loom analyst --new --result res -o big", "{{threshold}}").success is False
    # no reply left: the failed run shows its error, raises, and -o was not touched
    assert shell.user_ns["res"].thread.id == first and list(shell.user_ns["big"].id) == [2, 3]
    assert model.requests[-1].messages[-1].text == "{threshold}"


def test_cells_on_a_thread_the_agent_keeps_do_not_load_it_again(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, model = shell.user_ns["analyst"], shell.user_ns["model"]
    model.add("One.", "Two.", "Three.", "Four.")
    assert cell(shell, "%%loom analyst --result res", "first").success
    thread_id = shell.user_ns["res"].thread.id
    loads: list[str] = []
    real = agent.store.load
    monkeypatch.setattr(agent.store, "load", lambda tid, **kw: loads.append(tid) or real(tid, **kw))
    assert cell(shell, "%%loom analyst", "second").success
    assert cell(shell, f"%%loom analyst --thread {thread_id}", "third").success
    assert loads == []  # a long thread costs the same per cell as a short one
    other = define_agent(name="analyst", model=ReplayModel(["elsewhere"]), store=agent.store)
    other.run_sync("from another kernel", thread_id=thread_id)
    loads.clear()
    assert cell(shell, "%%loom analyst", "fourth").success
    assert loads == [thread_id]  # what another kernel wrote is read, once
    assert [m.text for m in model.requests[-1].messages][-3:] == [
        "from another kernel",
        "elsewhere",
        "fourth",
    ]


def test_approving_a_call_another_kernel_decided_says_so(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, model, written = (shell.user_ns[k] for k in ("analyst", "model", "written"))
    model.add(Reply("Filing.", [("insert_ticket", {"subject": "late"})]), "Filed.")
    assert cell(shell, "%%loom analyst --result res", "File a ticket").success
    thread_id, call_id = shell.user_ns["res"].thread.id, shell.user_ns["res"].pending[0].call_id
    elsewhere = define_agent(
        name="analyst", model=ReplayModel(["Filed there."]), tools=agent.tools, store=agent.store
    )
    elsewhere.resume_sync(thread_id, {call_id: True})  # another kernel approved it first
    capsys.readouterr()
    assert not cell(shell, f"%loom approve {call_id}").success
    said = capsys.readouterr().err
    assert f"call {call_id} was already decided in another kernel" in said, said
    assert f"%loom show {thread_id}" in said and written == ["late"]


def test_completed_run_without_frames_binds_none(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["model"].add("Nothing to fetch.")
    shell.user_ns["big"] = "stale"
    assert cell(shell, "%%loom analyst -o big --raw", "{threshold}").success
    assert shell.user_ns["big"] is None
    assert "this run fetched no DataFrame" in capsys.readouterr().out
    assert shell.user_ns["model"].requests[-1].messages[-1].text == "{threshold}"


@pytest.mark.parametrize(
    ("line", "body", "expected"),
    [
        ("%%loom nobody", "hi", "'nobody' is not defined, not an agent; agents here: analyst"),
        ("%%loom threshold", "hi", "'threshold' is a int, not an agent"),
        ("%%loom analyst --new --thread abc", "hi", "use either --new or --thread ID"),
        ("%%loom analyst -o 1x", "hi", "-o '1x': give a Python variable name"),
        ("%%loom analyst --bogus", "hi", "unrecognized arguments: --bogus"),
        ("%%loom analyst", "   ", "the cell is empty"),
        ("%%loom analyst --thread nope", "hi", "no thread 'nope' for agent 'analyst'"),
        ("%loom frobnicate now", None, "unknown %loom command 'frobnicate'"),
        ("%loom resume nope", None, "no thread 'nope' for the agents here"),
        ("%loom approve call_x", None, "no call 'call_x' waits for approval"),
        ("%loom show", None, "analyst has no current thread"),
        ("%loom delete", None, "the following arguments are required: ID"),
        ("%loom eval add", None, "name the saved threads to mark"),
        ("%loom eval add nope", None, "no thread 'nope' for the agents here"),
        ("%loom eval", None, "eval suite 'default' of agent 'analyst' has no threads"),
        ("%loom eval a b", None, "runs one suite at a time"),
        ("%loom eval --suite x", None, "--suite goes with add"),
        ("%loom eval --instructions nope", None, "no variable 'nope' here"),
        ("%loom eval --instructions threshold", None, "'threshold' is a int, not a str"),
        ("%loom eval --instructions", None, "--instructions needs a value"),
        ("%loom eval add x --instructions threshold", None, "--instructions goes with"),
    ],
)
def test_mistakes_are_one_line_usage_errors(
    shell: InteractiveShell,
    capsys: pytest.CaptureFixture[str],
    line: str,
    body: str | None,
    expected: str,
) -> None:
    r = cell(shell, line, body)
    assert not r.success
    err = capsys.readouterr().err
    assert err.startswith("UsageError: ") and expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_eval_replays_the_suite_with_the_instructions_a_variable_holds(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["model"].add(Reply("", [("orders", {"min_total": 100})]), "Two.")
    assert cell(shell, "%%loom analyst --new", "Orders above 100?").success
    thread_id = shell.user_ns["analyst"].threads()[0].id
    assert cell(shell, f"%loom eval add {thread_id}").success
    second = ReplayModel([Reply("", [("orders", {"min_total": 200})]), "Deux."], name="second")
    shell.user_ns.update(second=second, terse="Answer in French, in one word.")
    capsys.readouterr()
    r = cell(shell, "%loom eval --model second --instructions terse")
    assert r.success, error_of(r)
    assert [q.instructions for q in second.requests] == ["Answer in French, in one word."] * 2
    report = r.result
    assert report.instructions_changed and not report.equal
    assert "second, other instructions" in report._repr_html_()
    assert list(report.threads[0].calls[0].missing_rows["id"]) == [2]
    for name in ("second", "terse"):
        shell.user_ns.pop(name)


def test_several_agents_need_a_name_or_a_default(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["other"] = define_agent(name="other", model=ReplayModel(["from other"]))
    r = cell(shell, "%%loom", "hi")
    assert "name the agent: %%loom AGENT (agents here: analyst, other)" in capsys.readouterr().err
    assert not r.success
    cell(shell, "%config LoomMagics.default_agent = 'other'")
    assert cell(shell, "%%loom", "hi").success
    assert "assistant: from other" in capsys.readouterr().out


def test_failed_run_prints_error_and_raises_one_line(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    r = cell(shell, "%%loom analyst", "Hello?")  # the model has no reply queued
    assert type(r.error_in_exec).__name__ == "RunFailed"
    captured = capsys.readouterr()
    assert "⚠ error:" in captured.out and "has no reply left" in captured.out
    shown = captured.out + captured.err
    assert "\nRunFailed: analyst: " in shown and "Traceback" not in shown


def test_context_setting_passes_the_signed_in_user_to_auth_agents(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[str] = []
    shell.user_ns["other"] = define_agent(
        name="scoped",
        model=ReplayModel(["hi ann", "hi bob"]),
        auth=lambda ctx: seen.append(ctx.get("user")) or ctx.get("user"),
    )
    r = cell(shell, "%%loom other", "hello")  # no context: the auth hook finds no user
    assert not r.success and "returned no user" in capsys.readouterr().err
    cell(shell, "%config LoomMagics.context = 'who'")
    try:
        r = cell(shell, "%%loom other", "hello")
        assert not r.success
        assert "LoomMagics.context names 'who', which is not a dict" in capsys.readouterr().err
        shell.user_ns["who"] = {"user": "ann"}
        assert cell(shell, "%%loom other", "hello").success
        assert "hi ann" in capsys.readouterr().out
        ann_threads = cell(shell, "%loom threads other").result
        assert len(ann_threads) == 1
        shell.user_ns["who"] = {"user": "bob"}
        assert len(cell(shell, "%loom threads other").result) == 0  # bob sees none of ann's
        assert cell(shell, "%%loom other --new", "hello").success
        assert "hi bob" in capsys.readouterr().out
        assert seen[-1] == "bob"
    finally:
        cell(shell, "%config LoomMagics.context = ''")
        shell.user_ns.pop("who", None)


# ---- threads and approvals by line magic -----------------------------------------------------


def test_threads_show_new_delete_and_approve_by_line_magic(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    model, written = shell.user_ns["model"], shell.user_ns["written"]
    model.add(
        Reply("Filing.", [("insert_ticket", {"subject": "late"})]),
        "Filed.",
        Reply("Again.", [("insert_ticket", {"subject": "no"})]),
        "Not filed then.",
    )
    assert cell(shell, "%%loom analyst --result res", "File a ticket").success
    out = capsys.readouterr().out
    thread_id = shell.user_ns["res"].thread.id
    call_id = shell.user_ns["res"].pending[0].call_id
    assert f"%loom approve {call_id}" in out and "subject" in out and "late" in out
    # a new message while a call waits: told exactly what to do
    assert not cell(shell, "%%loom analyst", "more").success
    assert f"%loom approve {call_id}" in capsys.readouterr().err

    table = cell(shell, "%loom threads analyst").result
    assert "threads in SQLite file " in capsys.readouterr().out  # says which store it read
    assert list(table.columns) == [
        "id",
        "title",
        "agent",
        "updated",
        "messages",
        "pending",
        "current",
        "tokens in",
        "cached",
        "tokens out",
        "cost",
    ]
    assert table.iloc[0][["id", "title", "pending", "current"]].tolist() == [
        thread_id,
        "File a ticket",
        1,
        True,
    ]

    assert cell(shell, "%loom approvals").success
    assert f"call {call_id}" in capsys.readouterr().out
    assert cell(shell, f"%loom approve {call_id}").success
    out = capsys.readouterr().out
    assert written == ["late"] and "insert_ticket [approved]" in out and "Filed." in out
    r = cell(shell, f"%loom approve {call_id}")
    assert not r.success and written == ["late"]
    assert "no call" in capsys.readouterr().err

    assert cell(shell, "%loom show").success
    shown = capsys.readouterr().out
    assert "you: File a ticket" in shown and "Filed." in shown

    assert cell(shell, "%loom new analyst").success
    assert cell(shell, "%%loom analyst --result res", "Another").success
    second = shell.user_ns["res"]
    assert second.thread.id != thread_id
    assert cell(shell, f"%loom reject {second.pending[0].call_id}").success
    assert written == ["late"] and "Not filed then." in capsys.readouterr().out

    assert cell(shell, f"%loom resume {thread_id}").success
    assert loom_session(shell).current["analyst"] == thread_id
    assert cell(shell, f"%loom delete {thread_id}").success
    assert len(cell(shell, "%loom threads").result) == 1
    assert loom_session(shell).current["analyst"] is None


def test_threads_show_each_threads_tokens_and_cost_and_say_price_unknown(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    # a priced agent ($1 / $2 per million tokens) and the fixture's, whose model has no price
    priced_model = ReplayModel(
        [
            Reply("Two.", usage=Usage(1000, 200, 1, cache_read_tokens=400)),
            Reply("Three.", usage=Usage(2000, 300, 1)),
        ]
    )
    shell.user_ns["priced"] = define_agent(
        name="priced", model=priced_model, prices={"input": 1.0, "output": 2.0}
    )
    shell.user_ns["model"].add(Reply("Hi.", usage=Usage(50, 7, 1)))
    try:
        assert cell(shell, "%%loom priced", "one").success
        assert cell(shell, "%%loom priced", "two").success
        assert cell(shell, "%%loom analyst", "hello").success
        capsys.readouterr()
        table = cell(shell, "%loom threads").result
        rows = {r["agent"]: r for r in table.to_dict("records")}
        columns = ["tokens in", "cached", "tokens out", "cost"]
        # the whole thread's turns added up: 3,000 in (400 cached), 500 out, $0.004
        assert [rows["priced"][c] for c in columns] == [3000, 400, 500, "$0.0040"]
        assert [rows["analyst"][c] for c in columns] == [50, 0, 7, "price unknown"]
    finally:
        shell.user_ns.pop("priced", None)
        loom_session(shell).current.pop("priced", None)


# ---- widgets in-process ----------------------------------------------------------------------


def test_cards_decide_once_each_and_resume_when_all_are_decided(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(shell, "%config LoomMagics.display = 'widgets'")
    model, written = shell.user_ns["model"], shell.user_ns["written"]
    model.add(
        Reply("Two.", [("insert_ticket", {"subject": "a"}), ("insert_ticket", {"subject": "b"})]),
        "One filed, one not.",
    )
    assert cell(shell, "%%loom analyst", "Two tickets").success
    view: Any = loom_session(shell).last_view
    classes = [c for w in view.body.children for c in w._dom_classes]
    assert classes.count("loom-approval") == 2 and "loom-user" in classes
    first, second = view.cards
    future = first.approve()
    assert first.approve() is None and first.reject() is None  # one decision per card
    partial = future.result(10)
    assert partial.status == "awaiting_approval" and written == []
    assert "waiting for 1 other decision" in first.decision_label.value
    second.reject_button.click()
    done = view.wait(10)
    assert done.status == "complete" and written == ["a"]
    assert "done" in first.decision_label.value
    assert "nothing was run or written" in second.decision_label.value
    assert all(b.disabled for c in view.cards for b in (c.approve_button, c.reject_button))
    texts = [w.value for w in view.body.children if "loom-assistant" in w._dom_classes]
    assert texts[-1] == "<p>One filed, one not.</p>\n"
    assert view.running.layout.display == "none"


def test_chat_widget_sends_without_blocking_and_continues_the_thread(
    shell: InteractiveShell,
) -> None:
    cell(shell, "%config LoomMagics.display = 'widgets'")
    model = shell.user_ns["model"]
    model.add("First answer.", "Second answer.")
    shown = cell(shell, "%loom analyst")
    assert shown.success and shown.result is None  # displayed once, not also returned
    chat = loom_session(shell).last_chat
    assert "loom-chat-input" in chat.input._dom_classes
    chat.input.value = "  "
    assert chat.ask() is None  # nothing to send
    chat.input.value = "Hello"
    chat.send_button.click()
    assert chat.wait(10).output == "First answer." and chat.input.value == ""
    first = loom_session(shell).current["analyst"]
    assert chat.ask("And now?") is not None
    assert chat.wait(10).thread.id == first
    assert [m.text for m in model.requests[-1].messages if m.role == "user"] == [
        "Hello",
        "And now?",
    ]


def test_auto_display_prints_text_without_a_kernel(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(shell, "%config LoomMagics.display = 'auto'")
    shell.user_ns["model"].add("Plain text here.")
    assert cell(shell, "%%loom analyst", "hi").success
    assert "assistant: Plain text here." in capsys.readouterr().out
    assert not cell(shell, "%loom analyst").success  # no chat widget without a frontend
    assert "needs a Jupyter frontend; here use %%loom analyst" in capsys.readouterr().err
    cell(shell, "%config LoomMagics.rows = -1")  # refused (IPython logs the reason)
    assert loom_session(shell).settings.rows == 10


def test_an_id_that_starts_with_a_dash_is_an_id_not_an_option(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    from loom_nb import Message, Thread

    agent = shell.user_ns["analyst"]
    thread = Thread(id="-dash-first-id", agent="analyst", title="old id")
    agent.store.save_thread(thread)
    message = Message.user("from an older store")
    thread.messages.append(message)
    agent.store.append(thread, message)
    assert cell(shell, "%loom show -dash-first-id").success
    assert "from an older store" in capsys.readouterr().out


def test_the_waiting_cell_run_again_shows_its_card_and_sends_nothing(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """Running a cell twice: the same message, while its write waits, is not sent again; the
    thread and its card are shown again. Another message is still told how to decide."""
    model, written = shell.user_ns["model"], shell.user_ns["written"]
    model.add(Reply("Filing.", [("insert_ticket", {"subject": "late"})]), "Filed.")
    assert cell(shell, "%%loom analyst --result res", "File a ticket").success
    call_id = shell.user_ns["res"].pending[0].call_id
    capsys.readouterr()
    asked = len(model.requests)
    assert cell(shell, "%%loom analyst", "File a ticket\n").success
    out = capsys.readouterr().out
    assert "it was not sent again" in out
    assert f"%loom approve {call_id}" in out and "you: File a ticket" in out
    assert len(model.requests) == asked and written == []
    assert not cell(shell, "%%loom analyst", "something else").success
    assert f"%loom approve {call_id}" in capsys.readouterr().err


def test_show_takes_an_agent_and_threads_read_as_local_minutes(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    import re

    model = shell.user_ns["model"]
    model.add("First answer.", "Second answer.")
    assert cell(shell, "%%loom analyst", "one").success
    assert cell(shell, "%loom show analyst").success  # the current thread
    assert "First answer." in capsys.readouterr().out
    loom_session(shell).current.clear()  # as after a restart: the latest thread
    assert cell(shell, "%loom show analyst").success
    assert "First answer." in capsys.readouterr().out
    shell.user_ns["other"] = define_agent(name="other", model=ReplayModel([]))
    r = cell(shell, "%loom show other")
    assert error_of(r) == "UsageError: other has no saved threads yet: ask it with %%loom other"
    [updated] = cell(shell, "%loom threads analyst").result["updated"]
    # local time, to the minute, with its zone: no microseconds, no +00:00
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d \S+", updated), updated


def test_load_ext_twice_says_nothing(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run All twice runs ``%load_ext loom_nb`` twice: the second is silent and the magics
    and session stay the same."""
    before = loom_session(shell)
    for _ in range(2):
        assert cell(shell, "%load_ext loom_nb").success
    said = capsys.readouterr()
    assert "already loaded" not in said.out + said.err
    assert loom_session(shell) is before
    assert cell(shell, "%reload_ext loom_nb").success
    assert loom_session(shell) is before
