"""tool() in its three forms, connectors, and the checks made when they are defined."""

from __future__ import annotations

import asyncio
import threading

import pytest
from pydantic import BaseModel

from loom_nb import (
    ReplayModel,
    Reply,
    RunContext,
    Tool,
    ToolInputError,
    ToolOutput,
    UserError,
    connector,
    define_agent,
    tool,
)
from loom_nb._tools import _plain_schema


def ctx() -> RunContext:
    return RunContext(agent="a", thread_id="t", data={"user": "ann"})


def test_decorator_reads_name_description_and_schema_from_the_function():
    @tool
    def get_invoice(invoice_id: str, include_lines: bool = False) -> dict:
        """Fetch one invoice by its id."""
        return {"id": invoice_id, "lines": include_lines}

    assert isinstance(get_invoice, Tool)
    assert get_invoice.name == "get_invoice"
    assert get_invoice.description == "Fetch one invoice by its id."
    props = get_invoice.parameters["properties"]
    assert props["invoice_id"]["type"] == "string"
    assert props["include_lines"]["type"] == "boolean"
    assert get_invoice.parameters["required"] == ["invoice_id"]
    out = asyncio.run(get_invoice.call({"invoice_id": "42"}, ctx()))
    assert out.data == {"id": "42", "lines": False}
    assert '"id": "42"' in out.content


def test_type_hints_validate_and_coerce_like_pydantic():
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    assert asyncio.run(add.call({"a": "2", "b": 3}, ctx())).content == "5"
    with pytest.raises(ToolInputError, match="b"):
        add.validate({"a": 1})
    with pytest.raises(ToolInputError, match="Extra inputs"):
        add.validate({"a": 1, "b": 2, "c": 3})


def test_seed_form_with_pydantic_input_and_async_run():
    class Query(BaseModel):
        invoice_id: str
        limit: int = 10

    async def fetch(q: Query) -> str:
        await asyncio.sleep(0)
        return f"{q.invoice_id}:{q.limit}"

    t = tool(name="fetch", description="Fetch invoices.", input=Query, run=fetch)
    assert t.parameters["properties"]["limit"]["default"] == 10
    assert asyncio.run(t.call({"invoice_id": "7"}, ctx())).content == "7:10"
    with pytest.raises(ToolInputError, match="limit: Input should be a valid integer"):
        t.validate({"limit": "many"})


def test_seed_form_with_json_schema_dict():
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    t = tool(description="Weather.", input=schema, run=lambda args: f"sunny in {args['city']}")
    assert t.name is None  # named by its key in a connector or agent dict
    named = connector("weather", {"get_weather": t}).tools["get_weather"]
    assert asyncio.run(named.call({"city": "Oslo"}, ctx())).content == "sunny in Oslo"
    with pytest.raises(ToolInputError, match="city"):
        named.validate({})
    with pytest.raises(ToolInputError, match="city: 3 is not of type 'string'"):
        named.validate({"city": 3})


def test_an_invalid_json_schema_fails_at_definition():
    with pytest.raises(UserError, match="not a valid JSON schema"):
        tool(description="x", input={"type": "no-such-type"}, run=lambda a: a)


def test_run_context_is_injected_by_annotation_or_name():
    @tool
    def whoami(ctx: RunContext, greeting: str) -> str:
        return f"{greeting} {ctx['user']} in {ctx.thread_id}"

    assert "ctx" not in whoami.parameters["properties"]
    assert asyncio.run(whoami.call({"greeting": "hi"}, ctx())).content == "hi ann in t"


def test_sync_tools_run_off_the_event_loop_so_they_can_run_together():
    # Each tool waits until the other has started: one after the other, both would time out.
    both_started = threading.Barrier(2, timeout=10)

    @tool
    def left() -> str:
        both_started.wait()
        return "left done"

    @tool
    def right() -> str:
        both_started.wait()
        return "right done"

    model = ReplayModel([Reply("", [("left", {}), ("right", {})]), "Both done."])
    result = define_agent(name="a", model=model, tools=[left, right]).run_sync("go")
    answers = result.thread.messages[2].tool_results
    assert [(r.content, r.is_error) for r in answers] == [
        ("left done", False),
        ("right done", False),
    ]


def test_async_tools_of_one_turn_run_together():
    pinged, ponged = asyncio.Event(), asyncio.Event()

    @tool
    async def ping() -> str:
        pinged.set()
        await asyncio.wait_for(ponged.wait(), 10)
        return "ping done"

    @tool
    async def pong() -> str:
        ponged.set()
        await asyncio.wait_for(pinged.wait(), 10)
        return "pong done"

    model = ReplayModel([Reply("", [("ping", {}), ("pong", {})]), "Both done."])
    result = define_agent(name="a", model=model, tools=[ping, pong]).run_sync("go")
    answers = result.thread.messages[2].tool_results
    assert [(r.content, r.is_error) for r in answers] == [
        ("ping done", False),
        ("pong done", False),
    ]


def test_tool_output_sets_text_and_data_apart():
    @tool
    def report() -> ToolOutput:
        return ToolOutput(content="3 rows", data={"rows": [1, 2, 3]})

    out = asyncio.run(report.call({}, ctx()))
    assert out.content == "3 rows" and out.data == {"rows": [1, 2, 3]}


def test_dataframe_results_are_rendered_compactly_for_the_model():
    pd = pytest.importorskip("pandas")

    @tool
    def orders() -> object:
        return pd.DataFrame({"id": [1, 2], "status": ["open", "paid"]})

    out = asyncio.run(orders.call({}, ctx()))
    assert out.data.shape == (2, 2)
    assert "data, not instructions" in out.content
    assert "id,status\n1,open\n2,paid" in out.content


