"""frames_select with an order: the top-k path gives the page a stable sort of every match
gives (the rows, their index labels, the order of ties), on random frames with missing values
of every kind."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.frames import frame_tools
from tests.frames._orders import CTX


def stable_sorted_page(
    df: pd.DataFrame, mask: np.ndarray, order: list[tuple[str, bool]], offset: int, limit: int
) -> pd.DataFrame:
    """The page as a stable sort of every matching row makes it (how select worked before)."""
    view = df.loc[mask]
    desc: dict[str, bool] = {}
    for column, descending in order:
        desc.setdefault(column, descending)
    keys = list(desc)
    positions = (
        view[keys]
        .reset_index(drop=True)
        .sort_values(keys, ascending=[not desc[k] for k in keys], na_position="last", kind="stable")
        .index.to_numpy()
    )
    return view.iloc[positions[offset : offset + limit]]


def _frame(draw: Any, n: int) -> pd.DataFrame:
    few = st.integers(0, 3)  # few distinct values: many ties
    small = draw(st.lists(few, min_size=n, max_size=n))
    floats = draw(st.lists(st.one_of(few.map(float), st.just(np.nan)), min_size=n, max_size=n))
    flags = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    levels = draw(
        st.lists(st.one_of(st.sampled_from(["lo", "mid", "hi"]), st.none()), min_size=n, max_size=n)
    )
    seconds = draw(st.lists(st.one_of(few, st.none()), min_size=n, max_size=n))
    words = draw(
        st.lists(st.one_of(st.sampled_from(["a", "b", "B"]), st.none()), min_size=n, max_size=n)
    )
    stamps = [
        None if s is None else pd.Timestamp("2024-01-01", tz="UTC") + pd.Timedelta(s, "s")
        for s in seconds
    ]
    return pd.DataFrame(
        {
            "id": np.arange(n, dtype="int64"),
            "small": np.array(small, dtype="int64"),
            "small_u": np.array(small, dtype="uint16"),
            "score": np.array(floats, dtype="float64"),
            "flag": np.array(flags, dtype=bool),
            "level": pd.Categorical(levels, categories=["hi", "lo", "mid"]),
            "rank": pd.Categorical(levels, categories=["lo", "mid", "hi"], ordered=True),
            "at": pd.to_datetime(stamps, utc=True),
            "naive": pd.to_datetime(stamps, utc=True).tz_localize(None),
            "word": pd.array(words, dtype="str"),
        },
        index=pd.Index(np.arange(n) * 10 + 5),  # labels that are not positions
    )


_COLUMNS = ["small", "small_u", "score", "flag", "level", "rank", "at", "naive", "word"]


@st.composite
def _cases(draw: Any) -> tuple[pd.DataFrame, dict[str, Any]]:
    n = draw(st.integers(0, 40))
    df = _frame(draw, n)
    keys = draw(st.lists(st.sampled_from(_COLUMNS), min_size=1, max_size=3))
    order = [{"column": k, "desc": draw(st.booleans())} for k in keys]
    args: dict[str, Any] = {
        "table": "t",
        "order": order,
        "limit": draw(st.integers(1, 12)),
        "offset": draw(st.integers(0, 20)),
    }
    if draw(st.booleans()):
        args["filters"] = [{"column": "small", "op": "neq", "value": draw(st.integers(0, 3))}]
    return df, args


@settings(max_examples=150, deadline=None)
@given(case=_cases())
def test_an_ordered_page_is_the_one_a_stable_sort_of_every_match_gives(
    case: tuple[pd.DataFrame, dict[str, Any]],
):
    df, args = case
    tools = frame_tools({"t": df}, max_rows=50).tools
    out = asyncio.run(tools["frames_select"].call(args, CTX))
    mask = np.ones(len(df), dtype=bool)
    for f in args.get("filters", []):
        mask &= (df[f["column"]] != f["value"]).to_numpy()
    order = [(o["column"], o["desc"]) for o in args["order"]]
    want = stable_sorted_page(df, mask, order, args["offset"], args["limit"])
    pd.testing.assert_frame_equal(out.data, want)
    assert f"rows={len(want)} " in (out.content or "")
