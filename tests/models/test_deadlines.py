"""The deadlines in model_settings: their defaults, what ``timeout`` means, and bad values
refused when the agent is defined."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loom_nb import ReplayModel, UserError, define_agent
from loom_nb.models import ModelSettings
from loom_nb.models._deadlines import Deadlines, Expired, _timeout_at_310


def test_defaults() -> None:
    assert Deadlines.from_settings(ModelSettings()) == Deadlines(10.0, 60.0, 300.0)


def test_timeout_is_each_network_wait_and_the_specific_keys_win() -> None:
    assert Deadlines.from_settings(ModelSettings(timeout=5)) == Deadlines(5.0, 5.0, 300.0)
    both = ModelSettings(timeout=5, idle_timeout=20, turn_timeout=30)
    assert Deadlines.from_settings(both) == Deadlines(5.0, 20.0, 30.0)


def test_a_long_wait_is_not_cut_by_the_default_turn_deadline() -> None:
    assert Deadlines.from_settings(ModelSettings(idle_timeout=600)).turn == 610.0
    assert Deadlines.from_settings(ModelSettings(timeout=400)).turn == 800.0


@pytest.mark.parametrize("value", [0, -1, "10", True, None, float("inf"), float("nan")])
@pytest.mark.parametrize("key", ["connect_timeout", "idle_timeout", "turn_timeout", "timeout"])
def test_bad_values_are_refused_when_the_agent_is_defined(key: str, value: Any) -> None:
    with pytest.raises(UserError, match=rf"model_settings\['{key}'\] must be a positive number"):
        define_agent(name="a", model=ReplayModel([]), model_settings={key: value})  # type: ignore[arg-type]


def test_model_settings_must_be_a_dict() -> None:
    with pytest.raises(UserError, match="model_settings must be a dict"):
        define_agent(name="a", model=ReplayModel([]), model_settings=[("timeout", 1)])  # type: ignore[arg-type]


async def test_the_python_310_timer_expires_and_lets_other_cancels_through() -> None:
    async def sleeper(seconds: float, when: float) -> None:
        async with _timeout_at_310(when):
            await asyncio.sleep(seconds)

    loop = asyncio.get_running_loop()
    with pytest.raises(Expired, match="deadline passed"):
        await asyncio.create_task(sleeper(5, loop.time() + 0.05))
    await asyncio.create_task(sleeper(0, loop.time() + 5))  # done in time: nothing raised

    task = asyncio.create_task(sleeper(5, loop.time() + 5))
    await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
