"""The one builder behind both table connectors: the same tools, the same approval rule."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pytest

from loom_nb._tools import Connector
from loom_nb.frames import frame_tools
from loom_nb.supabase import supabase_tools

#: Each connector with one writable table ``orders`` (id, total) and one read-only ``notes``.
MAKERS: dict[str, Callable[..., Connector]] = {
    "frames": lambda **kw: frame_tools(
        {
            "orders": {"frame": pd.DataFrame({"id": [1], "total": [2.5]}), "write": True},
            "notes": pd.DataFrame({"body": ["x"]}),
        },
        name="shop",
        **kw,
    ),
    "supabase": lambda **kw: supabase_tools(
        client=lambda ctx: None,
        tables={"orders": {"columns": ["id", "total"], "write": True}, "notes": {}},
        name="shop",
        **kw,
    ),
}
INSERT = {"frames": "shop_append", "supabase": "shop_insert"}


@pytest.mark.parametrize("backend", sorted(MAKERS))
def test_a_write_asks_for_approval_only_when_its_arguments_can_work(backend: str) -> None:
    conn = MAKERS[backend]()
    insert, update = conn.tools[INSERT[backend]], conn.tools["shop_update"]
    assert insert.requires_approval({"table": "orders", "rows": [{"id": 2, "total": 1.0}]})
    assert update.requires_approval(
        {
            "table": "orders",
            "values": {"total": 3.0},
            "filters": [{"column": "id", "op": "eq", "value": 1}],
        }
    )
    # refused ones are answered at once with the reason, never shown to the user
    assert not insert.requires_approval({"table": "orders", "rows": [{"nope": 1}]})
    assert not insert.requires_approval({"table": "notes", "rows": [{"body": "y"}]})
    assert not update.requires_approval({"table": "orders", "values": {"total": 3.0}})
    # approve_writes=False: nothing waits
    unattended = MAKERS[backend](approve_writes=False)
    rows = {"table": "orders", "rows": [{"id": 2, "total": 1.0}]}
    assert not unattended.tools[INSERT[backend]].requires_approval(rows)


@pytest.mark.parametrize("backend", sorted(MAKERS))
def test_descriptions_name_the_tables_and_say_when_the_user_approves(backend: str) -> None:
    conn = MAKERS[backend]()
    select = conn.tools["shop_select"].description
    assert "- orders (columns:" in select and "- notes (columns:" in select
    assert "You see at most 50 rows of a result" in select
    assert "holds every match up to 10,000" in select
    for name in (INSERT[backend], "shop_update"):
        text = conn.tools[name].description
        assert "Writable tables:\n- orders (columns:" in text and "- notes" not in text
        assert "The user approves each call before anything is written." in text
    unattended = MAKERS[backend](approve_writes=False).tools["shop_update"].description
    assert "approves" not in unattended
