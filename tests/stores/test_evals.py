"""Evals from saved threads, on every store (memory, SQLite, PostgreSQL): a thread replayed
with its own script is equal on every call; a model that filters differently gets exactly the
rows it missed and the rows it added; no write runs during an eval, whatever the tool's
connector says; eval suites are kept in the store. The DataFrame connector is the real one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from loom_nb import ReplayModel, Reply, Store, ThreadNotFound, UserError, define_agent, tool
from loom_nb.frames import frame_tools
from tests.stores.conftest import Backend


def orders() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [1, 2, 3, 4, 5],
            "total": [50.0, 150.0, 250.0, 120.0, 99.5],
            "status": ["open", "open", "closed", "open", "open"],
            "tier": ["a", "b", "a", "b", "a"],
        }
    )


def above(total: float) -> Reply:
    return Reply(
        "",
        [
            (
                "frames_select",
                {"table": "orders", "filters": [{"column": "total", "op": "gt", "value": total}]},
            )
        ],
    )


def by_tier(fn: str = "sum") -> Reply:
    return Reply(
        "",
        [
            (
                "frames_aggregate",
                {
                    "table": "orders",
                    "group_by": ["tier"],
                    "aggregates": [{"fn": fn, "column": "total"}],
                },
            )
        ],
    )


def script() -> list[Any]:
    """One thread of two questions: a filter, then an aggregate."""
    return [above(100), "Three orders are above 100.", by_tier(), "Tier a has 399.5."]


def analyst(store: Store, replies: list[Any], frame: pd.DataFrame | None = None, **kw: Any) -> Any:
    data = frame_tools({"orders": {"frame": orders() if frame is None else frame, "write": True}})
    return define_agent(
        name="analyst", model=ReplayModel(replies), connectors=[data], store=store, **kw
    )


def saved(agent: Any) -> str:
    first = agent.run_sync("Which orders are above 100?")
    agent.run_sync("Revenue by tier?", thread_id=first.thread_id)
    return first.thread_id


def test_the_same_script_again_is_equal_on_every_call(store: Store):
    agent = analyst(store, script())
    thread_id = saved(agent)
    listed = [i.id for i in agent.threads()]

    report = agent.eval([thread_id], model=ReplayModel(script(), name="again"))

    (one,) = report.threads
    assert [c.tool for c in one.calls] == ["frames_select", "frames_aggregate"]
    assert [(c.status, c.equal) for c in one.calls] == [("equal", True), ("equal", True)]
    assert one.final is not None and one.final.equal
    assert one.equal and report.equal
    frame = report.to_frame()
    assert frame["equal"].tolist() == [True]
    assert frame.loc[0, "thread"] == thread_id
    assert frame.loc[0, ["calls", "calls_different", "missing_rows", "extra_rows"]].tolist() == [
        2,
        0,
        0,
        0,
    ]
    assert frame.loc[0, "steps"] == frame.loc[0, "kept_steps"] == 4
    assert report.model == "test:again"
    # the replay is kept in the report, never in the user's store
    assert [i.id for i in agent.threads()] == listed
    assert one.replay is not None and one.replay.id != thread_id
    assert [m.text for m in one.replay.messages if m.role == "user"] == [
        "Which orders are above 100?",
        "Revenue by tier?",
    ]


def test_a_thread_object_and_the_sync_and_async_forms_give_one_report(store: Store):
    import asyncio

    agent = analyst(store, script())
    thread = agent.thread(saved(agent))
    sync = agent.eval(threads=[thread], model=ReplayModel(script()))
    later = asyncio.run(agent.eval_async(threads=[thread.id], model=ReplayModel(script())))
    assert sync.to_frame()["equal"].tolist() == later.to_frame()["equal"].tolist() == [True]


def test_another_filter_gets_the_exact_missing_and_extra_rows(store: Store):
    agent = analyst(store, script())
    thread_id = saved(agent)
    # 130 instead of 100 misses order 4 (120.0); "mean" instead of "sum" changes both tiers
    other = ReplayModel([above(130), "Two.", by_tier("mean"), "Tier a: 133.2."])

    report = agent.eval([thread_id], model=other)

    select, aggregate = report.threads[0].calls
    assert (select.status, select.equal) == ("different", False)
    assert select.args == {
        "table": "orders",
        "filters": [{"column": "total", "op": "gt", "value": 130}],
    }
    assert select.kept_args["filters"][0]["value"] == 100
    assert select.missing_rows["id"].tolist() == [4]
    assert select.missing_rows["total"].tolist() == [120.0]
    assert len(select.extra_rows) == 0
    assert select.missing_columns == [] and select.extra_columns == []
    # the aggregate's column is named after its function: one column missing, one extra
    assert aggregate.status == "different"
    assert aggregate.missing_columns and aggregate.extra_columns
    assert not report.equal
    row = report.to_frame().iloc[0]
    assert bool(row["equal"]) is False
    assert row["calls_different"] == 2 and row["missing_rows"] == 1


def test_a_wider_filter_gets_the_extra_rows(store: Store):
    agent = analyst(store, [above(100), "Three."])
    first = agent.run_sync("Which orders are above 100?")
    report = agent.eval([first.thread_id], model=ReplayModel([above(60), "Four."]))
    (call,) = report.threads[0].calls
    assert call.extra_rows["id"].tolist() == [5] and len(call.missing_rows) == 0


def test_numbers_are_equal_within_the_tolerance_and_differ_past_it(store: Store):
    agent = analyst(store, [above(100), "Three."])
    thread_id = agent.run_sync("Which orders are above 100?").thread_id
    nudged = orders()
    nudged.loc[1, "total"] = 150.0 * (1 + 1e-12)  # order 2, inside the default rel 1e-9
    inside = analyst(store, [], frame=nudged).eval(
        [thread_id], model=ReplayModel([above(100), "x"])
    )
    assert inside.equal
    nudged.loc[1, "total"] = 150.01
    outside = analyst(store, [], frame=nudged).eval(
        [thread_id], model=ReplayModel([above(100), "x"])
    )
    (call,) = outside.threads[0].calls
    assert call.different_rows.to_dict("records") == [
        {"index": 1, "column": "total", "kept": 150.0, "got": 150.01}
    ]
    loose = analyst(store, [], frame=nudged).eval(
        [thread_id], model=ReplayModel([above(100), "x"]), rel_tol=1e-3
    )
    assert loose.equal


def test_no_write_runs_during_an_eval_whatever_the_connector_says(store: Store, tmp_path: Path):
    written = tmp_path / "written.txt"

    @tool(needs_approval=True)
    def write_note(text: str) -> str:
        """Write a note to the file."""
        with written.open("a") as f:
            f.write(text)
        return "written"

    frame = orders()
    # approve_writes=False: the connector says its writes need no approval
    data = frame_tools({"orders": {"frame": frame, "write": True}}, approve_writes=False)
    append = (
        "frames_append",
        {"table": "orders", "rows": [{"id": 9, "total": 1.0, "status": "open", "tier": "a"}]},
    )
    replies = [Reply("", [("write_note", {"text": "hello"}), append]), "Done."]
    agent = define_agent(
        name="writer",
        model=ReplayModel(replies),
        tools=[write_note],
        connectors=[data],
        store=store,
    )
    first = agent.run_sync("Note hello and add order 9.")
    assert first.status == "awaiting_approval"
    (pending,) = first.pending
    agent.resume_sync(first.thread_id, {pending.call_id: True})
    assert written.read_text() == "hello" and len(frame) == 6
    written.write_text("")
    rows_before = len(frame)
    agent.allow(tool="write_note", scope="agent")  # a rule approving it changes nothing either

    report = agent.eval([first.thread_id], model=ReplayModel(replies))

    assert written.read_text() == ""  # the side effect never happened
    assert len(frame) == rows_before
    calls = report.threads[0].calls
    assert [(c.tool, c.refused, c.equal) for c in calls] == [
        ("write_note", True, True),
        ("frames_append", True, True),
    ]
    results = [r for m in report.threads[0].replay.messages for r in m.tool_results]
    assert all(r.is_error and "Writes are off" in r.content for r in results)
    assert report.equal


def test_another_write_than_the_saved_one_differs(store: Store):
    @tool(needs_approval=True)
    def write_note(text: str) -> str:
        """Write a note."""
        return "written"

    agent = define_agent(
        name="writer",
        model=ReplayModel([Reply("", [("write_note", {"text": "a"})]), "ok"]),
        tools=[write_note],
        store=store,
    )
    first = agent.run_sync("Note a.")
    agent.resume_sync(first.thread_id, {first.pending[0].call_id: True})
    report = agent.eval(
        [first.thread_id], model=ReplayModel([Reply("", [("write_note", {"text": "b"})]), "ok"])
    )
    (call,) = report.threads[0].calls
    assert (call.refused, call.equal, call.status) == (True, False, "different")


def test_a_call_the_eval_did_not_make_is_missing_and_one_it_added_is_extra(store: Store):
    agent = analyst(store, [above(100), "Three."])
    thread_id = agent.run_sync("Which orders are above 100?").thread_id
    skipped = agent.eval([thread_id], model=ReplayModel(["I know: three."]))
    (call,) = skipped.threads[0].calls
    assert (call.status, call.tool) == ("missing", "frames_select")
    assert call.missing_rows["id"].tolist() == [2, 3, 4]
    twice = agent.eval([thread_id], model=ReplayModel([above(100), above(200), "Three."]))
    assert [c.status for c in twice.threads[0].calls] == ["equal", "extra"]
    assert twice.threads[0].calls[1].extra_rows["id"].tolist() == [3]


def test_a_model_that_fails_is_reported_and_the_next_thread_is_replayed(store: Store):
    agent = analyst(store, [above(100), "Three.", above(200), "One."])
    one = agent.run_sync("Which orders are above 100?").thread_id
    two = agent.run_sync("Which orders are above 200?").thread_id
    # the model has replies for the first thread only
    report = agent.eval([two, one], model=ReplayModel([above(200), "One."]))
    assert report.threads[0].equal
    assert not report.threads[1].equal
    assert "no reply left" in (report.threads[1].error or "")


def test_suites_are_kept_in_the_store(backend: Backend):
    store = backend.open()
    agent = analyst(store, [above(100), "Three.", above(200), "One."])
    one = agent.run_sync("Which orders are above 100?").thread_id
    two = agent.run_sync("Which orders are above 200?").thread_id
    assert agent.add_eval([one]) == [one]
    assert agent.add_eval([two, one]) == [one, two]  # a thread in the suite stays once
    assert agent.add_eval(two, suite="big") == [two]
    with pytest.raises(ThreadNotFound):
        agent.add_eval(["no-such-thread"])
    again = analyst(backend.open(), [])  # another kernel on the same store
    assert again.eval_suites() == {"default": [one, two], "big": [two]}
    report = again.eval(model=ReplayModel([above(100), "Three.", above(200), "One."]))
    assert [t.thread_id for t in report.threads] == [one, two] and report.equal
    assert report.suite == "default"
    with pytest.raises(UserError, match=r"suite 'none' .* has no threads"):
        again.eval(suite="none")
    with pytest.raises(UserError, match="not both"):
        again.eval([one], suite="big")


def test_the_threads_own_calls_replayed_are_equal_on_every_call(store: Store):
    agent = analyst(store, script())
    thread = agent.thread(saved(agent))
    report = agent.eval([thread], model=ReplayModel.of_thread(thread))
    assert [c.equal for c in report.threads[0].calls] == [True, True] and report.equal


def test_a_question_goes_unanswered_in_an_eval_and_the_same_question_is_equal(store: Store):
    ask = Reply("", [("ask_user", {"question": "Fiscal or calendar?"})])
    agent = analyst(store, [ask, "Fiscal it is."])
    first = agent.run_sync("Revenue last quarter?")
    agent.resume_sync(first.thread_id, {first.pending[0].call_id: "fiscal"})
    report = agent.eval([first.thread_id], model=ReplayModel([ask, "I will assume fiscal."]))
    (call,) = report.threads[0].calls
    assert (call.tool, call.refused, call.equal) == ("ask_user", True, True)
    (result,) = [r for m in report.threads[0].replay.messages for r in m.tool_results]
    assert "No one answers questions in an eval run" in result.content
    assert report.threads[0].replay.pending == []
