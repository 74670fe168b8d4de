"""Messages and threads: plain typed values with a stable, versioned JSON form.

Nothing here knows about storage: a message carries no row id, a thread no file. Stores map
these values to their own records through :meth:`to_dict` / :meth:`from_dict`.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, TypeVar, get_args, overload

from loom_nb import _codec
from loom_nb._chart import Chart

#: Version of the JSON form written by :meth:`Thread.to_dict` and :meth:`Message.to_dict`.
#: 2: a pending call carries its lifecycle ``state`` (and ``holder``) instead of ``decision``.
FORMAT_VERSION = 2

#: A tool name that OpenAI's and Anthropic's APIs both take, in a tool's definition and in a
#: past call (Anthropic's docs now allow 128 characters; OpenAI's, and Anthropic's before, 64).
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
#: A call id both APIs take (Anthropic's pattern, OpenAI's 40 characters at most).
_PLAIN_CALL_ID = re.compile(r"[a-zA-Z0-9_-]{1,40}").fullmatch


def wire_call_id(call_id: str) -> str:
    """``call_id`` as the APIs take it and as loom_nb's own words name it: as it is when plain,
    else a digest of it (an id from another server, ``functions.get_weather:0``, or text that
    gives orders), the same at every request."""
    if _PLAIN_CALL_ID(call_id):
        return call_id
    import hashlib  # rare: not paid by every import

    return "call_" + hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]


Role = Literal["user", "assistant", "tool"]
RunStatus = Literal["complete", "awaiting_approval", "error"]

#: Where a call that needs approval is in its life, as the store keeps it:
#:
#: - ``pending``: waits for Approve / Reject;
#: - ``approved`` / ``rejected``: decided (against the digest that was shown), not run yet;
#: - ``running``: claimed by one run (its ``holder``), the tool may be running now;
#: - ``unknown``: it was running when its process stopped, before its result was saved: the
#:   write may have happened. Only the user's choice (a :data:`Resolution`) moves it on;
#: - ``done``: its result is saved in the thread, and it leaves the pending list.
CallState = Literal["pending", "approved", "rejected", "running", "unknown", "done"]

#: The user's choice for a call in ``unknown``: "happened" (the write took effect: tell the
#: agent so and go on), "retry" (it did not: run it again), "failed" (tell the agent it failed).
Resolution = Literal["happened", "retry", "failed"]


_T = TypeVar("_T")


def shallow_copy(value: _T) -> _T:
    """``copy.copy`` of a plain dataclass value (its fields all in ``__dict__``), without the
    protocol ``copy`` walks through to find out how: a run copies its thread at each save."""
    copied = object.__new__(type(value))
    copied.__dict__.update(value.__dict__)
    return copied


def now() -> datetime:
    return datetime.now(timezone.utc)


class _RandomBytes:
    """Bytes of ``os.urandom``, read a block at a time: a run makes several ids, and each read
    is a system call that lets other threads take the interpreter. A forked child drops the
    block it inherited, so no two processes hand out the same bytes."""

    BLOCK = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._block = b""
        self._at = 0

    def take(self, n: int) -> bytes:
        with self._lock:
            if self._at + n > len(self._block):
                self._block, self._at = os.urandom(max(self.BLOCK, n)), 0
            taken = self._block[self._at : self._at + n]
            self._at += n
            return taken

    def drop(self) -> None:
        self._block, self._at = b"", 0
        self._lock = threading.Lock()  # a lock held by another thread at the fork stays held


random_bytes = _RandomBytes()
os.register_at_fork(after_in_child=random_bytes.drop)


def random_token(nbytes: int) -> str:
    """``nbytes`` random bytes, URL-safe (``secrets.token_urlsafe``, without importing
    ``secrets``: it brings ``random`` and ``hashlib`` to ``import loom_nb``)."""
    import base64  # here, as json below: ids and digests come with runs, not with the import

    return base64.urlsafe_b64encode(random_bytes.take(nbytes)).rstrip(b"=").decode("ascii")


def new_thread_id() -> str:
    """128 random bits, URL-safe: without ``auth`` the id is what keeps a thread private.

    Never starting with ``-``, so that ``%loom resume ID`` does not read it as an option.
    """
    while True:
        thread_id = random_token(16)
        if not thread_id.startswith("-"):
            return thread_id


def new_call_id() -> str:
    return "call_" + random_token(9)


#: The ids of a run's pauses (a budget or ``max_steps`` reached): loom_nb's own calls, saved
#: and decided like a pending call, never sent to the model.
PAUSE_PREFIX = "pause_"


def new_pause_id() -> str:
    return PAUSE_PREFIX + random_token(9)


def is_pause_call(call_id: str) -> bool:
    """Whether ``call_id`` is a run's pause (see :data:`PAUSE_PREFIX`)."""
    return call_id.startswith(PAUSE_PREFIX)


