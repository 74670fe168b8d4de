"""Rules that decide approvals by themselves, bound to what a call would do (its effect).

A call that needs approval has an :class:`Effect`: the tool, and for a table write the table,
the columns it writes, the rows it changes as its card counted them (the preflight count), and
an update's filter in words. A :class:`Rule` covers an effect when every bound it sets holds;
a bound it does not set holds for anything, and a bound it sets that the effect cannot say
(no count on the card, a tool that names no table) does not hold. An ``allow`` rule that
covers the effect approves the call, a ``deny`` rule rejects it (deny wins); a call no rule
covers waits for a person, as before.

Rules are kept in the store (:class:`RuleStore`) with the agent, and, for ``scope="thread"``,
the thread; every run reads them afresh, so a rule revoked in one kernel stops the next
automatic decision in every other. The row bound is checked here against the card's count and
held at execution by the card itself: an approved update changes nothing when other rows
match by then (the DataFrame tools compare the rows, Supabase sends ``max-affected``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, Protocol, runtime_checkable

from loom_nb._filter_match import Unread, filter_inside, read_filter
from loom_nb._messages import random_token

__all__ = [
    "KERNEL",
    "Effect",
    "Rule",
    "RuleKind",
    "RuleScope",
    "RuleStore",
    "deciding_rule",
    "make_rule",
    "new_rule_id",
]

RuleKind = Literal["allow", "deny"]
#: Where a rule applies: ``thread`` (one thread, every kernel), ``agent`` (every thread of the
#: agent, in the kernel that made the rule), ``until`` (every thread of the agent, every
#: kernel, until the rule's ``until``).
RuleScope = Literal["thread", "agent", "until"]
SCOPES: tuple[RuleScope, ...] = ("thread", "agent", "until")

# The host as socket.gethostname() says it, without importing socket for it.
_HOST = os.uname().nodename if hasattr(os, "uname") else os.environ.get("COMPUTERNAME", "")
#: This process, for rules of ``scope="agent"``: they apply in the kernel that made them only.
KERNEL = f"{_HOST}:{os.getpid()}:{os.urandom(6).hex()}"


def new_rule_id() -> str:
    return "rule_" + random_token(9)


@dataclass(frozen=True)
class Effect:
    """What one call would do, as far as a rule can check it."""

    tool: str
    table: str | None = None
    #: The columns it writes (None: it cannot say).
    columns: frozenset[str] | None = None
    #: The rows it would change when its card was made (None: it cannot say).
    rows: int | None = None
    #: An update's filter, in the card's words (``status = 'open'``).
    where: str | None = None


#: A tool's hook that says a call's effect from its arguments and its card (see ``Tool``).
EffectOf = Callable[[dict[str, Any], Any], Effect]


@dataclass
class Rule:
    """One rule. Make them with ``agent.allow(...)`` / ``agent.deny(...)``; ``revoke()`` ends
    one in every kernel."""

    id: str
    kind: RuleKind
    agent: str
    tool: str
    table: str | None = None
    columns: tuple[str, ...] | None = None
    max_rows: int | None = None
    #: The update's filter, in words, that a call's must be (see :func:`filter_inside`):
    #: ``status = 'open'``, and with ``*`` any further ANDed conditions or any one value.
    where: str | None = None
    scope: RuleScope = "thread"
    thread_id: str | None = None
    until: datetime | None = None
    user_id: str | None = None
    #: The kernel that made it (what ``scope="agent"`` keeps it to).
    kernel: str | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    revoked_at: datetime | None = None
    _store: Any = field(default=None, repr=False, compare=False)

    def covers(self, effect: Effect) -> bool:
        """Whether ``effect`` is inside every bound of this rule."""
        if effect.tool != self.tool:
            return False
        if self.table is not None and effect.table != self.table:
            return False
        if self.columns is not None and (
            effect.columns is None or not effect.columns <= set(self.columns)
        ):
            return False
        if self.max_rows is not None and (effect.rows is None or effect.rows > self.max_rows):
            return False
        return self.where is None or (
            effect.where is not None and filter_inside(effect.where, self.where)
        )

    def applies(self, thread_id: str, now: datetime | None = None) -> bool:
        """Whether the rule decides calls of ``thread_id`` in this kernel now."""
        now = now or datetime.now(timezone.utc)
        if self.revoked_at is not None or (self.until is not None and now >= self.until):
            return False
        if self.scope == "thread":
            return self.thread_id == thread_id
        if self.scope == "agent":
            return self.kernel == KERNEL
        return True

    def revoke(self) -> bool:
        """End the rule in every kernel (the next call it would have decided waits). False
        when it was revoked already."""
        if self._store is None:
            raise RuntimeError("this rule was not read from a store; revoke it with its agent")
        done = bool(self._store.revoke_rule(self.id, user_id=self.user_id))
        if self.revoked_at is None:
            self.revoked_at = datetime.now(timezone.utc)
        return done

    def describe(self) -> str:
        """The rule in words: ``allow frames_append on tickets, up to 20 rows, in this thread``."""
        words = [self.kind, self.tool]
        if self.table is not None:
            words.append(f"on {self.table}")
        if self.columns is not None:
            words.append(f"columns {', '.join(self.columns)}")
        if self.max_rows is not None:
            words.append(f"up to {self.max_rows:,} row{'s' if self.max_rows != 1 else ''}")
        if self.where is not None:
            words.append(f"where {self.where}")
        where = {
            "thread": f"in thread {self.thread_id}",
            "agent": "in this kernel",
            "until": "in every kernel",
        }[self.scope]
        words.append(where)
        if self.until is not None:
            words.append(f"until {self.until.isoformat(timespec='seconds')}")
        return " ".join(words)

    def to_dict(self) -> dict[str, Any]:
        """The rule as JSON-ready data (what stores save)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "agent": self.agent,
            "tool": self.tool,
            "table": self.table,
            "columns": list(self.columns) if self.columns is not None else None,
            "max_rows": self.max_rows,
            "where": self.where,
            "scope": self.scope,
            "thread_id": self.thread_id,
            "until": self.until.isoformat() if self.until is not None else None,
            "user_id": self.user_id,
            "kernel": self.kernel,
            "created_at": self.created_at.isoformat(),
        }

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], *, revoked_at: str | None = None, store: Any = None
    ) -> Rule:
        """The rule that ``to_dict`` gave."""
        until = data.get("until")
        columns = data.get("columns")
        return cls(
            id=data["id"],
            kind=data["kind"],
            agent=data["agent"],
            tool=data["tool"],
            table=data.get("table"),
            columns=tuple(columns) if columns is not None else None,
            max_rows=data.get("max_rows"),
            where=data.get("where"),
            scope=data.get("scope", "thread"),
            thread_id=data.get("thread_id"),
            until=datetime.fromisoformat(until) if until else None,
            user_id=data.get("user_id"),
            kernel=data.get("kernel"),
            created_at=datetime.fromisoformat(data["created_at"]),
            revoked_at=datetime.fromisoformat(revoked_at) if revoked_at else None,
            _store=store,
        )


