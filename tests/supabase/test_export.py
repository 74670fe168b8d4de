"""Export over Supabase: each select becomes supabase-py code with the user's client factory by
name. Random scripted selects against the rig (PostgreSQL + RLS behind the shim), exported and
run in a fresh kernel, give the frames of the thread; ``postgrest_frame`` (the export's copy of
how rows become a DataFrame) agrees with the connector's own."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal
from supabase import ClientOptions, create_client

from loom_nb import ReplayModel, Reply, define_agent
from loom_nb._code import CodeContext
from loom_nb._embed import embed
from loom_nb.supabase import supabase_tools
from loom_nb.supabase._frame import postgrest_frame
from tests.notebook.nb_kernels import exported_results
from tests.supabase.rig import USER_A, Rig

COLUMNS = ["id", "status", "total", "created_at"]
TABLES = {"orders": {"columns": COLUMNS}, "products": {}}


def random_select(rng: random.Random) -> dict[str, Any]:
    filters = []
    for _ in range(rng.randint(0, 2)):
        column, op, value = rng.choice(
            [
                ("status", "eq", "paid"),
                ("status", "in", ["new", "shipped", "paid"]),
                ("status", "like", "%a%"),
                ("status", "ilike", "S%"),
                ("total", "gt", 30),
                ("total", "lte", 120.5),
                ("id", "neq", 2),
                ("created_at", "gte", "2026-01-06T00:00:00+00:00"),
                ("total", "is_null", None),
                # sent as PostgREST reads them: eq '', and integer form
                ("status", "in", ["", ""]),
                ("id", "lte", 3.0),
            ]
        )
        f: dict[str, Any] = {"column": column, "op": op}
        if value is not None:
            f["value"] = value
        if rng.random() < 0.3:
            f["not"] = True
        filters.append(f)
    args: dict[str, Any] = {"table": "orders", "filters": filters, "limit": rng.randint(1, 4)}
    if rng.random() < 0.5:
        args["columns"] = rng.sample(COLUMNS, rng.randint(1, 4))
    args["order"] = [{"column": rng.choice(COLUMNS), "desc": rng.random() < 0.5}, {"column": "id"}]
    if rng.random() < 0.3:
        args["offset"] = 1
    if rng.random() < 0.3:
        args["count"] = True
    return args


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(240)
def test_an_exported_supabase_thread_run_in_a_fresh_kernel_gives_its_frames(
    rig: Rig, tmp_path: Path
) -> None:
    def user_client(ctx: Any) -> Any:
        headers = {"Authorization": f"Bearer {ctx['jwt']}"}
        return create_client(rig.url, rig.anon_key, options=ClientOptions(headers=headers))

    rng = random.Random(4)
    calls = [("supabase_select", random_select(rng)) for _ in range(6)]
    calls.append(("supabase_select", {"table": "products", "order": [{"column": "id"}]}))
    model = ReplayModel([Reply("Looking.", calls[:4]), Reply("More.", calls[4:]), "Done."])
    connector = supabase_tools(client=user_client, tables=TABLES)
    agent = define_agent(name="analyst", model=model, connectors=[connector])
    context = {"jwt": rig.jwt(USER_A)}
    thread = agent.run_sync("Explore my orders.", context=context).thread
    results = {r.call_id: r for r in thread.tool_results()}
    thread_calls = [c for m in thread.messages for c in m.tool_calls]
    expected = {f"result_{n}": results[c.id].data for n, c in enumerate(thread_calls, start=1)}
    assert all(isinstance(f, pd.DataFrame) for f in expected.values())
    assert sum(len(f) for f in expected.values()) > 0

    path = agent.export(thread.id, tmp_path / "export.ipynb")
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "user_client(ctx)" in code and '.table("orders")' in code  # the factory by name
    define = (
        "from supabase import ClientOptions, create_client\n\n"
        "def user_client(ctx):\n"
        "    headers = {'Authorization': f\"Bearer {ctx['jwt']}\"}\n"
        f"    return create_client({rig.url!r}, {rig.anon_key!r}, "
        "options=ClientOptions(headers=headers))\n\n"
        f"context = {json.dumps(context)}"
    )
    got = exported_results(nb, define, tmp_path)
    for variable, frame in expected.items():
        assert_frame_equal(got[variable], frame, obj=variable)
    assert rig.shim.refused == []


def _postgrest_frame() -> Any:
    """The ``postgrest_frame`` an export defines: the module's source, as its first cell has it."""
    ctx = CodeContext()
    names = embed("loom_nb.supabase._frame", ctx)
    namespace: dict[str, Any] = {}
    exec("\n\n".join(ctx.setups), namespace)
    return namespace[names["postgrest_frame"]]


POSTGREST = _postgrest_frame()
cells = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.booleans(),
    st.sampled_from(
        [
            "2026-01-05T10:00:00+00:00",
            "2026-01-05 10:00:00",
            "2026-01-05T10:00:00.123456Z",
            "2026-13-45T10:00:00+00:00",
            "open",
            "",
        ]
    ),
    st.text(max_size=5),
)
records = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), cells, max_size=3), max_size=6)


@settings(max_examples=300, deadline=None)
@given(records, st.one_of(st.none(), st.just(["a", "b"]), st.just(["c"])))
def test_the_exports_postgrest_frame_is_the_connectors_frame_of_the_rows(
    rows: list[dict[str, Any]], columns: list[str] | None
) -> None:
    expected = postgrest_frame(rows, columns)
    assert_frame_equal(POSTGREST(rows, columns), expected)
