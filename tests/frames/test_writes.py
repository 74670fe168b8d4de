"""append and update through an agent: approval, in place, refusals, and restarts."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from loom_nb import ReplayModel, Reply, define_agent
from loom_nb._tools import Connector
from loom_nb.frames import frame_tools
from tests.frames._orders import call, flt, orders_frame, refused

# ---- writes through an agent: approve, reject ----------------------------------------------------


def writable(orders: pd.DataFrame, **kwargs: Any) -> Connector:
    return frame_tools({"orders": {"frame": orders, "write": True}}, **kwargs)


NEW_ROW = {
    "id": 9,
    "total": "42.5",
    "status": "open",
    "segment": "wholesale",
    "priority": "mid",
    "paid": "true",
    "qty": 2,
    "created_at": "2024-01-09T10:00:00+01:00",
    "shipped_on": "2024-02-09",
}


def agent_for(conn: Connector, *calls: tuple[str, dict[str, Any]], store: Any = None) -> Any:
    model = ReplayModel([Reply("On it.", list(calls)), "Done.", "Done again."])
    return define_agent(name="analyst", model=model, connectors=[conn], store=store)


async def test_an_approved_append_changes_the_users_frame_in_place(orders):
    dtypes, ident = orders.dtypes.copy(), id(orders)
    alias = orders
    agent = agent_for(writable(orders), ("frames_append", {"table": "orders", "rows": [NEW_ROW]}))
    result = await agent.run("Add order 9")
    assert result.status == "awaiting_approval"
    (pending,) = result.pending
    assert len(orders) == 8  # nothing written before Approve
    preview = pending.preview
    assert preview["table"] == "orders"
    assert isinstance(preview["rows"], pd.DataFrame)
    assert list(preview["rows"].dtypes) == list(dtypes)
    assert list(preview["rows"].index) == [8]

    done = await agent.resume(result.thread_id, {pending.call_id: True})
    assert done.status == "complete"
    assert len(orders) == 9 and alias is orders and id(orders) == ident
    assert isinstance(orders.index, pd.RangeIndex) and list(orders.index) == list(range(9))
    assert_frame_equal(orders.dtypes.to_frame(), dtypes.to_frame())
    row = orders.iloc[-1]
    assert row["id"] == 9 and row["total"] == 42.5 and row["paid"] is np.True_
    assert row["segment"] == "wholesale" and row["priority"] == "mid" and row["qty"] == 2
    assert row["created_at"] == pd.Timestamp("2024-01-09T09:00:00Z")
    assert row["shipped_on"] == pd.Timestamp("2024-02-09")
    assert_frame_equal(orders.iloc[:8], orders_frame())  # the old rows are untouched
    (res,) = [r for r in done.thread.tool_results() if r.name == "frames_append"]
    assert res.approval == "approved" and not res.is_error
    assert res.content.startswith("Appended 1 row(s) to 'orders'; it now has 9 rows.")
    assert_frame_equal(res.data, orders.iloc[[8]])


async def test_a_rejected_append_leaves_the_frame_as_it_was(orders):
    agent = agent_for(writable(orders), ("frames_append", {"table": "orders", "rows": [NEW_ROW]}))
    result = await agent.run("Add order 9")
    done = await agent.resume(result.thread_id, {result.pending[0].call_id: False})
    assert_frame_equal(orders, orders_frame())
    (res,) = [r for r in done.thread.tool_results() if r.name == "frames_append"]
    assert res.is_error and res.approval == "rejected"
    assert "rejected" in json.loads(res.content)["error"]


async def test_an_approved_update_changes_only_the_matching_rows(orders):
    before = orders.copy()
    earlier = await call(writable(orders), "frames_select", {"table": "orders"})
    args = {
        "table": "orders",
        "values": {"status": "shipped", "qty": None, "shipped_on": "2024-03-01"},
        "filters": [flt("status", "eq", "open"), flt("total", "lt", 50)],
    }
    agent = agent_for(writable(orders), ("frames_update", args))
    result = await agent.run("Ship the small open orders")
    (pending,) = result.pending
    preview = pending.preview
    assert preview["where"] == "status = 'open' AND total < 50"
    assert preview["rows_matched"] == 2
    assert preview["changes"] == {
        "status": "shipped",
        "qty": None,
        "shipped_on": pd.Timestamp("2024-03-01"),
    }
    assert preview["effect"] == (
        "2 rows match now (shown below); if other rows match when it runs, nothing is changed"
    )
    rows = preview["rows that change"]
    assert list(rows["id"]) == [1, 6]
    # each changed column as it is and as it will be, side by side
    assert list(rows["status (now)"]) == ["open", "open"]
    assert list(rows["status (new)"]) == ["shipped", "shipped"]
    assert list(rows.columns).index("status (new)") == list(rows.columns).index("status (now)") + 1
    assert_frame_equal(orders, before)

    await agent.resume(result.thread_id, {pending.call_id: True})
    changed = orders["id"].isin([1, 6])
    assert list(orders.loc[changed, "status"]) == ["shipped", "shipped"]
    assert orders.loc[changed, "qty"].isna().all()
    assert (orders.loc[changed, "shipped_on"] == pd.Timestamp("2024-03-01")).all()
    assert_frame_equal(orders.loc[~changed], before.loc[~changed])
    assert_frame_equal(orders.dtypes.to_frame(), before.dtypes.to_frame())
    # a frame fetched earlier (like those in thread.frames) keeps what it showed
    assert_frame_equal(earlier.data, before)


async def test_an_update_whose_rows_changed_while_its_card_waited_changes_nothing(orders):
    """The user keeps working while a card waits: if the approved update would now match other
    rows than the card showed, nothing changes and both the model and the card say so."""
    args = {"table": "orders", "values": {"paid": False}, "filters": [flt("status", "eq", "open")]}
    agent = agent_for(writable(orders), ("frames_update", args))
    result = await agent.run("Unpay the open orders")
    (pending,) = result.pending
    assert pending.preview["rows_matched"] == 3  # ids 1, 3, 6
    orders.loc[orders["id"] == 2, "status"] = "open"  # meanwhile, in the notebook
    before = orders.copy()
    done = await agent.resume(result.thread_id, {pending.call_id: True})
    assert_frame_equal(orders, before)  # not one value written
    (res,) = [r for r in done.thread.tool_results() if r.name == "frames_update"]
    assert res.is_error and res.approval == "approved"
    assert res.error == (
        "Nothing was updated: 'orders' changed since the approval card was shown: the update "
        "matched 3 rows then and 4 now, or other rows. Send the update again so the user sees "
        "the rows it matches now."
    )


async def test_an_update_matching_as_many_but_other_rows_changes_nothing(orders):
    args = {"table": "orders", "values": {"qty": 0}, "filters": [flt("status", "eq", "open")]}
    agent = agent_for(writable(orders), ("frames_update", args))
    result = await agent.run("Zero the open orders")
    orders.loc[orders["id"] == 1, "status"] = "closed"  # one row leaves the match ...
    orders.loc[orders["id"] == 2, "status"] = "open"  # ... another one joins: still 3
    before = orders.copy()
    done = await agent.resume(result.thread_id, {result.pending[0].call_id: True})
    assert_frame_equal(orders, before)
    (res,) = [r for r in done.thread.tool_results() if r.name == "frames_update"]
    assert "matched 3 rows then and 3 now, or other rows" in (res.error or "")


async def test_an_update_that_matches_no_rows_says_so_on_its_card(orders):
    args = {"table": "orders", "values": {"qty": 0}, "filters": [flt("status", "eq", "gone")]}
    result = await agent_for(writable(orders), ("frames_update", args)).run("Zero them")
    (pending,) = result.pending
    assert pending.preview["effect"] == "this update matches no rows"
    assert pending.preview["rows_matched"] == 0 and "rows that change" not in pending.preview


async def test_a_rejected_update_leaves_the_frame_as_it_was(orders):
    args = {"table": "orders", "values": {"paid": True}, "filters": [flt("paid", "eq", False)]}
    agent = agent_for(writable(orders), ("frames_update", args))
    result = await agent.run("Mark all paid")
    await agent.resume(result.thread_id, {result.pending[0].call_id: False})
    assert_frame_equal(orders, orders_frame())


async def test_an_update_without_a_filter_is_refused_without_asking(orders):
    agent = agent_for(
        writable(orders),
        ("frames_update", {"table": "orders", "values": {"paid": True}}),
        ("frames_update", {"table": "orders", "values": {"paid": True}, "filters": []}),
    )
    result = await agent.run("Mark everything paid")
    assert result.status == "complete" and not result.pending
    errors = [json.loads(r.content)["error"] for r in result.thread.tool_results()]
    assert "'filters' is a required property" in errors[0]
    assert "should be non-empty" in errors[1]
    assert_frame_equal(orders, orders_frame())


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        (
            "frames_append",
            {"rows": [{**NEW_ROW, "qty": "many"}]},
            "rows[0]: column orders.qty holds numbers (Int64); 'many' is not a number",
        ),
        (
            "frames_append",
            {"rows": [{**NEW_ROW, "segment": "online"}]},
            "rows[0]: column orders.segment takes one of its categories (they are below)",
        ),
        (
            "frames_append",
            {"rows": [{"total": 1.0}]},
            "rows[0] has no value for orders.id (int64), which cannot be empty",
        ),
        ("frames_append", {"rows": [{**NEW_ROW, "id": 9.5}]}, "not a whole number"),
        ("frames_append", {"rows": [{**NEW_ROW, "secret": 1}]}, "has no column 'secret'"),
        (
            "frames_append",
            {"rows": [{**NEW_ROW, "created_at": "soon"}]},
            "'soon' is not a date or time",
        ),
        (
            "frames_update",
            {"values": {"paid": None}, "filters": [flt("id", "eq", 1)]},
            "orders.paid (bool) cannot be set to empty (null)",
        ),
        (
            "frames_update",
            {"values": {"total": "free"}, "filters": [flt("id", "eq", 1)]},
            "values: column orders.total holds numbers",
        ),
        (
            "frames_update",
            {"values": {"total": 1}, "filters": [flt("when", "eq", 1)]},
            "has no column 'when'",
        ),
    ],
)
async def test_a_write_that_cannot_work_is_answered_at_once_and_writes_nothing(
    orders, tool, args, message
):
    agent = agent_for(writable(orders), (tool, {"table": "orders", **args}))
    result = await agent.run("Write it")
    assert result.status == "complete" and not result.pending
    (res,) = list(result.thread.tool_results())
    assert res.is_error and message in json.loads(res.content)["error"]
    assert_frame_equal(orders, orders_frame())


async def test_a_write_answered_with_an_error_never_writes_even_if_it_would_work_now(orders):
    """A call is answered without approval only because its arguments could not work; if the
    frame changes in between, the call still writes nothing."""
    conn = writable(orders)
    args = {"table": "orders", "rows": [{**NEW_ROW, "segment": "online"}]}
    tool = conn.tools["frames_append"]
    assert tool.requires_approval(args) is False  # would fail: answered at once
    orders["segment"] = orders["segment"].cat.add_categories(["online"])
    await refused(conn, "frames_append", args, "the table changed while this call was checked")
    assert len(orders) == 8
    assert tool.requires_approval(args) is True  # sent again, it waits for the user


async def test_without_approval_writes_run_at_once(orders):
    agent = agent_for(
        writable(orders, approve_writes=False),
        ("frames_append", {"table": "orders", "rows": [NEW_ROW]}),
    )
    result = await agent.run("Add order 9")
    assert result.status == "complete" and len(orders) == 9


async def test_an_append_and_an_update_approved_together_both_land(orders):
    agent = agent_for(
        writable(orders),
        ("frames_append", {"table": "orders", "rows": [NEW_ROW, {**NEW_ROW, "id": 10}]}),
        (
            "frames_update",
            {"table": "orders", "values": {"total": 0}, "filters": [flt("id", "lte", 2)]},
        ),
    )
    result = await agent.run("Both")
    await agent.resume(result.thread_id, {p.call_id: True for p in result.pending})
    assert list(orders["id"]) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert list(orders["total"][:2]) == [0.0, 0.0]


async def test_append_labels_follow_the_largest_integer_label_and_empty_frames_start_at_0():
    sparse = pd.DataFrame({"x": [1, 2]}, index=pd.Index([10, 3], name="row"))
    conn = frame_tools({"t": {"frame": sparse, "write": True}}, approve_writes=False)
    await call(conn, "frames_append", {"table": "t", "rows": [{"x": 3}, {"x": 4}]})
    assert list(sparse.index) == [10, 3, 11, 12] and sparse.index.name == "row"
    assert list(sparse["x"]) == [1, 2, 3, 4]

    empty = pd.DataFrame(
        {
            "when": pd.Series([], dtype="datetime64[ns, Europe/Berlin]"),
            "n": pd.Series([], dtype="Int64"),
        }
    )
    conn = frame_tools({"t": {"frame": empty, "write": True}}, approve_writes=False)
    await call(conn, "frames_append", {"table": "t", "rows": [{"when": "2024-06-01T12:00"}]})
    assert isinstance(empty.index, pd.RangeIndex) and list(empty.index) == [0]
    assert str(empty["when"].dtype) == "datetime64[ns, Europe/Berlin]"
    assert empty["when"][0] == pd.Timestamp("2024-06-01T12:00", tz="Europe/Berlin")
    assert empty["n"].isna().all() and str(empty["n"].dtype) == "Int64"


@pytest.mark.parametrize("rows", [0, 3])
async def test_append_keeps_an_object_column_of_text_an_object_column(rows):
    """pandas 3 reads text put into a frame as its own string dtype: an appended row must
    not turn the user's object column into one, duplicate index labels or not."""
    notes = pd.DataFrame(
        {"id": range(rows), "note": pd.Series(["a", "b", "c"][:rows], dtype=object)}
    ).set_axis(pd.Index([7, 7, 2][:rows], dtype="int64"))
    conn = frame_tools({"t": {"frame": notes, "write": True}}, approve_writes=False)
    await call(conn, "frames_append", {"table": "t", "rows": [{"id": 9, "note": "new"}]})
    assert notes["note"].dtype == object
    assert list(notes["note"]) == [*["a", "b", "c"][:rows], "new"]
    assert list(notes.index) == [*[7, 7, 2][:rows], 8 if rows else 0]


