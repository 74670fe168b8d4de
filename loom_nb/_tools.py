"""Tools and connectors.

A tool is a function the model may call, with a JSON schema for its input. Input schemas come
from a pydantic model, a JSON schema dict, or the function's type hints. A connector is a named
set of tools; ``define_agent`` refuses two tools with one name.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, overload

from loom_nb import _codec, _user_errors
from loom_nb._code import Describe, WriteCode
from loom_nb._context import RunContext
from loom_nb._errors import DuplicateToolError, UserError
from loom_nb._json_schema import Issue, SchemaError, Validator
from loom_nb._messages import TOOL_NAME
from loom_nb._render import frame_for_model
from loom_nb._rules import Effect, EffectOf

ApprovalRule = bool | Callable[[dict[str, Any]], bool]


class ToolInputError(Exception):
    """The model's arguments do not fit the tool's schema; goes back to the model as an error."""


@dataclass
class ToolOutput:
    """What a tool may return to set both the model's text and the structured data."""

    content: str | None = None
    data: Any = None
    is_error: bool = False
    #: A chart's JSON spec, saved in the thread's tool result (``loom_nb.charts`` makes them).
    chart: dict[str, Any] | None = None


#: A call's arguments as a tool's function takes them: positional and keyword.
Bound = tuple[list[Any], dict[str, Any]]


@dataclass
class Tool:
    """A function the model may call. Build one with :func:`tool`."""

    name: str | None
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    needs_approval: ApprovalRule = False
    #: Builds what the user sees before approving (rows to write, ...). Gets the arguments (and
    #: the run context when it takes a second parameter); may be async. An error result
    #: (``ToolOutput(is_error=True)``) answers the call at once instead of asking the user.
    preview: Callable[..., Any] | None = None
    _bind: Callable[[dict[str, Any]], tuple[list[Any], dict[str, Any]]] = field(
        default=lambda a: ([], a), repr=False
    )
    _takes_ctx: str | None = field(default=None, repr=False)
    #: The call in words, for its folded line in the thread view (see ``loom_nb._code``).
    describe: Describe | None = field(default=None, repr=False)
    #: The code that reproduces a call: shown when it is unfolded, written by ``export``.
    code: WriteCode | None = field(default=None, repr=False)
    #: What a call would do, for the rules that approve by themselves (``agent.allow``):
    #: ``(arguments, card) -> Effect``. Without it, a call's effect is its tool alone.
    effect: EffectOf | None = field(default=None, repr=False)
    #: The tool as the model was last told of it (a ``ToolDefinition``; see ``_turn``).
    _told: Any = field(default=None, init=False, repr=False, compare=False)

    def named(self, name: str) -> Tool:
        """This tool under ``name`` (a connector's key names its tool)."""
        _check_name(name)
        if self.name == name:
            return self
        return replace(self, name=name)

    def requires_approval(self, arguments: dict[str, Any]) -> bool:
        """Whether a call with these arguments waits for the user's approval."""
        rule = self.needs_approval
        return bool(rule(arguments)) if callable(rule) else bool(rule)

    def effect_of(self, name: str, arguments: dict[str, Any], preview: Any) -> Effect:
        """The effect of a call of this tool (called ``name``) with this card; a hook that
        fails says only the tool, which no rule bound to a table, a column or a count covers."""
        if self.effect is not None:
            try:
                return dataclasses.replace(self.effect(arguments, preview), tool=name)
            except Exception:
                pass
        return Effect(name)

    async def make_preview(
        self, arguments: dict[str, Any], ctx: RunContext, call_id: str = ""
    ) -> Any:
        """What the approval card shows (None without a preview). A preview that fails gives
        ``{"error": ...}``, so the call is still shown to the user (and the card shows where
        the preview raised, for ``call_id``)."""
        if self.preview is None:
            return None
        from loom_nb import _loop_thread  # the loop: imported with the first run, not the tool

        key = _user_errors.preview_key(call_id)
        try:
            with _user_errors.running(key):
                takes_ctx = len(inspect.signature(self.preview).parameters) >= 2
                args = (arguments, ctx) if takes_ctx else (arguments,)
                if inspect.iscoroutinefunction(self.preview):
                    _loop_thread.name_user_code(self.preview, f"the preview of tool {self.name!r}")
                    value = await self.preview(*args)
                else:  # user code (it may import pandas, query, ...): never on the loop
                    value = await _loop_thread.in_thread(self.preview, *args)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:  # a broken preview must not hide the call from the user
            _user_errors.keep(key, exc)
            return {"error": f"no preview: {exc}"}
        return value

    def validate(self, arguments: dict[str, Any]) -> Bound:
        """Check ``arguments`` against the schema; raises :class:`ToolInputError`."""
        return self._bind(arguments)

    async def call(self, arguments: dict[str, Any], ctx: RunContext) -> ToolOutput:
        """Validate the arguments and run the function (sync ones on a worker thread)."""
        return await self.call_bound(self.validate(arguments), ctx)

    async def call_bound(self, bound: Bound, ctx: RunContext) -> ToolOutput:
        """Run the function with arguments :meth:`validate` returned (a fresh result: its
        keyword arguments get ``ctx``)."""
        from loom_nb import _loop_thread

        args, kwargs = bound
        if self._takes_ctx:
            kwargs[self._takes_ctx] = ctx
        if inspect.iscoroutinefunction(self.function):
            _loop_thread.name_user_code(self.function, f"tool {self.name!r}")
            value = await self.function(*args, **kwargs)
        else:  # on a worker thread: sync tools run concurrently, and never block the loop
            value = await _loop_thread.in_thread(self.function, *args, **kwargs)
            if not isinstance(value, (str, dict, list)) and inspect.isawaitable(value):
                value = await value
        return to_output(value)


