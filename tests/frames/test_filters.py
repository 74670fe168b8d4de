"""Filters: every operator on every dtype, negation, and SQL LIKE."""

from __future__ import annotations

import random
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


def sqlite_like(texts: list[str], pattern: str, ignore_case: bool = False) -> list[bool]:
    """What SQLite's LIKE says (backslash escapes; case-sensitive unless ILIKE is asked)."""
    import sqlite3

    with sqlite3.connect(":memory:") as db:
        db.execute(f"PRAGMA case_sensitive_like = {'OFF' if ignore_case else 'ON'}")
        return [
            bool(db.execute("SELECT ? LIKE ? ESCAPE '\\'", (t, pattern)).fetchone()[0])
            for t in texts
        ]


def frames_like(texts: list[str], pattern: str, op: str = "like") -> list[bool]:
    from loom_nb._tables.grammar import Filter
    from loom_nb.frames._filters import filter_mask

    frame = pd.DataFrame({"t": pd.Series(texts, dtype=object)})
    return [bool(b) for b in filter_mask(frame, "t", [Filter("t", op, pattern, False)])]


_CHARS = "ab\\é%_\n"


@st.composite
def like_cases(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A pattern of up to 600 pieces (any may be empty: %% is one %), and texts: random ones,
    texts the pattern matches (each piece in order, any text between) and near misses (one
    character dropped). ``%``, ``_`` and ``\\`` appear escaped, and literally in texts. The
    pattern comes from one byte string (a quarter of its bytes end a piece), the texts from a
    seeded generator: drawing hundreds of pieces one by one is slow."""
    raw = draw(st.integers(0, 2400).flatmap(lambda n: st.binary(min_size=n, max_size=n)))
    pieces: list[list[str | None]] = [[]]  # None: the wildcard _
    for byte in raw:
        if byte % 4 == 0:
            pieces.append([])
        else:
            pieces[-1].append(None if byte % 9 == 0 else _CHARS[byte % len(_CHARS)])
    pattern = "%".join(
        "".join("_" if t is None else "\\" + t if t in "%_\\" else t for t in p) for p in pieces
    )
    rnd = random.Random(draw(st.integers(0, 2**16)))
    texts = ["".join(rnd.choices(_CHARS, k=rnd.randint(0, 20))) for _ in range(rnd.randint(0, 3))]
    for _ in range(rnd.randint(1, 3)):
        parts = ["".join(t or rnd.choice("ab_%") for t in p) for p in pieces]
        text = parts[0] + "".join(
            "".join(rnd.choices(_CHARS, k=rnd.randint(0, 3))) + part for part in parts[1:]
        )
        if text and rnd.random() < 0.5:  # a near miss
            at = rnd.randrange(len(text))
            text = text[:at] + text[at + 1 :]
        texts.append(text)
    return pattern, texts


@settings(max_examples=200, deadline=None)
@given(like_cases())
def test_like_with_any_number_of_pieces_matches_what_sqlite_matches(case):
    pattern, texts = case
    assert frames_like(texts, pattern) == sqlite_like(texts, pattern)


@pytest.mark.parametrize("pieces", [99, 100, 101, 150, 400, 1000])
def test_like_with_a_hundred_pieces_or_more_matches_as_sql_does(pieces: int):
    """Numbered back-references past \\99 were octal escapes: 100 pieces matched no row, 400
    raised re.error out of the tool."""
    pattern = "%" + "%".join(["a"] * pieces) + "%"
    texts = ["a" * pieces, "a" * (pieces - 1), "ba" * pieces, "b" * pieces]
    assert frames_like(texts, pattern) == sqlite_like(texts, pattern) == [True, False, True, False]
    upper = pattern.upper()
    assert frames_like(texts, upper, "ilike") == sqlite_like(texts, upper, ignore_case=True)


def test_an_update_whose_like_has_hundreds_of_pieces_waits_for_approval():
    """frames_update checks its filter while asking for approval: a 500-piece LIKE went out of
    agent.run as re.error. Now the card waits, matching the row SQL matches, and approved it
    changes that row only."""
    from loom_nb import ReplayModel, Reply, define_agent

    frame = pd.DataFrame({"id": [1, 2], "note": ["a" * 500, "a" * 499]})
    like = "%".join(["a"] * 500)
    update = {
        "table": "notes",
        "values": {"note": "long"},
        "filters": [{"column": "note", "op": "like", "value": like}],
    }
    agent = define_agent(
        name="a",
        model=ReplayModel([Reply("", [("frames_update", update)]), "done"]),
        connectors=[frame_tools({"notes": {"frame": frame, "write": True}})],
    )
    result = agent.run_sync("shorten")
    assert result.status == "awaiting_approval" and result.error is None
    [pending] = result.pending
    finished = agent.resume_sync(result.thread_id, {pending.call_id: True})
    assert finished.status == "complete"
    assert frame["note"].tolist() == ["long", "a" * 499]
