"""Filters: every operator on every dtype, negation, and SQL LIKE."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb._tables.grammar import OPERATORS
from loom_nb.frames import frame_tools
from loom_nb.frames._filters import like_regex
from tests.frames._orders import flt, ids

# ---- select: every operator, on every dtype, and its negation ------------------------------------

OPERATOR_CASES = [
    # float64 with NaN (id 3); string values are read as numbers
    ("total", "eq", 100, [5], [1, 2, 4, 6, 7, 8]),
    ("total", "neq", 100, [1, 2, 4, 6, 7, 8], [5]),
    ("total", "gt", 100, [2, 7], [1, 4, 5, 6, 8]),
    ("total", "gte", 100, [2, 5, 7], [1, 4, 6, 8]),
    ("total", "lt", "55.5", [1, 6], [2, 4, 5, 7, 8]),
    ("total", "lte", 55.5, [1, 6, 8], [2, 4, 5, 7]),
    ("total", "in", [0, 10, "1200"], [1, 6, 7], [2, 4, 5, 8]),
    ("total", "is_null", None, [3], [1, 2, 4, 5, 6, 7, 8]),
    # int64
    ("id", "gt", 6, [7, 8], [1, 2, 3, 4, 5, 6]),
    ("id", "eq", "3", [3], [1, 2, 4, 5, 6, 7, 8]),
    # str with a missing value (id 4)
    ("status", "eq", "open", [1, 3, 6], [2, 5, 7, 8]),
    ("status", "gt", "open", [5], [1, 2, 3, 6, 7, 8]),
    ("status", "in", ["open", "shipped"], [1, 3, 5, 6], [2, 7, 8]),
    ("status", "like", "op%", [1, 3, 6, 8], [2, 5, 7]),
    ("status", "like", "op_n", [1, 3, 6], [2, 5, 7, 8]),
    ("status", "like", "op\\_en", [8], [1, 2, 3, 5, 6, 7]),
    ("status", "like", "c%", [2], [1, 3, 5, 6, 7, 8]),
    ("status", "ilike", "c%", [2, 7], [1, 3, 5, 6, 8]),
    ("status", "ilike", "OPEN", [1, 3, 6], [2, 5, 7, 8]),
    ("status", "like", "%", [1, 2, 3, 5, 6, 7, 8], []),
    ("status", "is_null", None, [4], [1, 2, 3, 5, 6, 7, 8]),
    # unordered categorical with a missing value (id 4)
    ("segment", "eq", "retail", [1, 3, 5, 7, 8], [2, 6]),
    ("segment", "neq", "retail", [2, 6], [1, 3, 5, 7, 8]),
    ("segment", "in", ["wholesale", "online"], [2, 6], [1, 3, 5, 7, 8]),
    ("segment", "ilike", "WHOLE%", [2, 6], [1, 3, 5, 7, 8]),
    ("segment", "is_null", None, [4], [1, 2, 3, 5, 6, 7, 8]),
    # ordered categorical low < mid < high, missing for id 5
    ("priority", "gte", "mid", [2, 3, 4, 7, 8], [1, 6]),
    ("priority", "lt", "mid", [1, 6], [2, 3, 4, 7, 8]),
    # bool
    ("paid", "eq", True, [1, 3, 5, 6, 8], [2, 4, 7]),
    ("paid", "eq", "false", [2, 4, 7], [1, 3, 5, 6, 8]),
    # nullable Int64, missing for ids 2 and 6
    ("qty", "gt", 3, [4, 5, 7, 8], [1, 3]),
    ("qty", "eq", "4", [4], [1, 3, 5, 7, 8]),
    ("qty", "in", [1, 8], [1, 8], [3, 4, 5, 7]),
    ("qty", "is_null", None, [2, 6], [1, 3, 4, 5, 7, 8]),
    # tz-aware (UTC) timestamps, missing for id 6: a time without an offset is read in UTC
    ("created_at", "gte", "2024-01-05", [5, 7, 8], [1, 2, 3, 4]),
    ("created_at", "lt", "2024-01-03T09:00:00+00:00", [1, 2], [3, 4, 5, 7, 8]),
    ("created_at", "gt", "2024-01-03T10:00:00+01:00", [4, 5, 7, 8], [1, 2, 3]),
    ("created_at", "eq", "2024-01-02T09:00:00Z", [2], [1, 3, 4, 5, 7, 8]),
    ("created_at", "is_null", None, [6], [1, 2, 3, 4, 5, 7, 8]),
    # naive timestamps, missing for ids 2 and 5
    ("shipped_on", "lte", "2024-02-04", [1, 3, 4], [6, 7, 8]),
    ("shipped_on", "in", ["2024-02-01", "2024-02-08T00:00:00"], [1, 8], [3, 4, 6, 7]),
]


@pytest.mark.parametrize(("column", "op", "value", "matches", "negated"), OPERATOR_CASES)
async def test_operator(conn, column, op, value, matches, negated):
    assert await ids(conn, {"filters": [flt(column, op, value)]}) == matches
    # not: the other rows, except that a missing value matches only is_null (as in SQL)
    assert await ids(conn, {"filters": [flt(column, op, value, negate=True)]}) == negated


def test_every_operator_is_covered():
    assert {case[1] for case in OPERATOR_CASES} == set(OPERATORS)


async def test_filters_all_must_match(conn):
    filters = [flt("status", "eq", "open"), flt("total", "gt", 5)]
    assert await ids(conn, {"filters": filters}) == [1]
    filters = [
        flt("segment", "eq", "retail"),
        flt("qty", "is_null", negate=True),
        flt("created_at", "lt", "2024-01-07T12:00:00+03:00"),
    ]  # 09:00 UTC: not id 7
    assert await ids(conn, {"filters": filters}) == [1, 3, 5]


async def test_numbers_compare_with_text_columns_as_text():
    conn = frame_tools({"orders": pd.DataFrame({"id": [1, 2], "zip": ["10115", "80331"]})})
    assert await ids(conn, {"filters": [flt("zip", "eq", 10115)]}) == [1]


async def test_object_columns_of_text_work_like_text_columns():
    frame = pd.DataFrame({"id": [1, 2, 3], "tag": pd.Series(["a_b", None, "A-B"], dtype=object)})
    conn = frame_tools({"orders": frame})
    assert await ids(conn, {"filters": [flt("tag", "ilike", "a_b")]}) == [1, 3]
    assert await ids(conn, {"filters": [flt("tag", "like", "a\\_b")]}) == [1]


# ---- LIKE ---------------------------------------------------------------------------------------


def reference_like(text: str, pattern: str) -> bool:
    """SQL LIKE by dynamic programming: the plain definition, to compare against."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            tokens.append(("lit", pattern[i + 1]))
            i += 2
            continue
        tokens.append(
            ("any", "")
            if pattern[i] == "%"
            else ("one", "")
            if pattern[i] == "_"
            else ("lit", pattern[i])
        )
        i += 1
    match = [[False] * (len(text) + 1) for _ in range(len(tokens) + 1)]
    match[0][0] = True
    for t, (kind, ch) in enumerate(tokens, start=1):
        for s in range(len(text) + 1):
            if kind == "any":
                match[t][s] = match[t - 1][s] or (s > 0 and match[t][s - 1])
            elif s > 0:
                ok = kind == "one" or text[s - 1] == ch
                match[t][s] = ok and match[t - 1][s - 1]
    return match[len(tokens)][len(text)]


@settings(max_examples=300, deadline=None)
@given(st.text("ab\n.", max_size=8), st.text("ab.%_\\", max_size=8))
def test_like_matches_the_sql_definition(text, pattern):
    got = re.fullmatch(like_regex(pattern), text, re.DOTALL) is not None
    assert got == reference_like(text, pattern)