def arguments_digest(arguments: Any) -> str:
    """A stable fingerprint of tool arguments; an approval binds to the arguments it showed."""
    import hashlib
    import json

    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass
class TextPart:
    """Text written by the user or the model (markdown)."""

    text: str
    kind: Literal["text"] = "text"


@dataclass
class ToolCall:
    """The model asks to run a tool.

    ``arguments`` is the parsed JSON object; when the model sent text that is not a JSON object,
    ``arguments`` is ``None`` and ``raw_arguments`` keeps what it sent.
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str | None = None
    kind: Literal["tool_call"] = "tool_call"


@dataclass
class ToolResult:
    """The outcome of one tool call.

    ``content`` is the text the model sees; ``data`` is the structured value behind it (a
    DataFrame, a dict, ...), kept for the user and never sent to the model.
    """

    call_id: str
    name: str
    content: str
    data: Any = None
    is_error: bool = False
    #: "approved" or "rejected" when the call waited for the user, "rule" when a rule approved
    #: it (a rule that rejects gives "rejected"), else None.
    approval: Literal["approved", "rejected", "rule"] | None = None
    #: A chart the call drew (``loom_nb.charts``): its JSON spec with the data it plots, so it
    #: is drawn again from the thread after a restart.
    chart: dict[str, Any] | None = None
    #: The id of the rule that decided the call, when a rule did (see ``agent.allow``).
    rule: str | None = None
    kind: Literal["tool_result"] = "tool_result"

    @property
    def error(self) -> str | None:
        """For an error result, what its ``{"error": ...}`` says (else None)."""
        if not self.is_error:
            return None
        import json

        try:
            data = json.loads(self.content)
        except ValueError:
            return self.content
        if not isinstance(data, dict):
            return self.content
        error = data.get("error", self.content)
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str):  # a connector's structured error: what a person reads
            hint = error.get("hint")
            return message + (f" {hint}" if isinstance(hint, str) and hint else "")
        return str(error)

    def frame_head(self, rows: int) -> _codec.FrameHead | None:
        """The first ``rows`` rows of ``data`` when it is a DataFrame, else None. A result
        read from a store decodes only those rows (a view shows a head, not the frame)."""
        return _codec.frame_head(self.data, rows)

    def _frame_outline(self) -> tuple[Any, dict[str, Any] | None] | None:
        """``data``'s columns and saved counts when it is a DataFrame (``_codec.frame_outline``);
        a result read from a store decodes none of its rows for them."""
        return _codec.frame_outline(self.data)


@dataclass
class Interrupted:
    """A run of the thread was interrupted (Ctrl-C) here: what it completed is before this
    part, what the next run did after. Kept for people reading the thread, never sent to the
    model (the calls it left unanswered get error results of their own)."""

    text: str = "The run was interrupted here; what it had completed is saved."
    kind: Literal["interrupted"] = "interrupted"


@dataclass
class NewerPart:
    """A part of a kind a newer loom_nb wrote: kept exactly as stored (``data``), shown as
    :data:`NEWER`, never sent to the model."""

    data: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.data.get("kind"))


#: How a part or a call state of a newer loom_nb is shown.
NEWER = "from a newer loom_nb: upgrade to see this (pip install -U loom-nb)"

Part = TextPart | ToolCall | ToolResult | Interrupted | NewerPart


@dataclass
class Usage:
    """Tokens counted by the model provider, and what they cost.

    ``input_tokens`` includes the cached ones (``cache_read_tokens`` read from the provider's
    prompt cache, ``cache_write_tokens`` written to it), as the providers' bills count them.
    ``cost`` is in US dollars, None when a price is unknown (never a made-up $0): a sum's cost
    is known only when every turn's is.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        if self.empty:
            return other._copy()  # a new value: a turn's usage is its own
        if other.empty:
            return self._copy()
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            cost,
        )

    def _copy(self) -> Usage:  # (``dataclasses.replace`` reads the fields each time)
        return Usage(
            self.input_tokens,
            self.output_tokens,
            self.requests,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.cost,
        )

    @property
    def empty(self) -> bool:
        """No request counted: the sum's starting point (it knows no cost, and needs none)."""
        return not (self.requests or self.input_tokens or self.output_tokens or self.cost)

    @property
    def total_tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens

    def line(self) -> str:
        """``12,400 tokens in (3,000 cached) · 800 out · $0.0061`` (or "price unknown")."""
        cached = self.cache_read_tokens + self.cache_write_tokens
        text = f"{self.input_tokens:,} tokens in"
        if cached:
            text += f" ({self.cache_read_tokens:,} cached"
            text += (
                f", {self.cache_write_tokens:,} written to cache)"
                if self.cache_write_tokens
                else ")"
            )
        text += f" · {self.output_tokens:,} out · "
        return text + ("price unknown" if self.cost is None else f"${self.cost:,.4f}")


