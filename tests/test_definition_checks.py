"""Mistakes in defining an agent, a tool or a store fail when they are made, with a message
that names the parameter and the fix (issue 16, point 9), not at the first run."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from loom_nb import ReplayModel, UserError, define_agent, tool
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store


def lookup(order_id: int) -> str:
    """Look an order up."""
    return str(order_id)


def define(**kwargs: Any) -> Any:
    return define_agent(**{"name": "a", "model": ReplayModel([]), **kwargs})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"temprature": 0}, r"no setting 'temprature': did you mean 'temperature'\?"),
        ({"max_token": 800}, r"no setting 'max_token': did you mean 'max_tokens'\?"),
        ({"colour": 1}, r"no setting 'colour': the settings are temperature, max_tokens"),
        ("fast", r"model_settings must be a dict like \{'temperature': 0"),
        ({"timeout": -5}, r"model_settings\['timeout'\] must be a positive number of seconds"),
        ({"idle_timeout": 0}, r"model_settings\['idle_timeout'\] must be a positive number"),
        ({"temperature": "hot"}, r"model_settings\['temperature'\] must be a number, got 'hot'"),
        ({"temperature": True}, r"model_settings\['temperature'\] must be a number, got True"),
        ({"max_tokens": 800.5}, r"model_settings\['max_tokens'\] must be a whole number"),
        ({"max_tokens": 0}, r"model_settings\['max_tokens'\] must be 1 or more"),
        ({"top_p": -0.1}, r"model_settings\['top_p'\] must be 0 or more"),
    ],
)
def test_model_settings_are_checked_key_by_key(settings: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        define(model_settings=settings)


def test_every_known_setting_is_accepted() -> None:
    settings = {
        "temperature": 0,
        "max_tokens": 800,
        "top_p": 0.9,
        "timeout": 30,
        "connect_timeout": 5,
        "idle_timeout": 20.5,
        "turn_timeout": 120,
    }
    assert define(model_settings=settings).model_settings == settings


def test_instructions_must_be_text() -> None:
    with pytest.raises(UserError, match=r"define_agent\(instructions=\.\.\.\) takes the text"):
        define(instructions=123)


@pytest.mark.parametrize("value", [True, 0, -1, 2.5, "20"])
def test_max_steps_must_be_a_positive_whole_number(value: Any) -> None:
    with pytest.raises(UserError, match=r"define_agent\(max_steps=\.\.\.\) takes a positive"):
        define(max_steps=value)


def test_one_tool_or_function_where_a_list_is_expected_is_accepted() -> None:
    assert list(define(tools=lookup).tools) == ["lookup", "ask_user"]  # ask_user: built in
    assert list(define(tools=tool(lookup)).tools) == ["lookup", "ask_user"]


def test_one_connector_where_a_list_is_expected_is_accepted() -> None:
    orders = pd.DataFrame({"id": [1, 2]})
    agent = define(connectors=frame_tools({"orders": {"frame": orders}}))
    assert "frames_select" in agent.tools


def test_a_tool_named_by_a_string_says_to_pass_the_function() -> None:
    with pytest.raises(
        UserError, match=r"define_agent\(tools=\.\.\.\) takes a list .* not its name"
    ):
        define(tools="lookup")
    with pytest.raises(UserError, match=r"define_agent\(tools=\.\.\.\)\[1\] is str 'lookup'"):
        define(tools=[lookup, "lookup"])


def test_a_connector_in_tools_and_a_tool_in_connectors_say_where_they_go() -> None:
    orders = frame_tools({"orders": {"frame": pd.DataFrame({"id": [1]})}})
    with pytest.raises(UserError, match=r"tools=\.\.\.\) takes a list.*connectors=\[\.\.\.\]"):
        define(tools=orders)
    with pytest.raises(UserError, match=r"connectors\[0\] is function; a tool .* tools="):
        define(connectors=[lookup])


def test_a_provider_without_a_model_name_says_the_name_is_missing() -> None:
    with pytest.raises(UserError, match=r"names no model after 'openai:'.*'openai:gpt-4\.1-mini'"):
        define(model="openai:")


class Point:
    """A class of the user's own: pydantic has no JSON schema for it."""


def test_a_parameter_of_a_type_with_no_json_form_names_the_tool_and_parameter() -> None:
    with pytest.raises(UserError, match=r"tool 'move': parameter 'to' has type Point, which"):

        @tool
        def move(to: Point, speed: float = 1.0) -> str:
            """Move there."""
            return "moved"

    class Local:  # defined in a function: its annotation cannot even be resolved
        pass

    with pytest.raises(UserError, match=r"tool 'visit': parameter 'place' has type Local"):

        @tool
        def visit(place: Local) -> str:
            """Visit it."""
            return "visited"


def test_a_tool_with_no_docstring_and_untyped_parameters_is_refused() -> None:
    with pytest.raises(UserError, match=r"tool 'fetch' has no docstring and its parameter 'key'"):

        @tool
        def fetch(key):  # type: ignore[no-untyped-def]
            return key

    @tool(description="Fetch one value by its key.")
    def described(key):  # type: ignore[no-untyped-def]
        return key

    assert described.parameters["properties"] == {"key": {"title": "Key"}}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"preview": "rows"}, r"tool\(preview=\.\.\.\) takes a function of the arguments"),
        ({"needs_approval": "yes"}, r"tool\(needs_approval=\.\.\.\) takes True, False"),
        ({"description": 42}, r"tool\(description=\.\.\.\) takes the text"),
        ({"describe": "rows"}, r"tool\(describe=\.\.\.\) takes a function of the call's"),
        ({"code": "df.head()"}, r"tool\(code=\.\.\.\) takes a function of the call's"),
    ],
)
def test_tool_options_are_checked_when_the_tool_is_made(options: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        tool(**options)(lookup)


def test_tool_of_something_not_callable_names_the_form_used() -> None:
    with pytest.raises(UserError, match=r"tool\(\.\.\.\) takes a function, got str 'lookup'"):
        tool("lookup")  # type: ignore[call-overload]
    with pytest.raises(UserError, match=r"tool\(run=\.\.\.\) takes a function, got int"):
        tool(description="d", run=3)  # type: ignore[arg-type]


def test_sqlite_store_path_none_names_the_parameter() -> None:
    with pytest.raises(UserError, match=r"sqlite_store\(path=\.\.\.\) takes a file path"):
        sqlite_store(path=None)  # type: ignore[arg-type]


def test_a_sqlite_file_with_another_programs_loom_threads_table(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE loom_threads (name TEXT)")
    with pytest.raises(UserError, match=r"already holds a table that loom_nb did not create"):
        sqlite_store(path)


@pytest.mark.parametrize("wait", [float("nan"), float("inf"), -1, True, "5"])
def test_interrupt_wait_is_a_finite_number_of_seconds(wait: Any):
    with pytest.raises(UserError, match=r"define_agent\(interrupt_wait=\.\.\.\) is in seconds"):
        define(interrupt_wait=wait)
