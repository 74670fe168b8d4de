"""Each behaviour of real PostgREST the shim mirrors, with the PostgREST source it follows.

The connector's tests are only as good as the shim: where real PostgREST reads a request its
own way (``*`` in a pattern, ``in.()``, a NUL, ``limit=0`` with an offset, ``max-affected``),
the shim must read it the same way, or a test could pass against the shim and the connector
misbehave against Supabase. Sources: ``src/library/PostgREST/`` of the PostgREST repository
(the same in v12.2, v13 and v14). The requests are raw HTTP, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.supabase.rig import USER_A, Rig, postgrest


@dataclass(frozen=True)
class Mirrored:
    """One behaviour: a raw request, and what real PostgREST answers."""

    what: str
    #: The PostgREST function (file) the shim follows for it.
    source: str
    method: str
    #: ``table?query``, sent exactly as written.
    target: str
    status: int
    #: The ``name``/``subject``/... values of the rows returned (or ``code`` for an error).
    rows: list[Any] | None = None
    code: str | None = None
    details: str | None = None
    prefer: tuple[str, ...] = ()
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: A check of the database after the request (a superuser query -> expected rows).
    after: tuple[str, list[tuple[Any, ...]]] | None = None


MIRRORED = [
    Mirrored(
        "* in a like pattern is the wildcard %",
        "Query/SqlFragment.hs pgFmtFilter (star)",
        "GET",
        "products?select=name&name=like.G*&order=name",
        200,
        rows=["Gadget", "Gizmo"],
    ),
    Mirrored(
        "* in an ilike pattern too",
        "Query/SqlFragment.hs pgFmtFilter (star)",
        "GET",
        "products?select=name&name=ilike.*DGE*&order=name",
        200,
        rows=["Gadget", "Widget"],
    ),
    Mirrored(
        "* in an eq value is a plain *",
        "ApiRequest/QueryParams.hs pSingleVal",
        "GET",
        "products?select=name&name=eq.*",
        200,
        rows=[],
    ),
    Mirrored(
        "in.() is the list of one empty item, read as the empty list: no row",
        'QueryParams.hs pListVal / pListElement; SqlFragment.hs pgFmtFilter (In [""])',
        "GET",
        "products?select=name&name=in.()",
        200,
        rows=[],
    ),
    Mirrored(
        'in.("") is that same list',
        'QueryParams.hs pQuotedValue; SqlFragment.hs pgFmtFilter (In [""])',
        "GET",
        'products?select=name&name=in.("")',
        200,
        rows=[],
    ),
    Mirrored(
        "not.in.() matches every row, NULLs included",
        "SqlFragment.hs pgFmtFilter (NOT ... = ANY('{}'))",
        "GET",
        "profiles?select=email&display_name=not.in.()&order=email",
        200,
        rows=["ada@example.test", "bob@example.test", "nul@example.test"],
    ),
    Mirrored(
        "blanks before the first in item are skipped",
        "QueryParams.hs pListVal (lexeme (char '('))",
        "GET",
        "products?select=name&name=in.(%20%09Widget)",
        200,
        rows=["Widget"],
    ),
    Mirrored(
        "blanks before a later item are kept",
        "QueryParams.hs pListVal (sepBy1 char ',')",
        "GET",
        "products?select=name&name=in.(Gizmo,%20Widget)",
        200,
        rows=["Gizmo"],
    ),
    Mirrored(
        "an in item is cut at its first NUL",
        "SqlFragment.hs pgBuildArrayLiteral; SchemaCache/Identifiers.hs trimNullChars",
        "GET",
        "products?select=name&name=in.(Widget%00%20(never))",
        200,
        rows=["Widget"],
    ),
    Mirrored(
        "a NUL in a single value reaches PostgreSQL, which refuses it",
        "SqlFragment.hs pgFmtFilter (unknownLiteral); PostgreSQL text input",
        "GET",
        "products?select=name&name=eq.Widget%00x",
        400,
        code="22021",
    ),
    Mirrored(
        "text after an in list is ignored (the parser does not ask for the end)",
        "QueryParams.hs pRequestFilter (P.parse of pOpExpr, no eof)",
        "GET",
        "products?select=name&name=in.(Widget)junk",
        200,
        rows=["Widget"],
    ),
    Mirrored(
        "a quoted in item keeps commas and parentheses; backslash escapes",
        "QueryParams.hs pQuotedValue",
        "GET",
        'products?select=name&name=in.("Wid\\get","a,(b)")',
        200,
        rows=["Widget"],
    ),
    Mirrored(
        "a quoted item not followed by , or ) is read unquoted, quotes and all",
        'QueryParams.hs pListElement (notFollowedBy (noneOf ",)"))',
        "GET",
        'products?select=name&name=in.("Widget"x)',
        200,
        rows=[],
    ),
    Mirrored(
        "; separates query pairs, like &",
        "QueryParams.hs parse (http-types parseQueryReplacePlus)",
        "GET",
        "products?select=name&name=eq.Widget;junk",
        200,
        rows=["Widget"],
    ),
    Mirrored(
        "+ is a space",
        "QueryParams.hs parse (parseQueryReplacePlus True)",
        "GET",
        "tickets?select=subject&subject=eq.Where+is+my+parcel%3F",
        200,
        rows=["Where is my parcel?"],
    ),
    Mirrored(
        "is keywords in either case (the operator itself is lower case)",
        "QueryParams.hs pOpExpr (pIsVal, ciString)",
        "GET",
        "profiles?select=email&display_name=is.NuLl",
        200,
        rows=["nul@example.test"],
    ),
    Mirrored(
        "is.not_null",
        "QueryParams.hs pOpExpr (pIsVal); SqlFragment.hs pgFmtFilter (Is)",
        "GET",
        "profiles?select=email&display_name=is.not_null&order=email",
        200,
        rows=["ada@example.test", "bob@example.test"],
    ),
    Mirrored(
        "limit=0 returns no row",
        "RangeQuery.hs limitZeroRange; ApiRequest.hs getRanges",
        "GET",
        "products?select=name&limit=0",
        200,
        rows=[],
    ),
    Mirrored(
        "limit=0 with an offset is 416",
        "ApiRequest.hs getRanges (isInvalidRange, NegativeLimit)",
        "GET",
        "products?select=name&limit=0&offset=1",
        416,
        code="PGRST103",
        details="Limit should be greater than or equal to zero.",
    ),
    Mirrored(
        "limit=0 with offset=0 is the allowed empty range",
        "ApiRequest.hs getRanges (hasLimitZero)",
        "GET",
        "products?select=name&limit=0&offset=0",
        200,
        rows=[],
    ),
    Mirrored(
        "with a count, an offset past the last row is 416",
        "RangeQuery.hs rangeStatusHeader; Response.hs (OutOfBounds)",
        "GET",
        "products?select=name&offset=10",
        416,
        code="PGRST103",
        details="An offset of 10 was requested, but there are only 4 rows.",
        prefer=("count=exact",),
    ),
    Mirrored(
        "with a count, a page shorter than the count is 206 with Content-Range",
        "RangeQuery.hs rangeStatusHeader / contentRangeH",
        "GET",
        "products?select=name&order=name&limit=2&offset=1",
        206,
        rows=["Gadget", "Gizmo"],
        prefer=("count=exact",),
        headers={"content-range": "1-2/4"},
    ),
    Mirrored(
        "HEAD counts without a body",
        "RangeQuery.hs contentRangeH; Response.hs (headersOnly)",
        "HEAD",
        "products?select=name&price=gt.5",
        200,
        prefer=("count=exact",),
        headers={"content-range": "0-2/3"},
    ),
    Mirrored(
        "handling=strict with max-affected: more rows changes nothing",
        "MainTx.hs failExceedsMaxAffectedPref (SQL.condemn)",
        "PATCH",
        "orders?user_id=eq.aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa&select=id",
        400,
        code="PGRST124",
        details="The query affects 3 rows",
        prefer=("return=representation", "handling=strict,max-affected=2"),
        body={"status": "held"},
        after=("SELECT count(*) FROM orders WHERE status = 'held'", [(0,)]),
    ),
    Mirrored(
        "max-affected within the bound: the update runs and the preference is applied",
        "MainTx.hs failExceedsMaxAffectedPref; Preferences.hs prefAppliedHeader",
        "PATCH",
        "orders?id=in.(1,2)&select=id",
        200,
        rows=[1, 2],
        prefer=("return=representation,handling=strict,max-affected=2",),
        body={"status": "held"},
        headers={"preference-applied": "return=representation, handling=strict, max-affected=2"},
        after=("SELECT count(*) FROM orders WHERE status = 'held'", [(2,)]),
    ),
    Mirrored(
        "max-affected without handling=strict is ignored",
        "MainTx.hs failExceedsMaxAffectedPref (handling == Just Strict)",
        "PATCH",
        "orders?id=in.(1,2,3)&select=id",
        200,
        rows=[1, 2, 3],
        prefer=("return=representation,max-affected=1",),
        body={"status": "held"},
    ),
    Mirrored(
        "a max-affected that is not a number is read as absent, not invalid",
        "Preferences.hs fromHeaders (maxAffectedPref, readMaybe)",
        "PATCH",
        "orders?id=in.(1,2)&select=id",
        200,
        rows=[1, 2],
        prefer=("return=representation,handling=strict,max-affected=two",),
        body={"status": "held"},
    ),
    Mirrored(
        "handling=strict refuses an unknown preference",
        "Plan.hs mutateReadPlan (InvalidPreferences); Preferences.hs fromHeaders (invalidPrefs)",
        "PATCH",
        "orders?id=eq.1",
        400,
        code="PGRST122",
        details="Invalid preferences: nonsense=1",
        prefer=("handling=strict,nonsense=1",),
        body={"status": "held"},
    ),
    Mirrored(
        "aggregates are refused while db-aggregates-enabled is off (the default)",
        "Plan.hs validateAggFunctions (AggregatesNotAllowed); Config.hs (False by default)",
        "GET",
        "products?select=n:count()",
        400,
        code="PGRST123",
    ),
    Mirrored(
        "the first of two values of one preference wins, across headers",
        "Preferences.hs fromHeaders (parsePrefs: head)",
        "PATCH",
        "orders?id=eq.1&select=id",
        200,
        rows=[1],
        prefer=("return=representation", "return=minimal"),
        body={"status": "held"},
    ),
]


def send(rig: Rig, case: Mirrored) -> httpx.Response:
    headers = {
        "apikey": rig.anon_key,
        "Authorization": f"Bearer {rig.jwt(USER_A)}",
        **({"Content-Type": "application/json"} if case.body is not None else {}),
    }
    header_list = list(headers.items()) + [("Prefer", p) for p in case.prefer]
    with httpx.Client() as client:
        request = client.build_request(
            case.method,
            f"{rig.url}/rest/v1/{case.target}",
            headers=header_list,
            json=case.body,
        )
        return client.send(request)


@pytest.mark.postgres
@pytest.mark.parametrize("case", MIRRORED, ids=[f"{c.what} [{c.source}]" for c in MIRRORED])
def test_the_shim_answers_as_postgrest_does(rig: Rig, case: Mirrored) -> None:
    with rig.superuser() as conn:  # a profile without a display name, for the NULL cases
        conn.execute(
            "INSERT INTO profiles (id, email) VALUES "
            "('cccccccc-cccc-4ccc-8ccc-cccccccccccc', 'nul@example.test')"
        )
    response = send(rig, case)
    assert response.status_code == case.status, response.text
    assert rig.shim.refused == [], "the shim read this as outside its subset"
    if case.code is not None:
        error = response.json()
        assert (error["code"], error.get("details") if case.details else None) == (
            case.code,
            case.details,
        )
    elif case.rows is not None:
        values = [next(iter(row.values())) for row in response.json()]
        if case.method == "PATCH":  # the rows an update returns come in no set order
            values.sort()
        assert values == case.rows
    for name, value in case.headers.items():
        assert response.headers[name] == value
    if case.method == "HEAD":
        assert response.content == b""
    if case.after is not None:
        query, expected = case.after
        with rig.superuser() as conn:
            assert conn.execute(query).fetchall() == expected


# ---- the grammar module alone (no database) -----------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("in.()", postgrest.Meaning(False, "in", None)),
        ('not.in.("")', postgrest.Meaning(True, "in", None)),
        ("in.(,a)", postgrest.Meaning(False, "in", ("", "a"))),
        ('in.("a\\"b",c)', postgrest.Meaning(False, "in", ('a"b', "c"))),
        ("in.( a, b )", postgrest.Meaning(False, "in", ("a", " b "))),
        ("in.(x\x00y,z)", postgrest.Meaning(False, "in", ("x", "z"))),
        ("like.a*b*", postgrest.Meaning(False, "like", ("a%b%",))),
        ("eq.a*b", postgrest.Meaning(False, "eq", ("a*b",))),
        ("eq.", postgrest.Meaning(False, "eq", ("",))),
        ("not.eq.not.eq.1", postgrest.Meaning(True, "eq", ("not.eq.1",))),
        ("is.NULL", postgrest.Meaning(False, "is", ("null",))),
    ],
)
def test_postgrest_reads_a_filter_value_so(raw: str, expected: postgrest.Meaning) -> None:
    assert postgrest.meaning(postgrest.parse_op_expr(raw)) == expected


def test_postgrest_reads_the_query_string_so() -> None:
    assert postgrest.parse_query("a=1;b=x+y&c&d=%3B%2B") == [
        ("a", "1"),
        ("b", "x y"),
        ("c", None),
        ("d", ";+"),
    ]


@pytest.mark.parametrize(
    ("limit", "offset", "window"),
    [
        (None, None, postgrest.Window(0, None)),
        (5, None, postgrest.Window(0, 5)),
        (5, 10, postgrest.Window(10, 5)),
        (0, None, postgrest.Window(0, 0)),
        (0, 0, postgrest.Window(0, 0)),
        (None, 3, postgrest.Window(3, None)),
    ],
)
def test_postgrest_reads_limit_and_offset_so(
    limit: int | None, offset: int | None, window: postgrest.Window
) -> None:
    assert postgrest.window(limit, offset) == window


def test_limit_zero_with_an_offset_is_an_invalid_range() -> None:
    with pytest.raises(postgrest.PostgrestError, match="Requested range not satisfiable"):
        postgrest.window(0, 1)


@pytest.mark.parametrize(
    ("headers", "strict", "max_affected", "invalid"),
    [
        (["handling=strict, max-affected=3"], True, 3, []),
        (["max-affected=3", "max-affected=9"], False, 3, []),
        (["handling=lenient,handling=strict"], False, None, []),
        (["max-affected=x,handling=strict"], True, None, []),
        (["count=exact,foo"], False, None, ["foo"]),
    ],
)
def test_postgrest_reads_preferences_so(
    headers: list[str], strict: bool, max_affected: int | None, invalid: list[str]
) -> None:
    prefs = postgrest.parse_prefer(headers)
    assert (prefs.strict, prefs.max_affected, prefs.invalid) == (strict, max_affected, invalid)


@pytest.mark.parametrize(
    ("raw", "items"),
    [
        ("name,price", None),  # no aggregate: a plain select
        ("count()", [postgrest.SelectItem(None, "count")]),
        ("n:count()", [postgrest.SelectItem(None, "count", "n")]),
        ("count", None),  # count() is tried first, so a column named count stays one
        (
            "status,total:price.sum(),price.avg()",
            [
                postgrest.SelectItem("status"),
                postgrest.SelectItem("price", "sum", "total"),
                postgrest.SelectItem("price", "avg"),
            ],
        ),
        ("price.median()", None),  # not an AggregateFunction: a field named so, refused later
    ],
)
def test_postgrest_reads_aggregates_in_select_so(
    raw: str, items: list[postgrest.SelectItem] | None
) -> None:
    assert postgrest.parse_select_items(raw) == items


@pytest.mark.parametrize("raw", ["*,price.sum()", "x:name,price.sum()"])
def test_a_star_or_an_aliased_column_beside_an_aggregate_is_outside_the_subset(raw: str) -> None:
    with pytest.raises(postgrest.Outside, match="beside an aggregate"):
        postgrest.parse_select_items(raw)


def test_an_aggregated_read_groups_by_its_plain_columns() -> None:
    items = postgrest.parse_select_items("status,n:count(),region")
    assert items is not None
    assert [i.column for i in postgrest.group_items(items)] == ["status", "region"]
    assert postgrest.group_items(postgrest.parse_select_items("count()") or []) == []


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ('"true"', True),
        ("False", False),
        ("1", True),
        ("0", False),
        ("-2", False),
        ("yes", None),
        ("", None),
    ],
)
def test_postgrest_reads_a_boolean_setting_so(setting: str, value: bool | None) -> None:
    assert postgrest.coerce_bool(setting) is value
