"""define_agent(check_numbers=...): "warn" marks, "strict" sends the made-up numbers back to
the model once before the answer is final, "off" traces nothing during runs."""

from __future__ import annotations

import pytest

from loom_nb import (
    MessageAdded,
    ReplayModel,
    Reply,
    UserError,
    define_agent,
    memory_store,
    tool,
    trace_numbers,
)
from loom_nb._numbers import CHECK_TOOL


@tool
def order_totals() -> list[dict[str, float]]:
    """The orders and their totals."""
    return [{"order": 1, "total": 120.0}, {"order": 2, "total": 80.5}]


def _model(*answers: str) -> ReplayModel:
    return ReplayModel([Reply("Looking.", tool_calls=[("order_totals", {})]), *answers])


def test_strict_sends_an_invented_total_back_once_and_keeps_the_second_answer() -> None:
    model = _model("The two orders total $250.00.", "The two orders total $200.50.")
    agent = define_agent(
        name="a", model=model, tools=[order_totals], store=memory_store(), check_numbers="strict"
    )
    result = agent.run_sync("What do the orders total?")
    assert result.output == "The two orders total $200.50."
    # the model was asked a third time, told which number is in no result
    assert len(model.requests) == 3
    sent = model.requests[2].messages
    correction = sent[-1].tool_results[0]
    assert correction.name == CHECK_TOOL and correction.is_error
    assert "$250.00" in correction.content and "$200.50" not in correction.content
    assert sent[-2].tool_calls[0].name == CHECK_TOOL
    # the first answer stays in the thread as history, marked; the second is traced clean
    saved = agent.thread(result.thread_id)
    texts = [m.text for m in saved.messages if m.role == "assistant" and m.text]
    assert texts == ["Looking.", "The two orders total $250.00.", "The two orders total $200.50."]
    traced = trace_numbers(saved)
    assert [(n.text, n.rule) for n in traced] == [("$250.00", None), ("$200.50", "sum")]


def test_strict_corrects_once_then_the_answer_is_final() -> None:
    model = _model("They total $250.", "They total $260.")
    agent = define_agent(
        name="a", model=model, tools=[order_totals], store=memory_store(), check_numbers="strict"
    )
    result = agent.run_sync("What do the orders total?")
    assert result.status == "complete"
    assert result.output == "They total $260."
    assert len(model.requests) == 3  # no second correction
    assert [n.text for n in trace_numbers(result.thread) if n.rule is None] == ["$250", "$260"]


def test_warn_marks_without_asking_again_and_off_traces_nothing() -> None:
    for mode, expected in (("warn", [("$250", None)]), ("off", [])):
        events: list[MessageAdded] = []
        model = _model("They total $250.")
        agent = define_agent(
            name="a", model=model, tools=[order_totals], store=memory_store(), check_numbers=mode
        )
        result = agent.run_sync("Total?", on_event=events.append)
        assert result.output == "They total $250."
        assert len(model.requests) == 2
        last = [e for e in events if isinstance(e, MessageAdded)][-1]
        assert [(n.text, n.rule) for n in last.numbers] == expected
        assert all(n.message == len(result.thread.messages) - 1 for n in last.numbers)


def test_a_bad_mode_fails_at_definition_naming_the_good_ones() -> None:
    with pytest.raises(UserError, match=r"'warn', 'strict', 'off'.*'loud'"):
        define_agent(name="a", model=ReplayModel([]), store=memory_store(), check_numbers="loud")  # type: ignore[arg-type]


def test_a_tool_may_not_take_the_corrections_name() -> None:
    @tool(name=CHECK_TOOL)
    def mine() -> str:
        """Mine."""
        return "x"

    with pytest.raises(UserError, match="check_numbers"):
        define_agent(name="a", model=ReplayModel([]), store=memory_store(), tools=[mine])


def test_a_strict_thread_replayed_as_it_went_is_equal_in_an_eval() -> None:
    """The correction is loom_nb's call, not the model's: the thread's own script, replayed,
    is corrected the same way, and the eval compares the model's calls alone."""
    model = _model("The two orders total $250.00.", "The two orders total $200.50.")
    agent = define_agent(
        name="a", model=model, tools=[order_totals], store=memory_store(), check_numbers="strict"
    )
    thread = agent.run_sync("What do the orders total?").thread
    again = ReplayModel.of_thread(thread)
    report = agent.eval([thread.id], model=again)

    assert report.equal, report.to_frame().to_dict("records")
    assert [c.tool for c in report.threads[0].calls] == ["order_totals"]
    replay = report.threads[0].replay
    assert replay is not None and replay.messages[-1].text == "The two orders total $200.50."
    assert [c.name for m in replay.messages for c in m.tool_calls] == ["order_totals", CHECK_TOOL]
    assert again.replies == []  # every answer of the thread was asked for
    # a model right the first time: not corrected, and the frames are the same
    right = _model("The two orders total $200.50.")
    assert agent.eval([thread.id], model=right).equal
