"""Models for tests and offline notebooks: a replay of scripted replies, and a function."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from loom_nb import _loop_thread
from loom_nb._errors import ModelError
from loom_nb._messages import Message, Thread, ToolCall, Usage, new_call_id
from loom_nb._numbers import is_check_call
from loom_nb.models import Model, ModelEvent, ModelRequest, TextDelta

__all__ = ["FunctionModel", "ReplayModel", "Reply"]


@dataclass
class Reply:
    """One scripted model turn: text and/or tool calls.

    ``tool_calls`` items are ``ToolCall`` values or ``(name, arguments)`` pairs; arguments given
    as a string are sent as-is, like a model that wrote broken JSON.
    """

    text: str = ""
    tool_calls: Sequence[ToolCall | tuple[str, dict[str, Any] | str]] = ()
    usage: Usage | None = None

    def events(self, chunk_words: int = 1) -> list[ModelEvent]:
        """This turn as a model's stream: text in ``chunk_words``-word deltas, the calls, usage."""
        events: list[ModelEvent] = [TextDelta(t) for t in _chunks(self.text, chunk_words)]
        for call in self.tool_calls:
            events.append(_as_call(call))
        events.append(self.usage or Usage(0, 0, 1))
        return events


ReplyLike = str | Reply


def _as_reply(value: ReplyLike) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(text=value)
    raise TypeError(f"a reply is a str or a Reply, got {type(value).__name__}")


def _as_call(call: ToolCall | tuple[str, dict[str, Any] | str]) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    name, arguments = call
    if isinstance(arguments, str):
        return ToolCall(new_call_id(), name, None, raw_arguments=arguments)
    return ToolCall(new_call_id(), name, dict(arguments))


_WORD = re.compile(r"\S+\s*|\s+")


def _chunks(text: str, words: int) -> Iterable[str]:
    pieces = _WORD.findall(text)
    if words == 1:
        return pieces
    return _joined(pieces, words)


def _joined(pieces: list[str], words: int) -> Iterator[str]:
    for i in range(0, len(pieces), words):
        yield "".join(pieces[i : i + words])


def _is_check(message: Message) -> bool:
    """A strict number check's turn: loom_nb's own call, no text of the model's."""
    calls = message.tool_calls
    return bool(calls) and not message.text and all(is_check_call(c.id) for c in calls)


class ReplayModel(Model):
    """Answers with a queue of scripted replies and records every request it was sent.

    Text streams word by word, so widgets and streaming code see real deltas. When the queue
    runs out, the run fails with a clear error instead of inventing an answer. A reply is a
    string, or a :class:`Reply` with tool calls as ``(tool name, arguments)`` pairs; the
    agent runs each call and sends its result in the next request::

        model = ReplayModel([
            Reply("Let me look.", tool_calls=[("orders_above", {"total": 100})]),
            "Two orders are above 100.",          # the turn after the tool's result
        ])
        agent = define_agent(name="a", model=model, tools=[orders_above])
        agent.run_sync("Which orders are above 100?").output   # 'Two orders are above 100.'
        model.requests[-1].messages[-1].tool_results[0].content  # what the tool returned
    """

    def __init__(
        self,
        replies: Iterable[ReplyLike],
        *,
        name: str = "replay",
        delay: float = 0.0,
        chunk_words: int = 1,
    ) -> None:
        self.name = f"test:{name}"
        self.replies: list[Reply] = [_as_reply(r) for r in replies]
        self.requests: list[ModelRequest] = []
        self.delay = delay
        self.chunk_words = chunk_words

    @classmethod
    def of_thread(cls, thread: Thread, *, name: str = "replay") -> ReplayModel:
        """A model that answers as ``thread``'s assistant did, turn by turn: its text and its
        tool calls with the same arguments (new call ids). ``agent.eval`` with it gives back
        the thread's own calls: the baseline an eval of another model is read against. A strict
        number check's call is loom_nb's, not the model's: it is left out."""
        replies = [
            Reply(
                m.text,
                [
                    (c.name, c.arguments if c.arguments is not None else c.raw_arguments or "")
                    for c in m.tool_calls
                ],
            )
            for m in thread.messages
            if m.role == "assistant" and not _is_check(m)
        ]
        return cls(replies, name=name)

    def add(self, *replies: ReplyLike) -> None:
        """Queue more replies."""
        self.replies.extend(_as_reply(r) for r in replies)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if not self.replies:
            raise ModelError(
                f"{self.name} has no reply left for request {len(self.requests)}; "
                "queue more with model.add(...)"
            )
        reply = self.replies.pop(0)
        for event in reply.events(self.chunk_words):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield event


@dataclass
class FunctionModel(Model):
    """A model driven by your function ``fn(request) -> str | Reply``.

    ``fn`` may be sync (it then runs on a worker thread, like a sync tool) or async, or an
    async generator yielding :class:`TextDelta`, :class:`ToolCall` and :class:`Usage` events to
    control streaming exactly. It reads the
    :class:`ModelRequest` (``request.messages``, ``request.tools``) and decides each turn, so
    it answers from the thread's state, across approvals and kernel restarts too::

        def script(request):
            last = request.messages[-1]
            if last.role == "user":                  # first turn: call a tool
                return Reply("Let me look.", tool_calls=[("orders_above", {"total": 100})])
            result = last.tool_results[0]            # the next turn sees the tool's result
            return f"Found: {result.content}"

        agent = define_agent(name="a", model=FunctionModel(script), tools=[orders_above])
        agent.run_sync("Which orders are above 100?").output
    """

    fn: Callable[[ModelRequest], Any]
    name: str = "test:function"
    requests: list[ModelRequest] = field(default_factory=list)
    #: ``fn``, and whether it is async (judged once, not at every turn).
    _kind: tuple[Callable[..., Any], bool] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def _is_async(self) -> bool:
        kind = self._kind
        if kind is None or kind[0] is not self.fn:
            fn = self.fn
            is_async = inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)
            kind = self._kind = fn, is_async
        return kind[1]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if self._is_async():
            _loop_thread.name_user_code(self.fn, f"the model function of {self.name}")
            result = self.fn(request)
        else:
            result = await _loop_thread.in_thread(self.fn, request)
        if inspect.isasyncgen(result):
            async for event in cast(AsyncIterator[ModelEvent], result):
                yield event
            return
        if not isinstance(result, (str, Reply)) and inspect.isawaitable(result):
            result = await result
        for event in _as_reply(result).events():
            yield event
