"""Tokens counted before sending, against tiktoken's count of what the real openai SDK sent
to the local wire-protocol server, and budgets against the usage that server reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from loom_nb import define_agent, tool
from loom_nb._tokens import counter_for
from tests.models._wire import WireServer, call_args, call_start, stream, text
from tests.models.test_openai import make_model
from tests.test_history import tiktoken_cache  # noqa: F401 (a fixture)


@tool
def orders(limit: int) -> Any:
    """The first orders.

    Args:
        limit: how many.
    """
    return pd.DataFrame({"id": range(limit), "customer": [f"c{i} ltd" for i in range(limit)]})


def cookbook_count(body: dict[str, Any]) -> int:
    """OpenAI's guide to counting chat tokens, for the messages of a request body."""
    import tiktoken

    encoding = tiktoken.get_encoding("o200k_base")
    total = 3  # the reply's priming
    for message in body["messages"]:
        total += 3
        for key in ("role", "content", "tool_call_id"):
            if message.get(key):
                total += len(encoding.encode(str(message[key])))
        for call in message.get("tool_calls") or []:
            total += len(encoding.encode(call["function"]["name"] + call["function"]["arguments"]))
    return total


async def test_the_count_before_sending_is_within_ten_percent_of_tiktoken_on_what_was_sent(
    server: WireServer,
    tiktoken_cache: Path,  # noqa: F811
) -> None:
    server.add(
        stream(
            call_start(0, "call_o1", "orders"), call_args(0, '{"limit": 40}'), finish="tool_calls"
        ),
        text("Forty orders."),
    )
    model = make_model(server)
    agent = define_agent(name="a", model=model, tools=[orders])
    result = await agent.run("List the first forty orders.")
    assert result.output == "Forty orders."
    counter = counter_for(model.name)
    assert counter.method == "tiktoken o200k_base"
    body = server.requests[1].body
    ours = sum(counter.message(m) for m in result.thread.messages[:3])
    reference = cookbook_count(body)
    assert abs(ours - reference) / reference < 0.10, (ours, reference, json.dumps(body)[:200])
    # the usage the server reported is the thread's
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.requests) == (
        20,
        10,
        2,
    )
    assert result.usage.cost is None  # "gpt-test" is in no price table


async def test_a_budget_pauses_on_the_usage_the_server_reports(server: WireServer) -> None:
    server.add(
        stream(
            call_start(0, "call_o1", "orders"),
            call_args(0, '{"limit": 3}'),
            finish="tool_calls",
            usage=(3_000, 20),
        )
    )
    agent = define_agent(
        name="a", model=make_model(server), tools=[orders], budget={"tokens": 5_000}
    )
    result = await agent.run("Orders?")
    assert len(server.requests) == 1  # a second turn of ~3,000 would pass 5,000
    [card] = result.pending
    assert card.tool == "budget" and "has used 3,020 tokens of 5,000 tokens" in card.preview
