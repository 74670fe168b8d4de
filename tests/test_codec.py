"""DataFrames keep their values, dtypes and index through the codec and through the stores."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_series_equal

from loom_nb import Message, PendingApproval, Thread, ToolResult, memory_store
from loom_nb import _codec as codec
from loom_nb._codec import decode, encode, frame_head
from loom_nb._counts import counts_of, with_counts
from loom_nb.sqlite import sqlite_store


def frames() -> dict[str, pd.DataFrame]:
    paris = pd.date_range("2025-03-30 00:30", periods=3, freq="h", tz="Europe/Paris")  # DST
    return {
        "ints": pd.DataFrame(
            {
                "i64": [1, -2, 2**62],
                "i32": np.array([1, 2, 3], dtype="int32"),
                "u8": np.array([0, 200, 255], dtype="uint8"),
            }
        ),
        "floats_with_nan": pd.DataFrame(
            {
                "f": [1.5, np.nan, -0.0],
                "tiny": [1e-300, 3.141592653589793, np.inf],
                "f32": np.array([0.1, np.nan, 2.5], dtype="float32"),
            }
        ),
        "strings": pd.DataFrame({"s": ["a", None, "Straße ✓"], "empty": ["", "x", ""]}),
        "string_dtypes": pd.DataFrame(
            {
                "python": pd.array(["a", None, "c"], dtype="string[python]"),
                "obj": pd.Series(["a", "b", None], dtype=object),
            }
        ),
        "nullable": pd.DataFrame(
            {
                "Int64": pd.array([1, None, 3], dtype="Int64"),
                "boolean": pd.array([True, None, False], dtype="boolean"),
                "Float64": pd.array([0.5, None, 2.0], dtype="Float64"),
            }
        ),
        "bools": pd.DataFrame({"b": [True, False, True]}),
        "datetimes": pd.DataFrame(
            {
                "naive": pd.to_datetime(
                    ["2025-01-01 10:00:00.5", None, "1969-07-20 20:17:40.123456"]
                ),
                "ns": pd.Series(pd.to_datetime(["2025-01-01", "2025-01-02", None])).astype(
                    "datetime64[ns]"
                ),
                "utc": pd.to_datetime(["2025-01-01", None, "2025-06-01"], utc=True),
                "paris": paris,
            }
        ),
        "timedeltas": pd.DataFrame(
            {
                "td": pd.to_timedelta(["1 days 02:00:00", None, "-3 s"]),
                "ms": pd.Series(pd.to_timedelta([1, 2, 3], unit="ms")).astype("timedelta64[ms]"),
            }
        ),
        "categoricals": pd.DataFrame(
            {
                "plain": pd.Categorical(["web", "shop", None, "web"]),
                "ordered": pd.Categorical(
                    ["low", "high", "mid", "low"], categories=["low", "mid", "high"], ordered=True
                ),
                "int_categories": pd.Categorical([3, 1, 3, 2]),
                "unused": pd.Categorical(["a", "a", "a", "a"], categories=["a", "b"]),
            }
        ),
        "objects": pd.DataFrame(
            {
                "dicts": [{"a": 1, "nested": {"b": [1, 2]}}, {}, None],
                "lists": [[1, "x"], [], [None]],
                "mixed": [1, "two", {"__loom__": "not a tag"}],
            }
        ),
        # What a notebook's object columns hold: dates (df.ts.dt.date), Decimals (numeric
        # columns read from PostgreSQL), timestamps of several time zones in one column.
        "temporal_objects": pd.DataFrame(
            {
                "day": [dt.date(2024, 1, 31), None, dt.date(1999, 12, 1)],
                "zones": pd.Series(
                    [
                        pd.Timestamp("2024-03-31 02:30", tz="UTC"),
                        pd.Timestamp("2024-03-31 03:30", tz="Europe/Berlin"),
                        pd.Timestamp("2024-01-01 00:00:00.000001"),
                    ],
                    dtype=object,
                ),
                "money": [Decimal("120.50"), Decimal("-0.001"), None],
                "at": [
                    dt.datetime(2024, 5, 1, 8, 30, 15, 250),
                    dt.datetime(2024, 5, 1, 8, 30, tzinfo=dt.timezone(dt.timedelta(hours=-3))),
                    dt.time(23, 59, 1),
                ],
                "waited": pd.Series(
                    [pd.Timedelta("1 days 00:00:00.5"), dt.timedelta(hours=-2), None], dtype=object
                ),
            }
        ),
        # An object column's missing values stay the kind they were (a CSV's NaN, None).
        "object_missing": pd.DataFrame(
            {"o": pd.Series(["a", None, np.nan, pd.NA, pd.NaT, 1.5], dtype=object)}
        ),
        "named_index": pd.DataFrame(
            {"total": [10.0, 20.0]}, index=pd.Index(["o-1", "o-2"], name="order_id")
        ),
        "object_index": pd.DataFrame(
            {"x": [1, 2]}, index=pd.Index(["a", "b"], dtype=object, name="key")
        ),
        "unnamed_int_index": pd.DataFrame({"x": [1, 2, 3]}, index=[7, 3, 5]),
        "named_range_index": pd.DataFrame({"x": [1, 2]}, index=pd.RangeIndex(2, name="n")),
        "datetime_index": pd.DataFrame(
            {"n": [1, 2]}, index=pd.DatetimeIndex(["2025-01-06", "2025-01-13"], name="week")
        ),
        "multi_index": pd.DataFrame(
            {"sales": [1.0, 2.0, 3.0]},
            index=pd.MultiIndex.from_tuples(
                [
                    ("EU", pd.Timestamp("2025-01-01")),
                    ("EU", pd.Timestamp("2025-02-01")),
                    ("US", pd.Timestamp("2025-01-01")),
                ],
                names=["region", "month"],
            ),
        ),
        "duplicate_labels": pd.DataFrame([[1, "a"], [2, "b"]], columns=["x", "x"]),
        "int_column_labels": pd.DataFrame([[1, 2], [3, 4]], columns=[2024, 2025]),
        "bool_column_labels": pd.DataFrame([[1, 2]], columns=pd.Index([True, False], dtype=object)),
        "one_column_labels": pd.DataFrame([[1, 2]], columns=pd.Index([1, 0], dtype=object)),
        "numpy_kinds_pandas_wraps": pd.DataFrame(  # decoded through pd.array, kept numpy
            {
                "c": np.array([1 + 2j, 3j]),
                "c2": np.array([0j, -1j]),
                "h": np.array([1.5, 2], dtype="float16"),
                "u": np.array([1, 2], dtype="uint8"),
                "f": [1.0, 2.0],
                "f2": [3.0, None],
            }
        ),
        "empty_typed": pd.DataFrame(
            {
                "i": pd.Series([], dtype="int64"),
                "t": pd.Series([], dtype="datetime64[ns, UTC]"),
                "s": pd.Series([], dtype="str"),
            }
        ),
    }


CASES = sorted(frames())


def same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert_frame_equal(
        got,
        want,
        check_exact=True,
        check_index_type=True,
        check_column_type=True,
        check_categorical=True,
        check_freq=False,
    )
    assert list(got.dtypes.astype(str)) == list(want.dtypes.astype(str))
    assert list(got.index.names) == list(want.index.names)


@pytest.mark.parametrize("case", CASES)
def test_the_codec_round_trips_through_json_text(case: str):
    df = frames()[case]
    text = json.dumps(encode(df))
    same(decode(json.loads(text)), df)


@pytest.mark.parametrize("case", CASES)
def test_frames_round_trip_through_the_sqlite_store(tmp_path: Path, case: str):
    df = frames()[case]
    path = tmp_path / "loom.db"
    store = sqlite_store(path)
    thread = Thread(id="t", agent="a")
    store.save_thread(thread)
    message = Message("tool", [ToolResult("c1", "query", "rows", df)])
    thread.messages.append(message)
    store.append(thread, message)
    thread.pending = [PendingApproval("c2", "insert", {"n": 1}, preview=df)]
    store.save_thread(thread)
    store.close()
    again = sqlite_store(path)  # a fresh connection: only what is in the file
    loaded = again.load("t")
    again.close()
    same(loaded.messages[0].tool_results[0].data, df)
    same(loaded.pending[0].preview, df)
    same(loaded.frames[0], df)


def test_frames_round_trip_through_the_memory_store():
    df = frames()["datetimes"]
    store = memory_store()
    thread = Thread(id="t", agent="a")
    store.save_thread(thread)
    store.append(thread, Message("tool", [ToolResult("c1", "query", "rows", df)]))
    same(store.load("t").frames[0], df)


def test_values_in_object_columns_come_back_as_their_own_types_and_zones():
    """A date stays a date (not its ISO text), a Decimal a Decimal, each timestamp of a
    column of several time zones keeps its zone."""
    df = frames()["temporal_objects"]
    got = decode(json.loads(json.dumps(encode(df))))
    for column in df.columns:
        for before, after in zip(df[column], got[column], strict=True):
            assert type(after) is type(before), (column, before, after)
            assert after == before or (before is None and after is None)
    zones = [str(getattr(t, "tz", None)) for t in got["zones"]]
    assert zones == ["UTC", "Europe/Berlin", "None"]
    assert got["at"][1].utcoffset() == dt.timedelta(hours=-3)


def test_a_series_round_trips():
    s = pd.Series(
        pd.array([1, None], dtype="Int64"), name="n", index=pd.Index(["a", "b"], name="k")
    )
    assert_series_equal(decode(json.loads(json.dumps(encode(s)))), s)


def test_a_frame_nested_in_plain_data_round_trips(tmp_path: Path):
    df = frames()["nullable"]
    data = {"summary": "3 rows", "frames": [df, {"inner": df}]}
    store = sqlite_store(tmp_path / "loom.db")
    thread = Thread(id="t", agent="a")
    store.save_thread(thread)
    store.append(thread, Message("tool", [ToolResult("c1", "query", "rows", data)]))
    got = store.load("t").messages[0].tool_results[0].data
    store.close()
    assert got["summary"] == "3 rows"
    same(got["frames"][0], df)
    same(got["frames"][1]["inner"], df)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows", [0, 2, 50])
def test_the_first_rows_of_an_encoded_frame_decode_alone(case: str, rows: int):
    df = frames()[case]
    stored = frame_head(json.loads(json.dumps(encode(df))), rows)
    assert stored is not None
    same(stored.head, df.head(rows))
    assert (stored.rows, stored.columns) == df.shape
    assert stored.plain_index == frame_head(df, rows).plain_index


@pytest.mark.parametrize("case", [*CASES, "int labels", "time labels", "pair labels"])
def test_an_encoded_frames_columns_and_counts_read_alone_are_the_decoded_frames(case: str):
    df = {
        "int labels": pd.DataFrame({3: [1], 1.5: [2], True: [3]}),
        "time labels": pd.DataFrame([[1, 2]], columns=pd.to_datetime(["2025-01-01", "2025-02-01"])),
        "pair labels": pd.DataFrame(
            [[1, 2]], columns=pd.MultiIndex.from_tuples([("a", 1), ("a", 2)])
        ),
    }.get(case, frames().get(case))
    stored = json.loads(
        json.dumps(encode(with_counts(df.copy(), {"rows": len(df), "frame_rows": 50})))
    )
    labels, found = codec.frame_outline(stored) or ([], None)
    assert [str(c) for c in labels] == [str(c) for c in decode(stored).columns]
    assert found == counts_of(decode(stored)) == {"rows": len(df), "frame_rows": 50}
    # what a store keeps beside the message (JSON, no rows) reads as the same outline
    kept = json.loads(json.dumps(codec.encoded_outline(stored)))
    assert "columns" not in kept
    kept_labels, kept_found = codec.frame_outline(kept) or ([], None)
    assert [str(c) for c in kept_labels] == [str(c) for c in labels] and kept_found == found
    assert codec.encoded_outline({"not": "a frame"}) is None
    assert codec.frame_outline({"not": "a frame"}) is None


def test_values_written_by_an_earlier_version_still_decode():
    """The layout of an encoded column is what loom_nb 0.1 wrote: value lists with null."""
    old = {
        "__loom__": "dataframe",
        "columns": [
            {"dtype": "int64", "values": [0, 1]},  # the index level comes first
            {"dtype": "int64", "values": [1, 2]},
            {"dtype": "float64", "values": [0.5, None]},
            {"dtype": "object", "values": ["a", {"b": [1]}]},
            {"dtype": "datetime64[ns, UTC]", "values": [1735689600000000000, None]},
            {
                "dtype": "category",
                "ordered": False,
                "codes": [0, -1],
                "categories": {"dtype": "object", "values": ["web"]},
            },
        ],
        "labels": ["i", "f", "o", "t", "c"],
        "labels_dtype": "object",
        "index_names": [None],
        "default_index": True,
    }
    got = decode(old)
    assert got["i"].tolist() == [1, 2] and str(got["i"].dtype) == "int64"
    assert got["f"].isna().tolist() == [False, True]
    assert got["o"].tolist() == ["a", {"b": [1]}] and got["o"].dtype == object
    assert got["t"].tolist()[0] == pd.Timestamp("2025-01-01", tz="UTC") and got["t"].isna()[1]
    assert got["c"].tolist()[0] == "web" and got["c"].isna()[1]


@pytest.mark.parametrize("case", CASES)
def test_frames_decode_the_same_without_pandas_private_constructors(
    case: str, monkeypatch: pytest.MonkeyPatch
):
    df = frames()[case]
    text = json.dumps(encode(df))
    monkeypatch.setattr(codec, "_private", lambda owner, name: None)
    same(decode(json.loads(text)), df)
    monkeypatch.setattr(codec, "_from_blocks", lambda: None)  # pandas before 3
    same(decode(json.loads(text)), df)


def test_frames_that_share_labels_and_categories_keep_their_own():
    """Frames of one thread share their column labels and categories as they decode; each
    still has its own: True, 1 and 1.0 (and 0.0 and -0.0) as categories stay themselves, and
    naming one frame's columns names no other's."""
    frames = [
        pd.DataFrame({"c": pd.Categorical([True, False])}),
        pd.DataFrame({"c": pd.Categorical([1, 0])}),
        pd.DataFrame({"c": pd.Categorical([1.0, 0.0])}),
        pd.DataFrame({"c": pd.Categorical([1.0, -0.0])}),
        pd.DataFrame({"c": pd.Categorical(pd.Index([1, 0], dtype=object))}),
    ]
    texts = [json.dumps(encode(df)) for df in frames]
    for _ in range(2):  # and again, from what the first decode shared
        for df, text in zip(frames, texts, strict=True):
            got = decode(json.loads(text))
            same(got, df)
            cats = got["c"].cat.categories
            assert [(type(c), repr(c)) for c in cats] == [
                (type(c), repr(c)) for c in df["c"].cat.categories
            ]
    one, two = decode(json.loads(texts[0])), decode(json.loads(texts[0]))
    one.columns.name = "renamed"
    assert two.columns.name is None and decode(json.loads(texts[0])).columns.name is None


def test_the_collector_pause_nests_and_leaves_a_collector_the_user_turned_off_off():
    import gc

    from loom_nb._codec import collector_paused

    assert gc.isenabled()
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # the user's choice is kept
    finally:
        gc.enable()