@runtime_checkable
class RuleStore(Protocol):
    """A store that keeps rules (every store loom_nb ships). Each method is one transaction."""

    def save_rule(self, rule: Rule) -> None:
        """Keep ``rule`` (a new id)."""

    def load_rules(self, agent: str, *, user_id: str | None = None) -> list[Rule]:
        """The rules of ``agent`` for this user that are not revoked, oldest first (their
        scope and ``until`` are the caller's to check: see :meth:`Rule.applies`)."""

    def revoke_rule(self, rule_id: str, *, user_id: str | None = None) -> bool:
        """Mark the rule revoked, compare-and-set: False when it was revoked already or is
        not this user's."""


def deciding_rule(rules: Sequence[Rule], thread_id: str, effect: Effect) -> Rule | None:
    """The rule that decides a call of ``thread_id`` with ``effect``: the first ``deny`` that
    covers it, else the first ``allow``; None when none does (the call waits for a person)."""
    now = datetime.now(timezone.utc)
    found = [r for r in rules if r.applies(thread_id, now) and r.covers(effect)]
    return next((r for r in found if r.kind == "deny"), None) or next(iter(found), None)


def until_of(until: datetime | timedelta | float | None) -> datetime | None:
    """``until=`` as a moment: a datetime (naive is UTC), a timedelta or seconds from now.
    ValueError or OverflowError when it is no moment (NaN, infinite, after the year 9999)."""
    if until is None:
        return None
    if isinstance(until, datetime):
        return until if until.tzinfo is not None else until.replace(tzinfo=timezone.utc)
    if isinstance(until, timedelta):
        return datetime.now(timezone.utc) + until
    seconds = float(until)
    if not math.isfinite(seconds):
        raise ValueError(f"{seconds} seconds is no moment")
    return datetime.now(timezone.utc) + timedelta(seconds=seconds)


def _known_names(schema: Any) -> tuple[list[str] | None, list[str] | None]:
    """The tables and the columns a call of a tool with this input schema can name, when the
    schema lists them (a table tool's does: ``table``'s enum, and the names of the rows or
    values it writes); None where it takes any name."""

    def enum(*path: str) -> list[str] | None:
        node = schema
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, list) and all(isinstance(n, str) for n in node):
            return sorted(node)
        return None

    props = schema.get("properties") if isinstance(schema, Mapping) else None
    written = [
        enum("properties", *path, "propertyNames", "enum")
        for name, path in (("rows", ("rows", "items")), ("values", ("values",)))
        if isinstance(props, Mapping) and name in props
    ]
    columns = (
        sorted({c for names in written for c in names or ()})
        if written and all(names is not None for names in written)
        else None
    )
    return enum("properties", "table", "enum"), columns


