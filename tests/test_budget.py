"""Budgets that pause a run like an approval, and what each run and thread cost."""

from __future__ import annotations

from typing import Any

import pytest

from loom_nb import (
    CallAlreadyDecided,
    FunctionModel,
    Reply,
    ThreadWaiting,
    Usage,
    UserError,
    define_agent,
    memory_store,
    tool,
)


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return f"value of {key}"


def looping(usage: Usage, name: str = "test:function") -> FunctionModel:
    """A model that looks something up at every turn, each turn reporting ``usage``."""
    return FunctionModel(
        lambda request: Reply("", [("lookup", {"key": "k"})], usage=usage), name=name
    )


def test_a_token_budget_pauses_before_the_turn_that_would_pass_it_and_continue_grants_it_again():
    model = looping(Usage(10_000, 500, 1))
    agent = define_agent(name="a", model=model, tools=[lookup], budget={"tokens": 25_000})
    result = agent.run_sync("look things up")
    assert result.status == "awaiting_approval"
    assert len(model.requests) == 2  # 21,000 used; a third turn (~10,500) would pass 25,000
    [card] = result.pending
    assert card.tool == "budget" and card.call_id.startswith("pause_")
    assert "This run has used 21,000 tokens of 25,000 tokens" in card.preview
    assert "Continue with 25,000 tokens more, or stop." in card.preview
    assert result.usage.total_tokens == 21_000
    with pytest.raises(ThreadWaiting, match="budget"):
        agent.run_sync("something else", thread_id=result.thread_id)
    more = agent.resume_sync(result.thread_id, {card.call_id: True})
    assert more.status == "awaiting_approval" and len(model.requests) == 4  # 42,000 of 50,000
    assert "used 42,000 tokens of 50,000 tokens" in more.pending[0].preview
    with pytest.raises(CallAlreadyDecided):  # decided once
        agent.resume_sync(result.thread_id, {card.call_id: False})
    stopped = agent.resume_sync(result.thread_id, {more.pending[0].call_id: False})
    assert stopped.status == "complete" and len(model.requests) == 4
    # the model never saw a pause: only its own calls and their results
    sent = model.requests[-1].messages
    assert all(not c.id.startswith("pause_") for m in sent for c in m.tool_calls)
    assert all(not r.call_id.startswith("pause_") for m in sent for r in m.tool_results)
    thread = agent.thread(result.thread_id)
    outcomes = [r.content for r in thread.tool_results() if r.name == "budget"]
    assert outcomes == [
        '{"outcome": "continued with 25,000 tokens more"}',
        '{"outcome": "stopped at the budget"}',
    ]


def test_a_run_budget_rides_on_its_prompt_so_a_resume_elsewhere_keeps_it():
    store = memory_store()
    model = looping(Usage(1_000, 0, 1))
    first = define_agent(name="a", model=model, tools=[lookup], store=store)
    result = first.run_sync("go", budget={"tokens": 2_500})
    assert result.status == "awaiting_approval" and len(model.requests) == 2
    # another agent object (another kernel) without a budget of its own
    second = define_agent(name="a", model=model, tools=[lookup], store=store)
    [card] = second.thread(result.thread_id).pending
    again = second.resume_sync(result.thread_id, {card.call_id: True})
    assert again.status == "awaiting_approval" and len(model.requests) == 4
    assert "of 5,000 tokens" in again.pending[0].preview


def test_a_thread_budget_counts_every_run_of_the_thread():
    model = FunctionModel(lambda request: Reply("fine", usage=Usage(3_000, 100, 1)))
    agent = define_agent(name="a", model=model, budget={"thread_tokens": 8_000})
    one = agent.run_sync("one")
    agent.run_sync("two", thread_id=one.thread_id)
    three = agent.run_sync("three", thread_id=one.thread_id)
    assert three.status == "awaiting_approval" and len(model.requests) == 2
    assert "This thread has used 6,200 tokens of 8,000 tokens" in three.pending[0].preview


