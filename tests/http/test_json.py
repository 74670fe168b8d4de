"""The answers' bounds, without a server: text, pages, frames and data are cut where the
schema says, and what is cut says so."""

from __future__ import annotations

import json

import pandas as pd

from loom_nb import Message, TextPart, Thread, ToolResult
from loom_nb._messages import NEWER
from loom_nb.http import _json
from tests.http.conftest import validate


def test_long_text_is_cut_and_says_so():
    thread = Thread(id="t", agent="a", messages=[Message.user("x" * 300_000)])
    answer = _json.thread_json(thread, None)
    validate(answer, "thread")
    [part] = answer["messages"][0]["parts"]
    assert len(part["text"]) == _json.TEXT_CHARS and part["text_truncated"] is True


def test_a_page_stops_at_its_byte_bound_and_names_the_next():
    big = "y" * 90_000
    messages = [Message("assistant", [TextPart(big)] * 10) for _ in range(8)]  # ~900 kB each
    thread = Thread(id="t", agent="a", messages=messages)
    answer = _json.thread_json(thread, None, limit=8)
    validate(answer, "thread")
    assert len(json.dumps(answer)) <= _json.PAGE_BYTES + 10_000
    shown = len(answer["messages"])
    assert 1 <= shown < 8 and answer["page"]["next_cursor"] == str(shown)


def test_a_huge_result_keeps_a_few_rows_and_leaves_other_data_out():
    wide = pd.DataFrame({f"c{i}": ["z" * 1_500] * 60 for i in range(20)})
    result = ToolResult("c1", "select", "rows", wide)
    other = ToolResult("c2", "other", "data", {"blob": ["w" * 5_000] * 900})
    thread = Thread(id="t", agent="a", messages=[Message("tool", [result, other])])
    answer = _json.thread_json(thread, None, results_url="/r/")
    validate(answer, "thread")
    table, left_out = (p["data"] for p in answer["messages"][0]["parts"])
    assert len(table["rows"]) == 5 and table["total_rows"] == 60
    assert table["next"] == "/r/c1?cursor=5"
    assert left_out is None


def test_frame_values_keep_their_meaning():
    frame = pd.DataFrame(
        {
            "f": [1.5, float("nan"), float("inf")],
            "n": pd.array([1, None, 3], dtype="Int64"),
            "t": pd.to_datetime(["2026-01-01", None, "2026-01-03"]).tz_localize("Europe/Paris"),
            "s": ["<script>x</script>", None, "\u2028"],
        },
        index=pd.Index(["a", "b", "c"], name="key"),
    )
    table = _json.table_json(frame, 0, 3, 4)
    assert table["rows"] == [
        [1.5, 1, "2026-01-01T00:00:00+01:00", "<script>x</script>"],
        [None, None, None, None],
        ["Infinity", 3, "2026-01-03T00:00:00+01:00", "\u2028"],
    ]
    assert [c["dtype"] for c in table["columns"]] == [
        "float64",
        "Int64",
        str(frame["t"].dtype),
        str(frame["s"].dtype),
    ]
    assert table["index"] == {
        "names": ["key"],
        "dtypes": [str(frame.index.dtype)],
        "values": [["a"], ["b"], ["c"]],
    }


def test_a_part_from_a_newer_loom_nb_is_named_not_dropped_nor_an_error():
    newer = {"kind": "audio", "url": "https://example.test/a.ogg"}
    message = Message.from_dict(
        {
            "role": "assistant",
            "created_at": "2026-01-01T00:00:00+00:00",
            "parts": [{"kind": "text", "text": "Here:"}, newer],
        }
    )
    answer = _json.thread_json(Thread(id="t", agent="a", messages=[message]), None)
    validate(answer, "thread")
    text, part = answer["messages"][0]["parts"]
    assert text["text"] == "Here:"
    assert part == {"kind": "newer", "part_kind": "audio", "text": NEWER}
