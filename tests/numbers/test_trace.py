"""trace_numbers on small threads: what each entry says, and what is never marked."""

from __future__ import annotations

from datetime import date

import pandas as pd

from loom_nb import Message, TextPart, Thread, ToolCall, ToolResult, TracedNumber, trace_numbers
from loom_nb._render import frame_for_model


def _thread(question: str, results: list[ToolResult], *answers: str) -> Thread:
    thread = Thread(id="t", agent="a")
    thread.messages = [
        Message.user(question),
        Message("assistant", [ToolCall(r.call_id, r.name, {}) for r in results]),
        Message("tool", list(results)),
        *(Message("assistant", [TextPart(a)]) for a in answers),
    ]
    return thread


def _frame_result(call_id: str, df: pd.DataFrame) -> ToolResult:
    return ToolResult(call_id, "query", frame_for_model(df), df)


SALES = pd.DataFrame({"region": ["N", "S"], "revenue": [1200.5, 800.25], "orders": [12, 8]})


def test_each_entry_names_its_message_text_value_call_and_rule() -> None:
    thread = _thread(
        "Sales by region?",
        [_frame_result("call_1", SALES)],
        "N made $1,200.50 from 12 orders; together $2,000.75 over 2 regions, "
        "N is 60% of orders, and S made $9,999.",
    )
    traced = trace_numbers(thread)
    assert [(n.text, n.rule, n.call_id) for n in traced] == [
        ("$1,200.50", "shown", "call_1"),
        ("12", "shown", "call_1"),
        ("$2,000.75", "sum", "call_1"),
        ("2", "count", "call_1"),
        ("60%", "ratio", "call_1"),
        ("$9,999", None, None),
    ]
    assert all(n.message == 3 for n in traced)
    assert traced[0].value == 1200.5 and traced[-1].value == 9999
    text = thread.messages[3].text
    assert all(text[n.start : n.end] == n.text for n in traced)
    assert isinstance(traced[0], TracedNumber)
    assert traced[-1].source == "in no result"
    assert traced[0].source == "shown in call_1"


def test_units_percentages_rounding_and_dates() -> None:
    content = '{"requests": 1843200, "p95_ms": 312.4, "error_rate": 0.0042, "day": "2024-11-02"}'
    thread = _thread(
        "How is checkout?",
        [ToolResult("call_1", "metrics", content)],
        "About 1.8M requests, p95 312 ms, errors 0.42%, on 2024-11-02 (Nov 2, 2024); "
        "p99 was 950 ms on 2024-11-09.",
    )
    got = [(n.text, n.value, n.rule) for n in trace_numbers(thread)]
    assert got == [
        ("1.8M", 1_800_000, "rounded"),
        ("312 ms", 312, "rounded"),
        ("0.42%", 0.42, "shown"),
        ("2024-11-02", date(2024, 11, 2), "shown"),
        ("Nov 2, 2024", date(2024, 11, 2), "shown"),
        ("950 ms", 950, None),
        ("2024-11-09", date(2024, 11, 9), None),
    ]


def test_years_list_numbers_ids_and_the_users_numbers_are_never_marked() -> None:
    thread = _thread(
        "Show order 50231 for the top 3 customers since 2021, with a 15% discount.",
        [ToolResult("call_1", "orders", '{"order_id": 50231, "total": 99.5}')],
        "In 2023 order 50231 came to $99.50:\n1. the top 3 customers\n2. a 15% discount\n"
        "3. gpt-4 wrote it in Q3, version 1.2.3, at 10:30 on the 2nd",
    )
    traced = trace_numbers(thread)
    assert [(n.text, n.rule) for n in traced] == [
        ("2023", "year"),
        ("50231", "shown"),
        ("$99.50", "shown"),
        ("3", "question"),
        ("15%", "question"),
    ]


def test_only_earlier_results_count_and_not_a_number_checks_own_correction() -> None:
    thread = _thread("Total?", [ToolResult("call_1", "total", '{"total": 40}')], "It is 40.")
    thread.messages.insert(1, Message("assistant", [TextPart("Maybe 40.")]))
    traced = trace_numbers(thread)
    assert [(n.message, n.rule) for n in traced] == [(1, None), (4, "shown")]
    check = ToolResult("numbers_x", "check_numbers", '{"numbers": ["77"]}', is_error=True)
    thread.messages += [
        Message("assistant", [ToolCall("numbers_x", "check_numbers", {})]),
        Message("tool", [check]),
        Message("assistant", [TextPart("It is 77.")]),
    ]
    assert trace_numbers(thread)[-1].rule is None


def test_a_thread_without_numbers_traces_nothing() -> None:
    assert trace_numbers(_thread("Hi", [], "Hello there.")) == []


def test_the_codes_of_a_terminal_control_sequence_are_no_numbers() -> None:
    thread = _thread(
        "Sales?",
        [_frame_result("call_1", SALES)],
        "N made \x1b[8m$1,200.50\x1b[0m and \x9b31mS 800.25\x1b]52;c;12\x07 from 20 orders.",
    )
    traced = trace_numbers(thread)
    assert [(n.text, n.rule) for n in traced] == [
        ("$1,200.50", "shown"),
        ("800.25", "shown"),
        ("20", "sum"),
    ]
