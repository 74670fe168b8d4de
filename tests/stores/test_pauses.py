"""A run's pause (a budget or ``max_steps`` reached) on every store: saved with its card like an
approval request, read by a store opened afresh (another kernel), decided once by
compare-and-set, and the run goes on from the thread as the store kept it."""

from __future__ import annotations

import pytest

from loom_nb import CallAlreadyDecided, FunctionModel, Reply, Usage, define_agent, tool
from tests.stores.conftest import Backend


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return f"value of {key}"


def looping() -> FunctionModel:
    return FunctionModel(
        lambda request: Reply("", [("lookup", {"key": "k"})], usage=Usage(1_000, 0, 1))
    )


def test_a_budget_pause_survives_the_store_and_is_decided_once(backend: Backend) -> None:
    model = looping()
    first = define_agent(
        name="a", model=model, tools=[lookup], store=backend.open(), budget={"tokens": 2_500}
    )
    paused = first.run_sync("go")
    assert paused.status == "awaiting_approval" and len(model.requests) == 2
    # another kernel: its own store object and agent, the card is there
    other = define_agent(
        name="a", model=model, tools=[lookup], store=backend.open(), budget={"tokens": 2_500}
    )
    thread = other.thread(paused.thread_id)
    [card] = thread.pending
    assert (card.tool, card.state) == ("budget", "pending")
    assert "has used 2,000 tokens of 2,500 tokens" in card.preview
    assert card.arguments == {
        "scope": "run",
        "unit": "tokens",
        "used": 2_000.0,
        "limit": 2_500.0,
        "grant": 2_500.0,
    }
    went_on = other.resume_sync(paused.thread_id, {card.call_id: True})
    assert len(model.requests) == 4 and went_on.pending[0].tool == "budget"
    with pytest.raises(CallAlreadyDecided):  # the first kernel decides too late
        first.resume_sync(paused.thread_id, {card.call_id: False})
    kept = backend.open().load(paused.thread_id)
    assert kept is not None
    assert [r.content for r in kept.tool_results() if r.name == "budget"] == [
        '{"outcome": "continued with 2,500 tokens more"}'
    ]
    assert kept.usage.input_tokens == 4_000


def test_a_max_steps_pause_is_saved_and_stops_once(backend: Backend) -> None:
    model = looping()
    agent = define_agent(name="a", model=model, tools=[lookup], store=backend.open(), max_steps=1)
    paused = agent.run_sync("go")
    [card] = paused.pending
    assert card.tool == "max_steps"
    again = define_agent(name="a", model=model, tools=[lookup], store=backend.open(), max_steps=1)
    stopped = again.resume_sync(paused.thread_id, {card.call_id: False})
    assert stopped.status == "complete" and stopped.error is None and len(model.requests) == 1
    with pytest.raises(CallAlreadyDecided):
        agent.resume_sync(paused.thread_id, {card.call_id: True})