def make_rule(
    kind: RuleKind,
    agent: str,
    tools: Mapping[str, Any],
    tool: str,
    table: str | None,
    columns: Sequence[str] | None,
    max_rows: int | None,
    where: str | None,
    scope: str,
    thread_id: str | None,
    until: Any,
) -> Rule:
    """A new rule of ``agent`` (whose tools are ``tools``), every argument checked: a mistake
    is a UserError that says how to write it."""
    from loom_nb._errors import UserError

    call = f"agent.{kind}(...)"
    if not isinstance(tool, str) or tool not in tools:
        raise UserError(
            f"{call}: tool={tool!r} is not a tool of {agent!r}; its tools: {sorted(tools)}"
        )
    if tool == "ask_user":
        raise UserError(f"{call}: ask_user asks you a question; only you answer it, no rule does")
    found = tools[tool]
    if found.needs_approval is False:
        raise UserError(
            f"{call}: {tool} never waits for approval, so no rule has anything to decide"
        )
    bounds = {"table": table, "columns": columns, "max_rows": max_rows, "where": where}
    given = [name for name, value in bounds.items() if value is not None]
    if found.effect is None and given:
        raise UserError(
            f"{call}: {tool} does not say which table, columns or rows a call changes, so "
            f"{', '.join(given)} could never hold; leave {'it' if len(given) == 1 else 'them'} out"
        )
    if table is not None and (not isinstance(table, str) or not table):
        raise UserError(f"{call}: table= names one table (a str), got {table!r}")
    if columns is not None:
        if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
            raise UserError(f"{call}: columns= is a list of column names, got {columns!r}")
        if not all(isinstance(c, str) and c for c in columns):
            raise UserError(f"{call}: columns= holds column names (str), got {columns!r}")
    if max_rows is not None and (
        isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 0
    ):
        raise UserError(f"{call}: max_rows= is a whole number of rows, 0 or more; got {max_rows!r}")
    if where is not None:
        try:
            if not isinstance(where, str):
                raise Unread
            read_filter(where, pattern=True)
        except Unread:
            raise UserError(
                f"{call}: where={where!r} does not read as an update's filter in the card's "
                "words: conditions joined by AND, text in single quotes, * for any one value "
                "or any further conditions, e.g. \"status = 'open'*\""
            ) from None
    tables, known = _known_names(found.parameters) if found.effect is not None else (None, None)
    if tables is not None and table is not None and table not in tables:
        raise UserError(f"{call}: {tool} writes no table {table!r}; its tables: {tables}")
    unknown = [c for c in columns or () if known is not None and c not in known]
    if unknown:
        raise UserError(f"{call}: {tool} writes no column {unknown[0]!r}; its columns: {known}")
    if scope not in SCOPES:
        raise UserError(f"{call}: scope={scope!r}; choose one of {', '.join(map(repr, SCOPES))}")
    if scope == "thread" and not isinstance(thread_id, str):
        raise UserError(f"{call}: scope='thread' needs the thread: thread_id=result.thread_id")
    if scope != "thread" and thread_id is not None:
        raise UserError(f"{call}: thread_id= goes with scope='thread' only")
    if (
        until is not None and not isinstance(until, datetime | timedelta | int | float)
    ) or isinstance(until, bool):
        raise UserError(
            f"{call}: until= is a datetime, a timedelta or seconds from now; got {until!r}"
        )
    try:
        moment = until_of(until)
        past = moment is not None and moment <= datetime.now(timezone.utc)
    except (ValueError, OverflowError):
        # NaN, infinity, 1e20 seconds: no moment a rule can end at (nor a store keep)
        raise UserError(
            f"{call}: until={until!r} is no moment; until= is a datetime, a timedelta or a "
            "finite number of seconds from now, up to the year 9999 (for no end, leave it out)"
        ) from None
    if scope == "until" and moment is None:
        raise UserError(f"{call}: scope='until' needs until= (a datetime, a timedelta or seconds)")
    if past:
        raise UserError(f"{call}: until={until!r} is past already")
    return Rule(
        id=new_rule_id(),
        kind=kind,
        agent=agent,
        tool=tool,
        table=table,
        columns=tuple(columns) if columns is not None else None,
        max_rows=max_rows,
        where=where,
        scope=scope,  # type: ignore[arg-type]
        thread_id=thread_id,
        until=moment,
    )