@dataclass
class Message:
    """One completed message. Tool results travel in messages of role ``"tool"``."""

    role: Role
    parts: list[Part]
    created_at: datetime = field(default_factory=now)
    #: For assistant messages: the tokens this model turn used.
    usage: Usage | None = None
    #: For assistant messages: the model that wrote it.
    model: str | None = None
    #: For a user message: the run's budget it started (``Budget.to_dict``), so a run
    #: resumed in another kernel keeps it.
    budget: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The text parts of the message, joined."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls the model made in this message."""
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def tool_results(self) -> list[ToolResult]:
        """The tool results this message carries."""
        return [p for p in self.parts if isinstance(p, ToolResult)]

    @property
    def interruptions(self) -> list[Interrupted]:
        """Where a run of the thread was interrupted (a part of a "tool" message)."""
        return [p for p in self.parts if isinstance(p, Interrupted)]

    @property
    def newer_parts(self) -> list[NewerPart]:
        """Parts a newer loom_nb wrote, which this version keeps but cannot show."""
        return [p for p in self.parts if isinstance(p, NewerPart)]

    def to_dict(self) -> dict[str, Any]:
        """The message as JSON-ready data (what stores save)."""
        out: dict[str, Any] = {
            "role": self.role,
            "parts": [_part_to_dict(p) for p in self.parts],
            "created_at": self.created_at.isoformat(),
        }
        if self.usage is not None:
            out["usage"] = {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "requests": self.usage.requests,
            }
            # kept beside "usage": a reader before these keys takes "usage" as it was
            if self.usage.cache_read_tokens or self.usage.cache_write_tokens:
                out["cached_tokens"] = {
                    "read": self.usage.cache_read_tokens,
                    "write": self.usage.cache_write_tokens,
                }
            if self.usage.cost is not None:
                out["cost_usd"] = self.usage.cost
        if self.model is not None:
            out["model"] = self.model
        if self.budget is not None:
            out["budget"] = self.budget
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        """The message that ``to_dict`` gave."""
        usage = data.get("usage")
        cached = data.get("cached_tokens") or {}
        return cls(
            role=data["role"],
            parts=[_part_from_dict(p) for p in data["parts"]],
            created_at=datetime.fromisoformat(data["created_at"]),
            usage=Usage(
                usage.get("input_tokens", 0),
                usage.get("output_tokens", 0),
                usage.get("requests", 0),
                cached.get("read", 0),
                cached.get("write", 0),
                data.get("cost_usd"),
            )
            if usage
            else None,
            model=data.get("model"),
            budget=data.get("budget"),
        )

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message with this text."""
        return cls("user", [TextPart(text)])

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant message with this text."""
        return cls("assistant", [TextPart(text)])


