"""Budgets that pause a run like an approval, and what each model turn costs.

A budget (``define_agent(budget=...)``, or ``budget=`` on a run) bounds tokens, and dollars
where the model's price is known, per run (since its prompt, across resumes) and per thread.
Before each model turn the run estimates that turn: the input tokens the provider reported
for the last request, plus what is counted (``_tokens``) of what changed since (the whole
request counted, before any report), plus the last turn's output. When
the budget would be passed, the run saves a pause instead: a pending item whose ``tool`` names
the kind (``"budget"``, or ``"max_steps"`` when the run made that many turns), with the
pending-call lifecycle of an approval (saved with its card, decided once by compare-and-set,
kept across restarts). Continue grants the same amount again; Stop ends the run.

Everything a later run needs is read back from the thread: a run's own budget rides on its
user message, and each decided pause (its call and its result) says what it granted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from loom_nb._errors import UserError
from loom_nb._messages import (
    Message,
    PendingApproval,
    ToolCall,
    ToolResult,
    Usage,
    is_pause_call,
    new_pause_id,
)

__all__ = [
    "BUDGET",
    "MAX_STEPS",
    "PAUSES",
    "Budget",
    "Prices",
    "check_budget",
    "check_prices",
    "cost_of",
]

#: The kinds of pause, as a pending item's ``tool`` names them.
BUDGET = "budget"
MAX_STEPS = "max_steps"
PAUSES = (BUDGET, MAX_STEPS)

Scope = Literal["run", "thread"]
Unit = Literal["tokens", "usd"]

#: ``budget=`` keys: (scope, unit) each bounds.
_KEYS: dict[str, tuple[Scope, Unit]] = {
    "tokens": ("run", "tokens"),
    "usd": ("run", "usd"),
    "thread_tokens": ("thread", "tokens"),
    "thread_usd": ("thread", "usd"),
}


@dataclass(frozen=True)
class Budget:
    """Limits by ``budget=`` key (see :data:`_KEYS`); each may be absent."""

    limits: Mapping[str, float]

    def to_dict(self) -> dict[str, float]:
        return dict(self.limits)

    def over(self, other: Budget | None) -> Budget:
        """This budget with ``other``'s keys winning."""
        return Budget({**self.limits, **(other.limits if other else {})})

    @property
    def money(self) -> bool:
        return any(_KEYS[k][1] == "usd" for k in self.limits)


def check_budget(value: object, where: str) -> Budget | None:
    """``budget=`` checked: a dict of positive numbers by known key, or None."""
    if value is None:
        return None
    keys = ", ".join(repr(k) for k in _KEYS)
    if not isinstance(value, Mapping) or not value:
        raise UserError(
            f"{where}(budget=...) takes a dict like {{'tokens': 50_000}} or {{'usd': 0.5}} "
            f"(keys {keys}), got {value!r}"
        )
    for key, limit in value.items():
        if key not in _KEYS:
            raise UserError(f"{where}(budget=...) has no key {key!r}: the keys are {keys}")
        number = not isinstance(limit, bool) and isinstance(limit, int | float)
        if not number or not math.isfinite(limit) or limit <= 0:
            raise UserError(
                f"{where}(budget={{{key!r}: ...}}) must be a positive number"
                f"{' of tokens' if _KEYS[key][1] == 'tokens' else ' of US dollars'}, got {limit!r}"
            )
    return Budget(dict(value))


