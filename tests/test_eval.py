"""Comparing frames for evals (``loom_nb._eval.compare_frames``): rows matched by a key column
when one names each row, else as wholes; numbers within a tolerance whatever their dtype;
columns missing and extra; a plain index ignored, and row order unless the saved call sorted."""

from __future__ import annotations

import pandas as pd
import pytest

from loom_nb import ReplayModel, Reply, UserError, define_agent, memory_store
from loom_nb._eval import compare_frames, writes_off
from loom_nb.frames import frame_tools


def test_equal_frames_in_another_order_with_other_dtypes_are_equal():
    kept = pd.DataFrame({"id": [1, 2, 3], "total": [1.0, 2.0, 3.0]})
    got = pd.DataFrame({"total": [3, 1, 2], "id": [3, 1, 2]})  # ints, columns and rows moved
    assert compare_frames(kept, got).equal


def test_rows_by_key_missing_extra_and_different_values():
    kept = pd.DataFrame({"id": [1, 2, 3], "total": [10.0, 20.0, 30.0], "who": ["a", "b", "c"]})
    got = pd.DataFrame({"id": [2, 3, 4], "total": [20.0, 31.0, 40.0], "who": ["b", "c", "d"]})
    diff = compare_frames(kept, got)
    assert not diff.equal and diff.key == "id"
    assert diff.missing_rows.to_dict("records") == [{"id": 1, "total": 10.0, "who": "a"}]
    assert diff.extra_rows.to_dict("records") == [{"id": 4, "total": 40.0, "who": "d"}]
    assert diff.different_rows.to_dict("records") == [
        {"id": 3, "column": "total", "kept": 30.0, "got": 31.0}
    ]
    assert diff.counts() == (1, 1, 1)


def test_without_a_key_rows_are_matched_as_wholes_within_the_tolerance():
    kept = pd.DataFrame({"x": [1.0, 1.0, 2.0], "y": ["a", "a", "b"]})
    got = pd.DataFrame({"x": [1.0 + 1e-12, 2.0, 5.0], "y": ["a", "b", "b"]})
    diff = compare_frames(kept, got)
    assert diff.key is None and diff.different_rows is None
    assert diff.missing_rows.to_dict("records") == [{"x": 1.0, "y": "a"}]  # one of the two
    assert diff.extra_rows.to_dict("records") == [{"x": 5.0, "y": "b"}]


@pytest.mark.parametrize(
    ("got", "rel_tol", "abs_tol", "equal"),
    [
        (100.0 * (1 + 1e-10), 1e-9, 0.0, True),
        (100.0 * (1 + 1e-8), 1e-9, 0.0, False),
        (100.0 * (1 + 1e-8), 1e-6, 0.0, True),
        (100.5, 1e-9, 1.0, True),
    ],
)
def test_numbers_within_the_stated_tolerance(got, rel_tol, abs_tol, equal):
    kept = pd.DataFrame({"tier": ["a"], "revenue": [100.0]})
    found = pd.DataFrame({"tier": ["a"], "revenue": [got]})
    assert compare_frames(kept, found, rel_tol=rel_tol, abs_tol=abs_tol).equal is equal


def test_missing_values_match_each_other_and_nothing_else():
    kept = pd.DataFrame({"id": [1, 2], "v": [None, 1.0]})
    assert compare_frames(kept, pd.DataFrame({"id": [1, 2], "v": [float("nan"), 1.0]})).equal
    assert not compare_frames(kept, pd.DataFrame({"id": [1, 2], "v": [0.0, 1.0]})).equal


def test_columns_missing_and_extra():
    kept = pd.DataFrame({"id": [1], "total": [1.0], "status": ["open"]})
    got = pd.DataFrame({"id": [1], "total": [1.0], "owner": ["x"]})
    diff = compare_frames(kept, got)
    assert (diff.missing_columns, diff.extra_columns) == (["status"], ["owner"])
    assert not diff.equal and diff.counts() == (0, 0, 0)


def test_a_named_index_is_compared_as_a_column():
    kept = pd.DataFrame({"revenue": [1.0, 2.0]}, index=pd.Index(["a", "b"], name="tier"))
    got = pd.DataFrame({"revenue": [1.0, 3.0]}, index=pd.Index(["a", "b"], name="tier"))
    diff = compare_frames(kept, got)
    assert diff.key == "tier"
    assert diff.different_rows.to_dict("records") == [
        {"tier": "b", "column": "revenue", "kept": 2.0, "got": 3.0}
    ]