def _part_to_dict(part: Part) -> dict[str, Any]:
    if isinstance(part, NewerPart):
        return part.data  # as it was written
    if isinstance(part, TextPart | Interrupted):
        return {"kind": part.kind, "text": part.text}
    if isinstance(part, ToolCall):
        out: dict[str, Any] = {
            "kind": "tool_call",
            "id": part.id,
            "name": part.name,
            "arguments": part.arguments,
        }
        if part.raw_arguments is not None:
            out["raw_arguments"] = part.raw_arguments
        return out
    out = {
        "kind": "tool_result",
        "call_id": part.call_id,
        "name": part.name,
        "content": part.content,
        "is_error": part.is_error,
    }
    if part.data is not None:
        out["data"] = _codec.encode(part.data)
    if part.approval is not None:
        out["approval"] = part.approval
    if part.chart is not None:
        out["chart"] = part.chart
    if part.rule is not None:
        out["rule"] = part.rule
    return out


def _part_from_dict(data: dict[str, Any]) -> Part:
    kind = data["kind"]
    if kind == "text":
        return TextPart(data["text"])
    if kind == "interrupted":
        return Interrupted(data["text"])
    if kind == "tool_call":
        return ToolCall(data["id"], data["name"], data["arguments"], data.get("raw_arguments"))
    if kind == "tool_result":
        return ToolResult(
            call_id=data["call_id"],
            name=data["name"],
            content=data["content"],
            data=_codec.decode(data["data"]) if "data" in data else None,
            is_error=data.get("is_error", False),
            approval=data.get("approval"),
            chart=data.get("chart"),
            rule=data.get("rule"),
        )
    return NewerPart(data)


@dataclass
class PendingApproval:
    """A tool call that waits for the user. The decision binds to ``digest`` of ``arguments``.

    It stays in the thread's pending list from the moment it is saved (with the assistant
    message that asked for it) until its result is saved; ``state`` says where it is between.
    """

    call_id: str
    tool: str
    arguments: dict[str, Any]
    #: What the user is shown: rows to insert, an update's changes and filter, ... (may hold a
    #: DataFrame).
    preview: Any = None
    digest: str = ""
    state: CallState = "pending"
    #: The run that claimed it (``host:pid:random``), once it is ``running`` or ``unknown``.
    holder: str | None = None
    #: The id of the rule that decided it, when a rule did (not a person).
    rule: str | None = None
    #: Keys a newer loom_nb wrote that this version does not know, kept to be written back.
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.digest:
            self.digest = arguments_digest(self.arguments)

    @property
    def newer(self) -> bool:
        """Whether a newer loom_nb left it in a state this version does not know (it is kept
        as it is, and nothing here moves it: upgrading does)."""
        return self.state not in _STATES

    @property
    def decision(self) -> bool | None:
        """None while it waits for Approve / Reject; then True (approved) or False."""
        if self.state == "pending":
            return None
        return self.state != "rejected"

    def to_dict(self) -> dict[str, Any]:
        """The approval as JSON-ready data (the preview encoded)."""
        out = {
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "digest": self.digest,
            "state": self.state,
        }
        if self.holder is not None:
            out["holder"] = self.holder
        if self.rule is not None:
            out["rule"] = self.rule
        if self.preview is not None:
            out["preview"] = _codec.encode(self.preview)
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingApproval:
        """The approval that ``to_dict`` gave."""
        preview = data.get("preview")
        known = (
            "call_id",
            "tool",
            "arguments",
            "digest",
            "state",
            "holder",
            "rule",
            "preview",
            "decision",
        )
        state: CallState = data.get("state") or _FORMAT_1_STATES[data.get("decision")]
        return cls(
            call_id=data["call_id"],
            tool=data["tool"],
            arguments=data["arguments"],
            preview=_codec.decode(preview) if preview is not None else None,
            digest=data["digest"],
            state=state,
            holder=data.get("holder"),
            rule=data.get("rule"),
            extra={k: v for k, v in data.items() if k not in known},
        )


