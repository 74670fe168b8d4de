"""Fixtures for the frame_tools tests: a fresh orders frame, and a read-only connector over it."""

from __future__ import annotations

import pandas as pd
import pytest

from loom_nb._tools import Connector
from loom_nb.frames import frame_tools
from tests.frames._orders import orders_frame


@pytest.fixture
def orders() -> pd.DataFrame:
    return orders_frame()


@pytest.fixture
def conn(orders: pd.DataFrame) -> Connector:
    return frame_tools({"orders": {"frame": orders, "description": "Customer orders"}})