def to_output(value: Any) -> ToolOutput:
    if isinstance(value, ToolOutput):
        if value.content is None:
            return dataclasses.replace(value, content=to_output(value.data).content)
        return value
    if _codec.is_dataframe(value):
        return ToolOutput(frame_for_model(value), value)
    if isinstance(value, str):
        return ToolOutput(value)
    return ToolOutput(_JSON.encode(_codec.encode(value)), value)


#: ``json.dumps(..., default=str)``, made once (``dumps`` makes an encoder for each call
#: given an argument of its own).
_JSON = json.JSONEncoder(default=str)


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    function: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    input: Any = None,
    run: Callable[..., Any] | None = None,
    needs_approval: ApprovalRule = False,
    preview: Callable[..., Any] | None = None,
    describe: Describe | None = None,
    code: WriteCode | None = None,
) -> Any: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    input: Any = None,
    run: Callable[..., Any] | None = None,
    needs_approval: ApprovalRule = False,
    preview: Callable[..., Any] | None = None,
    describe: Describe | None = None,
    code: WriteCode | None = None,
) -> Any:
    """Make a tool, in any of three forms::

        @tool
        def get_invoice(invoice_id: str) -> dict:
            "Fetch one invoice by its id."

        @tool(needs_approval=True)
        def refund(invoice_id: str, amount: float) -> str: ...

        tool(description="...", input=InvoiceQuery, run=fetch)   # the seed's form

    ``input`` is a pydantic model, a JSON schema dict, or omitted (read from the type hints of
    the function). A parameter annotated :class:`RunContext` (or named ``ctx``) receives the run
    context. The function may be sync or async.

    ``describe(arguments) -> str`` says a call in words (its folded line in the thread view);
    ``code(arguments, ctx) -> str`` writes Python that reproduces it, assigning the result to
    ``ctx.result`` (shown unfolded, and written by ``%loom export``). Without them a call
    reads as ``name(arg=value)`` and exports as a comment.
    """
    _check_options(name, description, needs_approval, preview)
    for option, hook in (("describe", describe), ("code", code)):
        if hook is not None and not callable(hook):
            raise UserError(
                f"tool({option}=...) takes a function of the call's arguments, got {hook!r}"
            )

    def make(fn: Callable[..., Any], form: str) -> Tool:
        made = _make(fn, form, name, description, input, needs_approval, preview)
        return replace(made, describe=describe, code=code) if describe or code else made

    if function is not None:
        return make(function, "tool(...)")
    if run is not None:
        return make(run, "tool(run=...)")

    def decorator(fn: Callable[..., Any]) -> Tool:
        return make(fn, "@tool(...)")

    return decorator