def test_max_steps_pauses_and_continues_with_as_many_turns_again():
    model = looping(Usage(10, 1, 1))
    agent = define_agent(name="a", model=model, tools=[lookup], max_steps=2)
    result = agent.run_sync("loop")
    [card] = result.pending
    assert card.tool == "max_steps" and len(model.requests) == 2
    assert result.status == "awaiting_approval" and result.error is None
    again = agent.resume_sync(result.thread_id, {card.call_id: True})
    assert again.pending[0].tool == "max_steps" and len(model.requests) == 4


def test_usage_carries_the_cost_from_the_price_table_or_says_it_is_unknown():
    model = FunctionModel(
        lambda request: Reply("hi", usage=Usage(1_000_000, 100_000, 1)),
        name="openai:gpt-4.1-mini",
    )
    priced = define_agent(name="a", model=model).run_sync("hello")
    # gpt-4.1-mini in genai-prices: $0.40 in, $1.60 out per million tokens
    assert priced.usage.cost == pytest.approx(0.40 + 0.16)
    assert priced.usage.line() == "1,000,000 tokens in · 100,000 out · $0.5600"
    unknown = define_agent(name="b", model=looping(Usage(5, 5, 1))).run_sync("x")
    assert unknown.usage.cost is None and unknown.usage.line().endswith("price unknown")
    assert unknown.thread.usage.cost is None


def test_prices_for_a_model_the_table_does_not_know_and_a_dollar_budget():
    model = looping(Usage(100_000, 10_000, 1))
    with pytest.raises(UserError, match="price of test:function is unknown"):
        define_agent(name="a", model=model, tools=[lookup], budget={"usd": 1.0})
    agent = define_agent(
        name="a",
        model=model,
        tools=[lookup],
        prices={"input": 1.0, "output": 10.0},
        budget={"usd": 0.5},
    )
    result = agent.run_sync("spend")
    assert result.usage.cost == pytest.approx(2 * (0.1 + 0.1))
    assert result.pending[0].tool == "budget" and "$0.4000 of $0.5000" in result.pending[0].preview
    assert len(model.requests) == 2


def test_cached_tokens_are_kept_and_priced(tmp_path: Any) -> None:
    from loom_nb.sqlite import sqlite_store

    usage = Usage(100_000, 0, 1, cache_read_tokens=80_000)
    model = FunctionModel(
        lambda request: Reply("hi", usage=usage), name="anthropic:claude-sonnet-4-5"
    )
    agent = define_agent(name="a", model=model, store=sqlite_store(tmp_path / "loom.db"))
    result = agent.run_sync("hello")
    loaded = agent.thread(result.thread_id).usage  # read back from the store
    assert loaded.cache_read_tokens == 80_000 and loaded.input_tokens == 100_000
    # $3 per million fresh input, $0.30 per million read from the cache (under 200k)
    assert loaded.cost == pytest.approx(0.02 * 3 + 0.08 * 0.3)
    assert "(80,000 cached)" in loaded.line()


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"tokenz": 5}, "no key 'tokenz'"),
        ({"tokens": 0}, "must be a positive number of tokens"),
        ({"usd": float("nan")}, "must be a positive number of US dollars"),
        (5, "takes a dict like"),
    ],
)
def test_a_bad_budget_says_how_to_write_it(budget: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        define_agent(name="a", model=looping(Usage()), budget=budget)
    agent = define_agent(name="a", model=looping(Usage()))
    with pytest.raises(UserError, match=message):
        agent.run_sync("x", budget=budget)


def test_the_export_says_the_threads_usage_in_its_first_cell(tmp_path: Any) -> None:
    import nbformat

    model = FunctionModel(
        lambda request: Reply("hi", usage=Usage(1_000, 100, 1)), name="openai:gpt-4.1-mini"
    )
    agent = define_agent(name="a", model=model)
    result = agent.run_sync("hello")
    path = agent.export(result.thread_id, tmp_path / "t.ipynb")
    first = nbformat.read(path, as_version=4).cells[0].source
    assert "Model usage of the thread: 1,000 tokens in · 100 out · $0.0006." in first
    unknown = define_agent(name="b", model=looping(Usage(5, 5, 1)), max_steps=1)
    paused = unknown.run_sync("x")
    path = unknown.export(paused.thread_id, tmp_path / "u.ipynb")
    assert (
        "5 tokens in · 5 out · price unknown." in nbformat.read(path, as_version=4).cells[0].source
    )