async def test_append_puts_the_frame_back_when_a_step_fails(orders, monkeypatch):
    conn = writable(orders, approve_writes=False)
    real_insert = pd.DataFrame.insert
    calls = {"n": 0}

    def flaky_insert(self: pd.DataFrame, *args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 4:
            raise MemoryError("out of memory")
        real_insert(self, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "insert", flaky_insert)
    with pytest.raises(MemoryError, match="out of memory"):
        await call(conn, "frames_append", {"table": "orders", "rows": [NEW_ROW]})
    monkeypatch.undo()
    assert_frame_equal(orders, orders_frame())


async def test_a_pending_append_survives_a_restart_and_writes_to_the_frame_defined_again(
    tmp_path,
):
    from loom_nb.sqlite import sqlite_store

    path = tmp_path / "loom.db"
    before = orders_frame()
    store = sqlite_store(path)
    agent = agent_for(
        writable(before), ("frames_append", {"table": "orders", "rows": [NEW_ROW]}), store=store
    )
    result = await agent.run("Add order 9")
    call_id = result.pending[0].call_id
    store.close()

    # A new kernel: the notebook defines the frame, the connector and the agent again.
    orders = orders_frame()
    again = define_agent(
        name="analyst",
        model=ReplayModel(["Added."]),
        connectors=[writable(orders)],
        store=sqlite_store(path),
    )
    (pending,) = again.thread(result.thread_id).pending
    assert list(pending.preview["rows"]["id"]) == [9]  # the card shows the same rows
    done = await again.resume(result.thread_id, {call_id: True})
    assert done.status == "complete"
    assert list(orders["id"]) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert_frame_equal(before, orders_frame())  # the old kernel's frame is gone, not written
    again.store.close()