def _check_options(name: Any, description: Any, needs_approval: Any, preview: Any) -> None:
    """The keyword options of :func:`tool`, each checked by the name the user wrote."""
    if name is not None:
        _check_name(name)
    if description is not None and not isinstance(description, str):
        raise UserError(
            f"tool(description=...) takes the text the model reads, got "
            f"{type(description).__name__} {description!r}"
        )
    if not isinstance(needs_approval, bool) and not callable(needs_approval):
        raise UserError(
            "tool(needs_approval=...) takes True, False or a function of the arguments "
            f"(lambda args: args['amount'] > 100), got {needs_approval!r}"
        )
    if preview is not None and not callable(preview):
        raise UserError(
            "tool(preview=...) takes a function of the arguments that returns what the "
            f"approval card shows (lambda args: {{'rows': args['rows']}}), got {preview!r}"
        )


def _make(
    fn: Callable[..., Any],
    form: str,
    name: str | None,
    description: str | None,
    input: Any,
    needs_approval: ApprovalRule,
    preview: Callable[..., Any] | None,
) -> Tool:
    if not callable(fn):
        hint = " (pass the function itself, not its name)" if isinstance(fn, str) else ""
        raise UserError(f"{form} takes a function, got {type(fn).__name__} {fn!r}{hint}")
    if name is None and not getattr(fn, "__name__", "<lambda>").startswith("<"):
        name = fn.__name__
    doc = inspect.getdoc(fn) or ""
    description = description if description is not None else doc.strip()
    ctx_param, params = _split_ctx(fn)
    if input is None:
        _check_described(name or repr(fn), description, params)
        schema, bind = _schema_from_hints(fn, params)
    elif isinstance(input, dict):
        schema, bind = _schema_from_dict(input)
    elif _is_pydantic_model(input):
        schema, bind = _schema_from_model(input)
    else:
        raise UserError(
            f"tool(input=...) takes a pydantic model class or a JSON schema dict, got {input!r}"
        )
    if input is not None and len(params) != 1:
        raise UserError(
            f"tool {name or fn!r}: with input=..., the run function takes the input as its one "
            f"argument (plus an optional RunContext), but it has {len(params)}"
        )
    return Tool(name, description, schema, fn, needs_approval, preview, bind, ctx_param)


def _check_described(name: str, description: str, params: list[inspect.Parameter]) -> None:
    """A tool with no description and untyped parameters tells the model nothing but names."""
    untyped = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    if not description and untyped:
        raise UserError(
            f"tool {name!r} has no docstring and its parameter {untyped[0]!r} no type, so "
            f"the model cannot know what to send: write a docstring (or tool(description=...)) "
            f"and annotate the parameters, e.g. {untyped[0]}: str"
        )


def _check_name(name: str) -> None:
    if isinstance(name, str) and len(name) > 64:
        raise UserError(f"tool name {name!r} is longer than 64 characters")
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise UserError(
            f"tool name {name!r} is not valid: use ASCII letters, digits, '_' and '-' only "
            "(model providers accept nothing else)"
        )


def _split_ctx(fn: Callable[..., Any]) -> tuple[str | None, list[inspect.Parameter]]:
    params = list(inspect.signature(fn).parameters.values())
    ctx = None
    rest = []
    for p in params:
        ann = p.annotation
        is_ctx = ann is RunContext or ann == "RunContext" or p.name == "ctx"
        if is_ctx and ctx is None:
            ctx = p.name
        else:
            rest.append(p)
    return ctx, rest


def _is_pydantic_model(value: Any) -> bool:
    return (
        isinstance(value, type)
        and hasattr(value, "model_json_schema")
        and hasattr(value, "model_validate")
    )


