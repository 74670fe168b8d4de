"""Tool argument checks: the messages the model gets are jsonschema's, without importing it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb import ToolInputError, UserError, tool
from loom_nb._json_schema import Validator
from loom_nb._tables.options import TableSpec
from loom_nb._tables.schemas import insert_schema, select_schema, update_schema
from loom_nb._tools import _schema_messages

_TABLES = {
    "orders": TableSpec("orders", write=True),
    "users": TableSpec("users", columns=("id", "name")),
}

SCHEMAS: list[dict[str, Any]] = [
    select_schema(_TABLES, 50),
    insert_schema(_TABLES),
    update_schema(_TABLES),
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 9, "multipleOf": 2},
            "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5},
            "s": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-c]+$"},
            "e": {"enum": [1, "one", None, [1, 2], {"a": True}]},
            "c": {"const": False},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "uniqueItems": True,
                "maxItems": 2,
            },
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "items": False,
            },
            "any": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "one": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "no": {"not": {"type": "boolean"}},
            "ref": {"$ref": "#/$defs/point"},
            "when": {"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"type": "string"}},
            "has": {"type": "array", "contains": {"const": 1}, "maxContains": 2},
            "open": {
                "type": "object",
                "patternProperties": {"^x_": {"type": "integer"}},
                "additionalProperties": False,
                "minProperties": 1,
                "maxProperties": 2,
            },
        },
        "required": ["n"],
        "dependentRequired": {"x": ["s"]},
        "additionalProperties": {"type": "boolean"},
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "number"}},
                "required": ["x"],
                "additionalProperties": False,
            }
        },
    },
]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 12),
    st.sampled_from([0.0, 0.5, 1.5, 2.0, -1.25]),
    st.sampled_from(
        [
            "",
            "a",
            "ab",
            "abcd",
            "abcde",
            "x_1",
            "open",
            "eq",
            "orders",
            "users",
            "id",
            "name",
            "one",
            "segment->name",
        ]
    ),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "table",
                    "columns",
                    "filters",
                    "order",
                    "limit",
                    "offset",
                    "count",
                    "rows",
                    "values",
                    "column",
                    "op",
                    "value",
                    "not",
                    "desc",
                    "n",
                    "x",
                    "s",
                    "e",
                    "c",
                    "tags",
                    "pair",
                    "any",
                    "one",
                    "no",
                    "ref",
                    "when",
                    "has",
                    "open",
                    "x_1",
                    "extra",
                ]
            ),
            inner,
            max_size=6,
        ),
    ),
    max_leaves=12,
)


def _theirs(schema: dict[str, Any], instance: Any) -> list[str]:
    """What the model read when jsonschema checked the arguments (its errors by path, an
    anyOf's alternatives that take this kind of value in its place)."""
    validator = jsonschema.Draft202012Validator(schema)
    out = []
    for e in sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.path]):
        why = [c for c in e.context if c.validator != "type" or c.relative_path]
        for err in why or [e]:
            out.append(f"{'/'.join(map(str, err.absolute_path)) or 'input'}: {err.message}")
    return out


def _ours(schema: dict[str, Any], instance: Any) -> list[str]:
    errors = sorted(Validator(schema).iter_errors(instance), key=lambda e: [str(p) for p in e.path])
    return _schema_messages(errors)


@settings(max_examples=400, deadline=None)
@given(which=st.integers(0, len(SCHEMAS) - 1), instance=_json)
def test_the_errors_are_the_ones_jsonschema_finds_in_the_same_order(which: int, instance: Any):
    """In the order the model reads them: by path (jsonschema visits extra properties in set
    order), then in the order of the schema's keywords."""
    schema = SCHEMAS[which]
    assert _ours(schema, instance) == _theirs(schema, instance)


def test_the_model_reads_the_path_and_message_of_each_error():
    t = tool(description="d", input=SCHEMAS[0], run=lambda a: a)
    with pytest.raises(ToolInputError, match=r"^input: Additional properties") as caught:
        t.validate({"table": "nope", "limit": -1, "extra": 1})
    assert str(caught.value) == (
        "input: Additional properties are not allowed ('extra' was unexpected); "
        "limit: -1 is less than the minimum of 0; "
        "table: 'nope' is not one of ['orders', 'users']"
    )


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "no-such-type"}, "'no-such-type' is not a JSON Schema type"),
        ({"properties": {"a": {"minLength": -1}}}, "minLength must be a non-negative integer"),
        ({"pattern": "("}, "is not a regular expression"),
        ({"$ref": "https://example.com/s.json"}, "only refs within the schema"),
        ({"$ref": "#/$defs/missing"}, "points at nothing"),
        ({"unevaluatedProperties": False}, "'unevaluatedProperties' is not supported"),
    ],
)
def test_a_schema_that_cannot_be_checked_is_refused_when_the_tool_is_made(
    schema: dict[str, Any], message: str
):
    with pytest.raises(UserError, match=f"not a valid JSON schema: .*{message}"):
        tool(description="d", input=schema, run=lambda a: a)


def test_defining_an_agent_with_frame_tools_imports_no_jsonschema():
    code = textwrap.dedent(
        """
        import sys
        import pandas as pd
        from loom_nb import ReplayModel, define_agent
        from loom_nb.frames import frame_tools
        tools = frame_tools({"orders": pd.DataFrame({"id": [1, 2]})})
        agent = define_agent(name="a", model=ReplayModel([]), connectors=[tools])
        agent.tools["frames_select"].validate({"table": "orders", "limit": 5})
        print("jsonschema" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