def test_writes_off_keeps_what_the_model_is_told_and_refuses_every_write():
    data = frame_tools({"t": {"frame": pd.DataFrame({"id": [1]}), "write": True}})
    agent = define_agent(name="a", model=ReplayModel([]), connectors=[data], store=memory_store())
    off = writes_off(agent.tools)
    assert list(off) == list(agent.tools)
    for name, t in off.items():
        assert (t.description, t.parameters) == (
            agent.tools[name].description,
            agent.tools[name].parameters,
        )
    swapped = {n for n in off if off[n] is not agent.tools[n]}
    assert swapped == {"frames_append", "frames_update", "ask_user"}


def test_bad_tolerances_and_thread_arguments_say_how_to_fix():
    agent = define_agent(name="a", model=ReplayModel([]), store=memory_store())
    with pytest.raises(UserError, match="rel_tol"):
        agent.eval(["x"], rel_tol=-1)
    with pytest.raises(UserError, match="thread ids or Thread values"):
        agent.eval([42])  # type: ignore[list-item]
    with pytest.raises(UserError, match="names no thread"):
        agent.eval([])


def test_an_empty_frame_against_a_full_one_is_every_row_missing_or_extra():
    full = pd.DataFrame({"id": [1, 2], "total": [1.0, 2.0]})
    empty = full.iloc[0:0]
    gone = compare_frames(full, empty)
    assert gone.missing_rows["id"].tolist() == [1, 2] and list(gone.extra_rows.columns) == [
        "id",
        "total",
    ]
    assert compare_frames(empty, full).extra_rows["id"].tolist() == [1, 2]
    assert compare_frames(empty, empty.copy()).equal


# ---- row order: it counts where the saved call sorted -------------------------------------


def test_rows_in_another_order_differ_only_where_the_kept_frame_was_sorted():
    kept = pd.DataFrame({"id": [3, 1, 2], "total": [30.0, 20.0, 20.0]})  # by total, desc
    moved = pd.DataFrame({"id": [1, 2, 3], "total": [20.0, 20.0, 30.0]})
    tied = pd.DataFrame({"id": [3, 2, 1], "total": [30.0, 20.0, 20.0]})  # ids 1, 2 tie on total
    assert compare_frames(kept, moved).equal  # unsorted: order does not matter
    diff = compare_frames(kept, moved, order=["total"])
    assert not diff.equal and diff.reordered and diff.counts() == (0, 0, 0)
    assert "another order" in diff.note
    assert compare_frames(kept, tied, order=["total"]).equal
    # sorted by what the frame does not show: every row in its place
    assert not compare_frames(kept, tied, order=["created_at"]).equal
    assert not compare_frames(kept, tied, order=[]).equal
    # other rows are missing and extra, not "reordered"
    other = compare_frames(kept, moved.iloc[:2], order=["total"])
    assert not other.reordered and other.counts() == (1, 0, 0)


def _select(order: list[dict[str, object]] | None) -> Reply:
    args: dict[str, object] = {
        "table": "orders",
        "filters": [{"column": "total", "op": "gt", "value": 100}],
    }
    if order is not None:
        args["order"] = order
    return Reply("", [("frames_select", args)])


@pytest.mark.parametrize(
    ("kept_order", "got_order", "equal"),
    [
        ([{"column": "total", "desc": True}], None, False),  # sorted, then not: a difference
        ([{"column": "total", "desc": True}], [{"column": "total"}], False),
        ([{"column": "total", "desc": True}], [{"column": "total", "desc": True}], True),
        (None, [{"column": "total", "desc": True}], True),  # not sorted: any order will do
    ],
)
def test_an_eval_counts_row_order_where_the_saved_call_sorted(kept_order, got_order, equal):
    frame = pd.DataFrame({"id": [1, 2, 3, 4], "total": [50.0, 150.0, 250.0, 120.0]})
    data = frame_tools({"orders": {"frame": frame}})
    agent = define_agent(
        name="a",
        model=ReplayModel([_select(kept_order), "Three."]),
        connectors=[data],
        store=memory_store(),
    )
    thread_id = agent.run_sync("Orders above 100, biggest first?").thread_id
    report = agent.eval([thread_id], model=ReplayModel([_select(got_order), "Three."]))

    (call,) = report.threads[0].calls
    assert (call.equal, call.reordered) == (equal, not equal)
    assert report.threads[0].final is not None and report.threads[0].final.equal is equal
    row = report.to_frame().iloc[0]
    assert (row["equal"], row["calls_reordered"], row["missing_rows"]) == (equal, int(not equal), 0)
    if not equal:
        assert call.note == "rows in another order than the saved call's order"
        assert "rows in another order" in report._repr_html_()