@dataclass(frozen=True)
class Prices:
    """A model's prices in US dollars per million tokens (``prices=``)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        read = usage.cache_read_tokens
        write = usage.cache_write_tokens
        fresh = max(usage.input_tokens - read - write, 0)
        total = fresh * self.input + usage.output_tokens * self.output
        total += read * (self.input if self.cache_read is None else self.cache_read)
        total += write * (self.input if self.cache_write is None else self.cache_write)
        return total / 1_000_000


def check_prices(value: object) -> Prices | None:
    """``prices=`` checked: ``{"input": 0.4, "output": 1.6}`` (US dollars per million tokens;
    ``cache_read`` / ``cache_write`` too), or None."""
    if value is None:
        return None
    fields = ("input", "output", "cache_read", "cache_write")
    if not isinstance(value, Mapping) or not {"input", "output"} <= set(value):
        raise UserError(
            "prices= takes US dollars per million tokens, like {'input': 0.4, 'output': 1.6} "
            f"(also 'cache_read', 'cache_write'), got {value!r}"
        )
    for key, price in value.items():
        number = not isinstance(price, bool) and isinstance(price, int | float)
        if key not in fields:
            raise UserError(f"prices= has no key {key!r}: the keys are {', '.join(fields)}")
        if not number or not math.isfinite(price) or price < 0:
            raise UserError(f"prices[{key!r}] must be 0 or more dollars per million tokens")
    return Prices(**{k: float(v) for k, v in value.items()})


def cost_of(model_name: str, usage: Usage, prices: Prices | None = None) -> float | None:
    """What ``usage`` of ``"provider:model"`` cost: ``prices`` when given, else the price
    table of genai-prices for the named model; None when neither knows it."""
    if prices is not None:
        return prices.cost(usage)
    provider, _, model = model_name.partition(":")
    if provider not in ("openai", "anthropic") or not model:
        return None
    try:
        import genai_prices
    except ImportError:
        return None
    try:
        found = genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens or None,
                cache_write_tokens=usage.cache_write_tokens or None,
            ),
            model_ref=model,
            provider_id=provider,
        )
    except LookupError:
        return None
    return float(found.total_price)


# ---- pauses ---------------------------------------------------------------------------------


def _amount(unit: Unit, value: float) -> str:
    return f"{value:,.0f} tokens" if unit == "tokens" else f"${value:,.4f}"


def budget_pause(
    scope: Scope, unit: Unit, used: float, limit: float, grant: float, next_turn: float
) -> tuple[Message, PendingApproval]:
    """The saved form of a budget pause: loom_nb's call and the card that waits."""
    arguments = {"scope": scope, "unit": unit, "used": used, "limit": limit, "grant": grant}
    card = (
        f"This {scope} has used {_amount(unit, used)} of {_amount(unit, limit)}; the next model "
        f"turn needs about {_amount(unit, next_turn)}. Continue with {_amount(unit, grant)} "
        "more, or stop."
    )
    return _pause(BUDGET, arguments, card)


def steps_pause(steps: int) -> tuple[Message, PendingApproval]:
    """The saved form of a ``max_steps`` pause."""
    card = (
        f"The agent has made {steps} model turns in this run without finishing "
        f"(max_steps={steps}). Continue with {steps} more turns, or stop."
    )
    return _pause(MAX_STEPS, {"steps": steps, "grant": steps}, card)


def _pause(kind: str, arguments: dict[str, Any], card: str) -> tuple[Message, PendingApproval]:
    call = ToolCall(new_pause_id(), kind, arguments)
    return Message("assistant", [call]), PendingApproval(call.id, kind, arguments, card)


def pause_result(p: PendingApproval) -> ToolResult:
    """What deciding pause ``p`` saves: the grant, or that the user stopped the run."""
    approved = p.state == "approved"
    grant = p.arguments.get("grant")
    if p.tool == BUDGET:
        amount = _amount(p.arguments.get("unit", "tokens"), float(grant or 0))
        said = f"continued with {amount} more" if approved else "stopped at the budget"
    else:
        said = f"continued with {grant} more model turns" if approved else "stopped at max_steps"
    content = json.dumps({"outcome": said})
    return ToolResult(p.call_id, p.tool, content, approval="approved" if approved else "rejected")


def stopped(results: Sequence[ToolResult]) -> bool:
    """Whether these results hold a pause the user answered with Stop."""
    return any(is_pause_call(r.call_id) and r.approval == "rejected" for r in results)


def granted(messages: Sequence[Message], scope: Scope, unit: Unit) -> float:
    """The budget of ``scope`` in ``unit`` that pauses in ``messages`` granted."""
    calls = {c.id: c for m in messages for c in m.tool_calls if is_pause_call(c.id)}
    total = 0.0
    for m in messages:
        for r in m.tool_results:
            call = calls.get(r.call_id)
            if call is None or r.approval != "approved" or call.name != BUDGET:
                continue
            args = call.arguments or {}
            if args.get("scope") == scope and args.get("unit") == unit:
                total += float(args.get("grant") or 0)
    return total


def spent(messages: Sequence[Message], unit: Unit) -> float:
    """Tokens (in and out) or dollars of the model turns in ``messages``."""
    total = 0.0
    for m in messages:
        if m.usage is not None:
            total += m.usage.total_tokens if unit == "tokens" else (m.usage.cost or 0.0)
    return total


def since_prompt(messages: Sequence[Message]) -> Sequence[Message]:
    """The messages of the run that the last user message started (it included)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return messages[i:]
    return messages


def limits(budget: Budget) -> list[tuple[Scope, Unit, float]]:
    return [(*_KEYS[key], float(limit)) for key, limit in budget.limits.items()]