class MessagesSoFar(Sequence[Message]):
    """The messages of a thread as one model turn is given them: the first ``len`` of the
    thread's list, read through it, not copied. A run only appends to that list, so what a
    turn was given stays as it was, and a model that keeps every request (the test models)
    keeps no copy of the thread per turn."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[Message]) -> None:
        self._items = items
        self._length = len(items)

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return self._items[: self._length][index]
        if not -self._length <= index < self._length:
            raise IndexError("message index out of range")
        return self._items[index % self._length]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._items, self._length)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


_STATES = frozenset(get_args(CallState))

#: Format 1 kept only the decision, saved before anything ran.
_FORMAT_1_STATES: dict[bool | None, CallState] = {
    None: "pending",
    True: "approved",
    False: "rejected",
}


@dataclass(frozen=True)
class Lease:
    """Who runs a thread now: one run at a time, across processes. ``holder`` is
    ``host:pid:random``; the lease lapses at ``expires_at`` unless its run renews it."""

    holder: str
    expires_at: datetime
    #: True when the store, by its own clock, found the lease lapsed (its holder stopped
    #: renewing it) as it loaded the thread: only then is a call it runs shown as unknown.
    lapsed: bool = field(default=False, compare=False)


@dataclass
class Thread:
    """A conversation with one agent, as saved by a store."""

    id: str
    agent: str
    user_id: str | None = None
    title: str | None = None
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    messages: list[Message] = field(default_factory=list)
    #: Tool calls waiting for Approve / Reject; empty unless the last run stopped for approval.
    pending: list[PendingApproval] = field(default_factory=list)
    #: Why the last run failed, when it did.
    error: str | None = None
    #: The run that holds the thread, as the store said when it loaded it (not part of the
    #: JSON form: it is the store's state, not the conversation's).
    lease: Lease | None = field(default=None, compare=False)

    @property
    def status(self) -> RunStatus:
        """'awaiting_approval', 'error' (the last run failed) or 'complete'."""
        if self.pending:
            return "awaiting_approval"
        return "error" if self.error else "complete"

    @property
    def usage(self) -> Usage:
        """The tokens of every model turn in the thread, added up."""
        total = Usage()
        for m in self.messages:
            if m.usage is not None:
                total = total + m.usage
        return total

    def tool_results(self) -> Iterator[ToolResult]:
        """Every tool result in the thread, oldest first."""
        for m in self.messages:
            yield from m.tool_results

    @property
    def frames(self) -> list[Any]:
        """Every DataFrame the agent fetched in this thread, oldest first."""
        with _codec.collector_paused():
            return [r.data for r in self.tool_results() if _codec.is_dataframe(r.data)]

    @property
    def charts(self) -> list[Chart]:
        """Every chart the agent drew in this thread, oldest first."""
        return [Chart(r.chart) for r in self.tool_results() if r.chart is not None]

    @property
    def last_text(self) -> str:
        """The text of the last assistant message."""
        for m in reversed(self.messages):
            if m.role == "assistant" and m.text:
                return m.text
        return ""

    def to_dict(self) -> dict[str, Any]:
        """The thread and its messages as JSON-ready data."""
        return {
            "version": FORMAT_VERSION,
            **self.info_dict(),
            "messages": [m.to_dict() for m in self.messages],
        }

    def info_dict(self) -> dict[str, Any]:
        """Everything but the messages: what a store keeps in its thread record."""
        return {
            "id": self.id,
            "agent": self.agent,
            "user_id": self.user_id,
            "title": self.title,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "pending": [p.to_dict() for p in self.pending],
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], messages: list[Message] | None = None) -> Thread:
        """The thread that ``to_dict`` gave (with ``messages`` when they are stored apart)."""
        version = data.get("version", FORMAT_VERSION)
        if version > FORMAT_VERSION:
            raise ValueError(
                f"this thread was written by a newer loom_nb (format {version}); "
                "upgrade with: pip install -U loom-nb"
            )
        if messages is None:
            messages = [Message.from_dict(m) for m in data.get("messages", [])]
        return cls(
            id=data["id"],
            agent=data["agent"],
            user_id=data.get("user_id"),
            title=data.get("title"),
            created_at=datetime.fromisoformat(data["created_at"]),
            updated_at=datetime.fromisoformat(data["updated_at"]),
            messages=messages,
            pending=[PendingApproval.from_dict(p) for p in data.get("pending", [])],
            error=data.get("error"),
        )


@dataclass
class ThreadInfo:
    """A thread without its messages, as listed by a store."""

    id: str
    agent: str
    user_id: str | None
    title: str | None
    created_at: datetime
    updated_at: datetime
    message_count: int
    pending_count: int