def _schema_from_model(model: Any) -> tuple[dict[str, Any], Callable[..., Any]]:
    from pydantic import ValidationError

    def bind(arguments: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        try:
            return [model.model_validate(arguments)], {}
        except ValidationError as exc:
            raise ToolInputError(_pydantic_message(exc)) from None

    return model.model_json_schema(), bind


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Validator:
    """A checked validator per distinct schema: connectors define the same schemas again each
    time a notebook cell is re-run."""
    try:
        return Validator(json.loads(schema_json))
    except SchemaError as exc:
        raise UserError(f"tool input is not a valid JSON schema: {exc}") from None


def _schema_from_dict(schema: dict[str, Any]) -> tuple[dict[str, Any], Callable[..., Any]]:
    validator = _validator(json.dumps(schema, sort_keys=True))

    def bind(arguments: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
        if errors:
            raise ToolInputError("; ".join(_schema_messages(errors, arguments, shapes=True)))
        return [arguments], {}

    return schema, bind


def _schema_messages(errors: list[Issue], arguments: Any = None, shapes: bool = False) -> list[str]:
    """``path: message`` per error, as jsonschema says it. An anyOf error alone says "not valid
    under any of the given schemas"; the errors of the alternatives that take this kind of value
    say why instead. With ``shapes`` (what the model reads), a list or an object given as
    something else also gets an example of the shape expected, and a refused plain value the
    schema's description."""
    out = []
    why_not = shape = ""
    for e in errors:
        why = [c for c in e.context if c.keyword != "type" or len(c.path) > len(e.path)]
        for err in why or [e]:
            where = "/".join(map(str, err.path)) or "input"
            if shapes:
                why_not = _why_not(err)
                shape = _expected_shape(err, where, _at(arguments, err.path))
            out.append(f"{where}: {err.message}{why_not}{shape}")
    return out


def _why_not(issue: Issue) -> str:
    """For a value a plain (not list or object) schema refuses: the schema's own description,
    which says why others are left out (``PostgREST cannot compute std, var, …``). Said once:
    a value both out of the enum and of the wrong type gets it with the enum."""
    schema = issue.schema if isinstance(issue.schema, dict) else {}
    said = schema.get("description")
    if not isinstance(said, str) or not said or schema.get("type") in _KINDS:
        return ""
    if issue.keyword == "enum" or (issue.keyword == "type" and "enum" not in schema):
        return f" ({said})"
    return ""


_KINDS = {"array": "a list", "object": "an object"}


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    """The part of ``value`` at ``path`` (None when it is not there)."""
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def _expected_shape(issue: Issue, where: str, given: Any) -> str:
    """For a list or an object given as something else: an example of the shape expected,
    from the schema (the given value put where it fits), so that the model can fix its call."""
    schema = issue.schema
    if issue.keyword != "type" or not isinstance(schema, dict):
        return ""
    kind = _KINDS.get(str(schema.get("type")))
    if kind is None:
        return ""
    example = json.dumps(_example(schema, given), ensure_ascii=False)
    said = schema.get("description")
    note = f" ({said})" if isinstance(said, str) and said else ""
    return f"; {where} must be {kind} like {example}{note}"


def _example(schema: Any, given: Any) -> Any:
    """A value that fits ``schema``, with ``given`` (a scalar) where a string may hold it."""
    if not isinstance(schema, dict):
        return "…"
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return given if given in schema["enum"] else schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "array":
        return [_example(schema.get("items"), given)]
    if kind == "object" and isinstance(given, dict):  # one where a list of them goes
        return given
    if kind == "object":
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return {}
        required = [k for k in schema.get("required", []) if k in properties]
        keys = required + [k for k in properties if k not in required][: max(0, 3 - len(required))]
        out: dict[str, Any] = {}
        for key in keys:
            out[key] = _example(properties[key], given)
            if isinstance(out[key], str) and out[key] == given:
                given = None  # once
        return out
    if kind == "string":
        pattern = schema.get("pattern")
        fits = isinstance(given, str) and (pattern is None or re.search(pattern, given))
        return given if fits else "name"
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return given if isinstance(given, int | float) and not isinstance(given, bool) else 1
    return "…"


def _schema_from_hints(
    fn: Callable[..., Any], params: list[inspect.Parameter]
) -> tuple[dict[str, Any], Callable[..., Any]]:
    from typing import get_type_hints

    try:
        hints = get_type_hints(fn)
    except Exception:  # unresolvable annotations: fall back to the raw ones
        hints = {}
    fields: dict[str, Any] = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise UserError(
                f"tool {fn.__name__!r}: *args and **kwargs cannot be described to a model"
            )
        ann = hints.get(p.name, p.annotation)
        if ann is inspect.Parameter.empty:
            ann = Any
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (ann, default)
    names = [p.name for p in params]
    # Plain parameters (str, int, list[str], ...) get the schema pydantic writes for them, made
    # here: pydantic (and what it imports) is imported at the first call, which it validates.
    schema = _plain_schema(fields)
    model = None if schema is not None else _input_model(fn, fields)
    if model is not None:
        schema = model.model_json_schema()
        schema.pop("title", None)

    def bind(arguments: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        from pydantic import ValidationError

        nonlocal model
        if model is None:
            model = _input_model(fn, fields)
        try:
            validated = model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolInputError(_pydantic_message(exc)) from None
        values = validated.__dict__  # (the fields, as getattr reads them: extra keys are refused)
        return [], {n: values[n] for n in names}

    assert schema is not None
    return schema, bind


def _input_model(fn: Callable[..., Any], fields: dict[str, Any]) -> Any:
    """The pydantic model of ``fn``'s parameters (extra keys refused)."""
    from pydantic import ConfigDict, PydanticUndefinedAnnotation, PydanticUserError, create_model

    try:
        model = create_model(  # type: ignore[call-overload]
            f"{fn.__name__}_input", __config__=ConfigDict(extra="forbid"), **fields
        )
        model.model_json_schema()
    except (PydanticUserError, PydanticUndefinedAnnotation):
        raise _untranslatable(fn, fields) from None
    return model


_PLAIN_TYPES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    Any: {},
    list: {"items": {}, "type": "array"},
    dict: {"additionalProperties": True, "type": "object"},
}


def _plain_schema(fields: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema pydantic writes for these parameters, when each is of a plain type
    with a plain default (else None: pydantic makes it)."""
    properties: dict[str, Any] = {}
    required = []
    for name, (ann, default) in fields.items():
        schema = _plain_type(ann)
        plain_name = name.isidentifier() and not name.startswith(("_", "model_"))
        if schema is None or not plain_name:
            return None
        if default is ...:
            required.append(name)
        elif default is None or type(default) in (str, int, bool) or _finite(default):
            schema = {**schema, "default": default}
        else:
            return None
        properties[name] = {**schema, "title": name.title().replace("_", " ")}
    out: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    if required:
        out["required"] = required
    out["type"] = "object"
    return out


def _finite(value: Any) -> bool:
    return type(value) is float and abs(value) < float("inf")


def _plain_type(ann: Any) -> dict[str, Any] | None:
    """The JSON schema of a plain annotation, as pydantic writes it; None for any other."""
    import types
    import typing

    try:
        if ann in _PLAIN_TYPES:
            return dict(_PLAIN_TYPES[ann])
    except TypeError:  # unhashable: not plain
        return None
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is list and len(args) == 1:
        item = _plain_type(args[0])
        return None if item is None else {"items": item, "type": "array"}
    if origin is dict and len(args) == 2 and args[0] is str:
        value = _plain_type(args[1])
        return None if value is None else {"additionalProperties": value, "type": "object"}
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        inner = _plain_type(next(a for a in args if a is not type(None)))
        if inner is None or not inner or "anyOf" in inner:
            return None
        return {"anyOf": [inner, {"type": "null"}]}
    return None


def _untranslatable(fn: Callable[..., Any], fields: dict[str, Any]) -> UserError:
    """The parameter whose type has no JSON schema (a class of your own, a file handle, ...)."""
    from pydantic import ConfigDict, PydanticUndefinedAnnotation, PydanticUserError, create_model

    for param, spec in fields.items():
        try:
            create_model(  # type: ignore[call-overload]
                "probe", __config__=ConfigDict(extra="forbid"), **{param: spec}
            ).model_json_schema()
        except (PydanticUserError, PydanticUndefinedAnnotation):
            kind = spec[0] if isinstance(spec[0], str) else getattr(spec[0], "__name__", "")
            return UserError(
                f"tool {fn.__name__!r}: parameter {param!r} has type {kind}, which a model "
                "cannot send as JSON. Use str, int, float, bool, list, dict, a pydantic model "
                "or a dataclass, or describe the input yourself with tool(input=...)"
            )
    return UserError(
        f"tool {fn.__name__!r}: its parameters cannot be described as JSON; describe the input "
        "with tool(input=...)"
    )


def _pydantic_message(exc: Any) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())


@dataclass
class Connector:
    """A named set of tools. Build one with :func:`connector`."""

    name: str
    tools: dict[str, Tool]


def connector(
    name: str,
    tools: Mapping[str, Tool | Callable[..., Any]] | Sequence[Tool | Callable[..., Any]],
) -> Connector:
    """Package tools under a name: ``connector("billing", {"get_invoice": get_invoice})``.

    Keys name the tools; a list takes each tool's own name. Plain functions become tools.
    """
    if not isinstance(name, str) or not name:
        raise UserError("connector(name, tools): name must be a non-empty string")
    return Connector(name, collect_tools(tools, f"connector {name!r}", f"connector({name!r}, ...)"))


ToolsArg = Mapping[str, Tool | Callable[..., Any]] | Sequence[Tool | Callable[..., Any]]


def collect_tools(
    tools: ToolsArg | Tool | Callable[..., Any], where: str, param: str
) -> dict[str, Tool]:
    """``tools`` by name: a list, a dict by name, or one tool or function (``param`` is how the
    user passed them, for errors: ``tools=``)."""
    out: dict[str, Tool] = {}
    items: list[tuple[str | None, Any]]
    if isinstance(tools, Tool) or (callable(tools) and not isinstance(tools, type)):
        tools = [tools]
    if isinstance(tools, str | bytes) or not isinstance(tools, Mapping | Sequence):
        raise UserError(
            f"{param} takes a list of tools or functions (or a dict of them by name), got "
            f"{type(tools).__name__} {tools!r}"
            + (": pass the function itself, not its name" if isinstance(tools, str) else "")
            + (": a connector goes in connectors=[...]" if isinstance(tools, Connector) else "")
        )
    items = list(tools.items()) if isinstance(tools, Mapping) else [(None, t) for t in tools]
    for i, (key, value) in enumerate(items):
        if not isinstance(value, Tool) and not callable(value):
            label = f"{param}[{key!r}]" if key is not None else f"{param}[{i}]"
            hint = ": pass the function itself, not its name" if isinstance(value, str) else ""
            if isinstance(value, Connector):
                hint = ": a connector goes in define_agent(connectors=[...])"
            raise UserError(
                f"{label} is {type(value).__name__} {value!r}, not a tool or a function{hint}"
            )
        t = value if isinstance(value, Tool) else tool(value)
        if key is not None:
            t = t.named(key)
        if t.name is None:
            raise UserError(
                f"a tool in {where} has no name: give it one with tool(name=...) "
                "or put it in a dict under its name"
            )
        if t.name in out:
            raise duplicate_tool_error(t.name, where, where)
        out[t.name] = t
    return out


def duplicate_tool_error(name: str, first: str, second: str) -> DuplicateToolError:
    where = f"{first} and {second}" if first != second else f"{first} (twice)"
    return DuplicateToolError(
        f"two tools are named {name!r}: in {where}. Tool names must be unique across an "
        "agent's tools and connectors; rename one (tool(name=...) or its key in the dict), "
        "or give a connector a different name= prefix"
    )