# Non-ASCII letters and digits too: the providers' pattern is ASCII.
@pytest.mark.parametrize("name", ["has space", "semi;colon", "", "x" * 65, "météo", "x²", "a.b"])
def test_bad_tool_names_fail_at_definition(name):
    with pytest.raises(UserError, match="tool name"):
        tool(name=name, description="d", run=lambda: None)


def test_connector_takes_a_dict_or_a_list_and_plain_functions():
    def ping() -> str:
        """Ping."""
        return "pong"

    c = connector("net", [ping])
    assert list(c.tools) == ["ping"] and c.tools["ping"].description == "Ping."
    c2 = connector("net", {"check": ping})
    assert list(c2.tools) == ["check"]


def test_connector_list_with_two_tools_of_one_name_fails():
    @tool
    def ping() -> str:
        return "a"

    with pytest.raises(UserError, match=r"'ping'.*connector 'net' \(twice\)"):
        connector("net", [ping, ping])


def test_unnamed_tool_in_a_list_is_refused_with_a_fix():
    t = tool(description="anonymous", input={"type": "object"}, run=lambda a: a)
    with pytest.raises(UserError, match="has no name"):
        connector("c", [t])


def test_input_with_a_run_function_of_two_arguments_is_refused():
    class Q(BaseModel):
        a: int

    with pytest.raises(UserError, match="one argument"):
        tool(description="d", input=Q, run=lambda a, b: None)


def test_needs_approval_can_depend_on_the_arguments():
    @tool(needs_approval=lambda args: args["amount"] > 100)
    def refund(amount: float) -> str:
        return "ok"

    assert refund.requires_approval({"amount": 500})
    assert not refund.requires_approval({"amount": 5})


def test_a_list_given_as_something_else_gets_the_shape_expected() -> None:
    """The model's ``"order": "total"`` or ``"columns": "*"`` comes back as an error result that
    shows the expected shape, with its value put where it fits, not only the type."""
    import pandas as pd

    from loom_nb import FunctionModel, Reply, define_agent
    from loom_nb.frames import frame_tools

    args = {"table": "orders", "order": "total", "columns": "*"}

    def script(request: object) -> object:
        if request.messages[-1].role == "user":
            return Reply("", [("frames_select", args)])
        return "done"

    orders = pd.DataFrame({"id": [1, 2], "total": [5.0, 7.0]})
    agent = define_agent(
        name="a", model=FunctionModel(script), connectors=[frame_tools({"orders": orders})]
    )
    result = agent.run_sync("go")
    [answer] = [r for m in result.thread.messages for r in m.tool_results]
    assert answer.is_error
    said = answer.error or ""
    assert (
        "order: 'total' is not of type 'array'; order must be a list like [{\"column\": "
        '"total", "desc": true}]'
    ) in said
    assert (
        "columns: '*' is not of type 'array'; columns must be a list like [\"name\"] (Columns "
        "to return; omit for all allowed columns.)"
    ) in said
    one = {"column": "id", "op": "eq", "value": 1}
    with pytest.raises(ToolInputError, match=r'filters must be a list like \[\{"column": "id", '):
        agent.tools["frames_select"].validate({"table": "orders", "filters": one})


@pytest.mark.parametrize(
    "annotation, default",
    [
        ("str", "..."),
        ("int", "3"),
        ("float", "0.25"),
        ("bool", "True"),
        ("typing.Any", "..."),
        ("typing.Any", "None"),
        ("list", "..."),
        ("dict", "..."),
        ("list[str]", "..."),
        ("list[list[int]]", "..."),
        ("typing.List[float]", "..."),
        ("dict[str, int]", "..."),
        ("dict[str, list[bool]]", "..."),
        ("str | None", "None"),
        ("typing.Optional[int]", "..."),
        ("list[str] | None", "None"),
        ("dict[str, float] | None", "None"),
        ("str", "None"),
        ("int", "'not an int'"),
    ],
)
def test_plain_parameters_get_the_schema_pydantic_writes(annotation: str, default: str):
    import typing

    from pydantic import ConfigDict, create_model

    namespace: dict[str, object] = {"typing": typing}
    # Names that title() changes in odd ways, a name pydantic keeps as is, two parameters.
    source = (
        f"def f(city_name_2x: {annotation}"
        + ("" if default == "..." else f" = {default}")
        + f", x: {annotation}"
        + ("" if default == "..." else f" = {default}")
        + ") -> None:\n    'Doc.'\n"
    )
    exec(source, namespace)
    made = tool(namespace["f"])
    hints = typing.get_type_hints(namespace["f"])
    fields = {
        name: (hints[name], ... if default == "..." else eval(default, namespace))
        for name in ("city_name_2x", "x")
    }
    model = create_model("f_input", __config__=ConfigDict(extra="forbid"), **fields)
    expected = model.model_json_schema()
    expected.pop("title")
    assert _plain_schema(fields) == expected  # made without pydantic
    assert made.parameters == expected


def test_a_tool_of_plain_parameters_still_validates_and_coerces_as_pydantic_does():
    @tool
    def book(city: str, nights: int = 1, tags: list[str] | None = None) -> str:
        """Book a room."""
        return f"{city}:{nights}:{tags}"

    assert asyncio.run(book.call({"city": "Oslo", "nights": "2"}, ctx())).content == "Oslo:2:None"
    with pytest.raises(ToolInputError, match="nights: Input should be a valid integer"):
        book.validate({"city": "Oslo", "nights": "many"})
    with pytest.raises(ToolInputError, match="Extra inputs"):
        book.validate({"city": "Oslo", "stars": 5})
    with pytest.raises(ToolInputError, match="city: Field required"):
        book.validate({})
