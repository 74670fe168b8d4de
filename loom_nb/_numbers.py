"""Every number an answer states, traced to the thread's tool results.

A number in an assistant's text is matched, in this order, to:

- ``"shown"``: a value in one result as the model saw it (its text) or in the frame behind it;
  ``"rounded"`` when the answer writes that value to fewer digits than the result;
- ``"sum"``, ``"mean"``, ``"count"``: a numeric column's sum or mean, a result's row count
  (or a column's count of distinct values);
- ``"difference"``, ``"ratio"``: two values shown in one result, their difference, their
  ratio, or that ratio as a percentage (percent change too);
- ``"question"``: the user wrote it; ``"year"``: a year (1900 to 2100) in no result.

Each derived value is compared at the precision the answer writes (``12.3%`` is anything that
rounds to it; ``1.2M`` anything from 1.15 to 1.25 million). What matches nothing has
``rule=None``: the views mark it "in no result". List numbering (``1.``), ordinals, versions,
times and digits inside words (``Q3``, ``gpt-4``) are not numbers an answer states.

Pure functions over messages. What one result offers is computed once per result and kept in
a small bounded cache, so tracing a turn of a long thread costs little.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from loom_nb._codec import is_dataframe
from loom_nb._messages import Message, Thread, ToolResult, is_pause_call, random_token

__all__ = [
    "CHECK_NUMBERS",
    "CHECK_TOOL",
    "CheckNumbers",
    "TracedNumber",
    "by_message",
    "correction",
    "is_check_call",
    "new_check_id",
    "numbers_in_chunk",
    "trace_message",
    "trace_messages",
    "trace_numbers",
    "unmatched",
]

Rule = Literal[
    "shown", "rounded", "sum", "mean", "count", "difference", "ratio", "question", "year"
]

CheckNumbers = Literal["warn", "strict", "off"]
#: The values ``define_agent(check_numbers=...)`` takes.
CHECK_NUMBERS: tuple[CheckNumbers, ...] = ("warn", "strict", "off")

#: The name of loom_nb's own call that sends a strict check's unmatched numbers back to the
#: model; its id starts with :data:`CHECK_PREFIX`.
CHECK_TOOL = "check_numbers"
CHECK_PREFIX = "numbers_"


def new_check_id() -> str:
    """The id of a strict check's correction call."""
    return CHECK_PREFIX + random_token(9)


def is_check_call(call_id: str) -> bool:
    """Whether ``call_id`` is a strict number check's correction (see :data:`CHECK_TOOL`)."""
    return call_id.startswith(CHECK_PREFIX)


@dataclass(frozen=True)
class TracedNumber:
    """One number an assistant message states, and where it came from.

    ``message`` is its index in ``thread.messages``; ``text`` as written (``"$1,234.50"``);
    ``value`` the number (a ``float``; a ``datetime.date`` for a date); ``call_id`` the result
    it came from (None when none); ``rule`` how (see the module; None: in no result).
    """

    message: int
    text: str
    value: float | date
    call_id: str | None
    rule: Rule | None
    #: Where ``text`` is in the message's text: ``text == message.text[start:end]``.
    start: int = 0
    end: int = 0

    @property
    def matched(self) -> bool:
        """False for a number in no result (the views mark it)."""
        return self.rule is not None

    @property
    def source(self) -> str:
        """Where it came from, in words: ``"shown in call_1"``, ``"in no result"``."""
        if self.rule is None:
            return "in no result"
        if self.rule == "question":
            return "written in the question"
        if self.rule == "year":
            return "a year"
        words = {
            "shown": "shown in",
            "rounded": "rounded from a value in",
            "sum": "a column's sum in",
            "mean": "a column's mean in",
            "count": "a count of",
            "difference": "a difference of two values in",
            "ratio": "a ratio of two values in",
        }[self.rule]
        return f"{words} {self.call_id}"


def trace_numbers(thread: Thread) -> list[TracedNumber]:
    """Every number the assistant's messages in ``thread`` state, each traced to the tool
    result it came from (``rule``), or ``rule=None`` when it is in no result."""
    return trace_messages(thread.messages)


def trace_messages(messages: Sequence[Message]) -> list[TracedNumber]:
    """:func:`trace_numbers` of a list of messages (``message`` indexes into it)."""
    found: list[TracedNumber] = []
    sources = _Sources()
    for i, message in enumerate(messages):
        if message.role == "assistant" and message.text:
            found.extend(_trace(message.text, i, sources))
        sources.add(message)
    return found


def trace_message(messages: Sequence[Message], index: int) -> list[TracedNumber]:
    """The numbers of ``messages[index]`` alone, against the messages before it."""
    message = messages[index]
    if message.role != "assistant" or not message.text:
        return []
    sources = _Sources()
    for earlier in messages[:index]:
        sources.add(earlier)
    return _trace(message.text, index, sources)


def numbers_in_chunk(
    chunk: str, numbers: list[TracedNumber]
) -> Iterator[tuple[int, int, TracedNumber]]:
    """Where ``chunk`` (a piece of a message's text, as a markdown renderer meets it, in
    order) states the next of ``numbers``; each one found is taken off the front of the list."""
    for read in _numbers_in(chunk, answer=True):
        ahead = next((i for i, n in enumerate(numbers) if n.text == read.text), None)
        if ahead is None:
            continue
        number = numbers[ahead]
        del numbers[: ahead + 1]
        yield read.start, read.end, number


def by_message(numbers: Iterable[TracedNumber]) -> dict[int, list[TracedNumber]]:
    """``numbers`` grouped by the index of their message."""
    found: dict[int, list[TracedNumber]] = {}
    for n in numbers:
        found.setdefault(n.message, []).append(n)
    return found


def unmatched(numbers: Iterable[TracedNumber]) -> list[TracedNumber]:
    """The numbers that are in no result."""
    return [n for n in numbers if n.rule is None]


def correction(numbers: Sequence[TracedNumber]) -> str:
    """What a strict check sends the model about the numbers of its answer in no result."""
    listed = ", ".join(dict.fromkeys(n.text for n in numbers))
    return json.dumps(
        {
            "error": (
                f"These numbers in your answer are in no tool result and cannot be derived "
                f"from one (a sum, count, mean, difference, ratio or rounding of shown "
                f"values): {listed}. Answer again using only numbers from the results, "
                "or call a tool to get them; say so where a number is an estimate."
            ),
            "numbers": list(dict.fromkeys(n.text for n in numbers)),
        }
    )


# ---- reading numbers -------------------------------------------------------------------------

_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))


@functools.cache
def _token() -> re.Pattern[str]:
    """A date (ISO, or with a month's name), else a number with its currency and unit.
    Compiled with the first text traced, not with ``define_agent`` (a few ms: the month
    names, case-insensitive)."""
    return re.compile(
        rf"""
    (?P<iso>(?<![\w.-])\d{{4}}-\d{{2}}-\d{{2}}(?![\w-]))
  | (?P<mdy>(?<![\w])(?:{_MONTH})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}(?!\w))
  | (?P<dmy>(?<![\w.])\d{{1,2}}\s+(?:{_MONTH})\.?,?\s+\d{{4}}(?!\w))
  | (?P<number>
      (?P<currency>(?:[$€£¥]|(?:USD|EUR|GBP)\s?))?
      (?P<sign>[-−+])?
      (?P<currency2>[$€£¥])?
      (?P<digits>\d{{1,3}}(?:,\d{{3}})+(?![\d])(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)
      (?P<exp>[eE][-+]?\d+)?
      (?P<unit>\s?%|\s?(?:thousand|millions?|billions?|bn|mn)\b|[kKMB]\b|m\b(?!\s*[²³])
        |\s?(?:ms|s|sec|secs|seconds|min|mins|minutes|h|hrs|hours|days|GB|MB|KB|TB|px|x)\b)?
    )
    """,
        re.VERBOSE | re.IGNORECASE,
    )


# The data boundary around a frame's text and its columns line: no number of the data's.
_BOUNDARY = re.compile(r"(?m)^.*</?data-[0-9a-f]+[^>]*>.*$|^columns: .*$")
_LIST_ITEM = re.compile(r"(?m)^[ \t]*(?:[-*+][ \t]+)?\d+[.)](?=[ \t])")
_FENCE = re.compile(r"(?ms)^[ \t]*(```|~~~).*?(^[ \t]*\1[ \t]*$|\Z)")
#: A terminal's control sequence (CSI, 7- or 8-bit; OSC up to its end): its digits, the 8 of
#: ``ESC[8m``, are codes, not numbers (the views show the sequence as text).
_CONTROL = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*")


@dataclass(frozen=True)
class _Read:
    text: str
    value: float | date
    start: int
    end: int
    #: The smallest step the text writes (0.1 for "1.2", 1e5 for "1.2M"); None for a date.
    step: float | None = None
    percent: bool = False
    integer: bool = False
    #: The step of the digits written alone (1 for "1,200", where ``step`` is 100).
    fine: float = 0.0


def _numbers_in(text: str, *, answer: bool) -> Iterator[_Read]:
    """The numbers of ``text``. For an answer (``answer``), what is not a stated number is
    left out: list numbering, ordinals, versions, times, digits inside words, code blocks."""
    text = _CONTROL.sub(lambda m: " " * len(m.group()), text)  # same places, no codes
    skipped: list[tuple[int, int]] = []
    if answer:
        skipped = [m.span() for m in _FENCE.finditer(text)]
        skipped += [m.span() for m in _LIST_ITEM.finditer(text)]
    for m in _token().finditer(text):
        start, end = m.span()
        if any(a <= start < b for a, b in skipped):
            continue
        if m.group("number") is None:
            day = _date_of(m)
            if day is not None:
                yield _Read(m.group(0), day, start, end)
            continue
        read = _number_of(m, text, answer)
        if read is not None:
            yield read


def _date_of(m: re.Match[str]) -> date | None:
    text = m.group(0)
    try:
        if m.group("iso"):
            y, mo, d = (int(p) for p in text.split("-"))
            return date(y, mo, d)
        parts = re.findall(r"[A-Za-z]+|\d+", text)
        words = [p for p in parts if p.isalpha() and p.lower() in _MONTHS]
        digits = [int(p) for p in parts if p.isdigit()]
        return date(digits[-1], _MONTHS[words[0].lower()], digits[0])
    except (ValueError, IndexError):
        return None


def _number_of(m: re.Match[str], text: str, answer: bool) -> _Read | None:
    start, end = m.span()
    digits = m.group("digits")
    unit = (m.group("unit") or "").strip()
    before = text[max(0, start - 1) : start]
    after = text[end : end + 2]
    sign = m.group("sign")
    if sign and before[:1].isdigit():  # 10-20: a range's dash, not a sign
        start += len(sign)
        before = sign
    if answer:
        if before and (before.isalnum() or before in "_#/\\:."):
            return None  # Q3, gpt-4, #1234 as part of a word, 1.2.3, 10:30, a path
        if before in "-−" and text[max(0, start - 2) : start - 1].isalpha():
            return None  # gpt-4
        if after[:1] in ".:" and after[1:2].isdigit():
            return None  # a version (1.2.3), a time (10:30)
        if re.match(r"(?i)(st|nd|rd|th)\b", text[end : end + 3]):
            return None  # an ordinal
        if not unit and after[:1].isalpha():
            return None  # 3D, 4xx
    try:
        value = float(digits.replace(",", "") + (m.group("exp") or ""))
    except ValueError:
        return None
    scale = _scale(unit, answer)
    decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
    fine = 0.0 if m.group("exp") else 10.0**-decimals * scale
    if m.group("exp"):
        step = 0.0  # written exactly
    else:
        step = fine
        whole = digits.replace(",", "").split(".")[0]
        zeros = len(whole) - len(whole.rstrip("0"))
        significant = len(whole.lstrip("0")) - zeros
        if decimals == 0 and zeros and significant >= 2:
            step = 10.0**zeros * scale  # 1,200: written to the hundreds
    written = text[start:end].rstrip()
    negative = bool(sign) and before not in "-−" and sign in "-−"
    return _Read(
        written,
        -value * scale if negative else value * scale,
        start,
        start + len(written),
        step,
        percent=unit == "%",
        integer=decimals == 0 and scale == 1.0 and not unit,
        fine=fine,
    )


def _scale(unit: str, answer: bool) -> float:
    """What a unit multiplies by: k, M, B and their words (a lone "m" only in prose)."""
    low = unit.lower()
    if low in ("k", "thousand"):
        return 1e3
    if unit == "M" or low in ("mn", "million", "millions") or (unit == "m" and answer):
        return 1e6
    if unit == "B" or low in ("bn", "billion", "billions") or (unit == "b" and answer):
        return 1e9
    return 1.0


# ---- what a result offers --------------------------------------------------------------------


@dataclass
class _Offer:
    """What one result offers, each list sorted: values shown, and values derived by each
    rule; the rules over two shown values are computed on first need."""

    shown: list[float]
    exact: set[float]
    dates: set[date]
    derived: dict[str, list[float]]
    pair_values: tuple[float, ...] = ()
    totals: tuple[float, ...] = ()
    _pairs: dict[bool, dict[str, list[float]]] = field(default_factory=dict)

    def pair_rules(self, percent: bool) -> dict[str, list[float]]:
        """For an answer written as a percentage (``percent``): ratios as percentages, percent
        changes, shares of a column's total, sums of two; else differences and sums of two,
        and plain ratios."""
        found = self._pairs.get(percent)
        if found is None:
            import numpy as np

            a = np.array(self.pair_values, dtype=float)
            upper = np.triu_indices(len(a), 1)
            sums = (a[:, None] + a[None, :])[upper]
            with np.errstate(divide="ignore", invalid="ignore"):
                r = a[:, None] / a[None, :]
            r = r[~np.eye(len(a), dtype=bool) & np.isfinite(r)]
            if percent:
                totals = np.array([t for t in self.totals if t], dtype=float)
                shares = (a[:, None] / totals[None, :] * 100).ravel()
                ratios = np.concatenate([r * 100, np.abs(r - 1) * 100, shares])
                found = {"ratio": _sorted(ratios), "sum": _sorted(sums)}
            else:
                differences = np.abs(a[:, None] - a[None, :])[upper]
                found = {"difference": _sorted(differences), "sum": _sorted(sums)}
                found["ratio"] = _sorted(r)
            self._pairs[percent] = found
        return found


def _sorted(values: Any) -> list[float]:
    import numpy as np

    return np.unique(values).tolist()  # type: ignore[no-any-return]


_PAIR_VALUES = 40  # the distinct values of a result whose pairs are tried
_FRAME_CELLS = 200_000  # frames bigger than this offer their shown text and aggregates only
_CACHE: OrderedDict[tuple[str, str], _Offer] = OrderedDict()
_CACHE_SIZE = 8192


def _offer(result: ToolResult) -> _Offer:
    key = (result.call_id, result.content)
    found = _CACHE.get(key)
    if found is not None:
        _CACHE.move_to_end(key)
        return found
    found = _build_offer(result)
    _CACHE[key] = found
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return found


def _build_offer(result: ToolResult) -> _Offer:
    shown: set[float] = set()
    dates: set[date] = set()
    order: list[float] = []
    for read in _numbers_in(_BOUNDARY.sub("", result.content), answer=False):
        if isinstance(read.value, date):
            dates.add(read.value)
            continue
        values = [abs(read.value)]
        if read.percent:
            values.append(abs(read.value) / 100)
        for v in values:
            if v not in shown:
                shown.add(v)
                order.append(v)
    columns, rows = _columns(result)
    derived: dict[str, set[float]] = {"sum": set(), "mean": set(), "count": set()}
    if rows is not None:
        derived["count"].add(float(rows))
    for values, distinct in columns:
        if values:
            total = math.fsum(values)
            derived["sum"].add(abs(total))
            derived["mean"].add(abs(total / len(values)))
            derived["count"].add(float(len(values)))
        if distinct is not None:
            derived["count"].add(float(distinct))
    frame_values, frame_order = _frame_cells(result)
    shown_all = shown | frame_values
    pairs = frame_order if frame_order else order
    return _Offer(
        shown=sorted(shown_all),
        exact=shown_all,
        dates=dates | _frame_dates(result),
        derived={k: sorted(v) for k, v in derived.items()},
        pair_values=tuple(pairs[:_PAIR_VALUES]),
        totals=tuple(sorted(derived["sum"])),
    )


def _columns(result: ToolResult) -> tuple[list[tuple[list[float], int | None]], int | None]:
    """Each numeric column of the result (its values, and for any column its distinct count),
    and its number of rows: from the frame behind it, else from a JSON list of records."""
    data = result.data
    if is_dataframe(data):
        columns: list[tuple[list[float], int | None]] = []
        for name in data.columns:
            series = data[name]
            distinct = int(series.nunique()) if len(series) <= _FRAME_CELLS else None
            if series.dtype.kind in "iuf":
                columns.append(([float(v) for v in series.dropna().tolist()], distinct))
            else:
                columns.append(([], distinct))
        return columns, len(data)
    try:
        parsed = json.loads(result.content)
    except ValueError:
        return [], None
    if isinstance(parsed, dict):
        lists = [v for v in parsed.values() if isinstance(v, list)]
        if len(lists) == 1:
            parsed = lists[0]
    if not isinstance(parsed, list):
        return [], None
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in parsed):
        return [([float(v) for v in parsed], len(set(parsed)))], len(parsed)
    records = [r for r in parsed if isinstance(r, dict)]
    keys = dict.fromkeys(k for r in records for k in r)
    found: list[tuple[list[float], int | None]] = []
    for k in keys:
        cells = [r.get(k) for r in records]
        numbers = [
            float(c) for c in cells if isinstance(c, int | float) and not isinstance(c, bool)
        ]
        distinct = len({json.dumps(c, sort_keys=True, default=str) for c in cells})
        found.append((numbers, distinct))
    return found, len(parsed)


def _frame_cells(result: ToolResult) -> tuple[set[float], list[float]]:
    """The numbers in the frame behind a result, and the first of them in column order."""
    data = result.data
    if not is_dataframe(data) or data.size > _FRAME_CELLS:
        return set(), []
    found: set[float] = set()
    order: list[float] = []
    for name in data.columns:
        series = data[name]
        if series.dtype.kind in "iuf":
            for v in series.dropna().unique().tolist():
                value = abs(float(v))
                if value not in found:
                    found.add(value)
                    order.append(value)
    return found, order


def _frame_dates(result: ToolResult) -> set[date]:
    data = result.data
    if not is_dataframe(data) or data.size > _FRAME_CELLS:
        return set()
    found: set[date] = set()
    for name in data.columns:
        series = data[name]
        if series.dtype.kind == "M":
            found.update(t.date() for t in series.dropna().unique().tolist() if hasattr(t, "date"))
    return found


# ---- matching --------------------------------------------------------------------------------


class _Sources:
    """The results and the user's numbers seen so far, newest result first when matching."""

    def __init__(self) -> None:
        self.results: list[ToolResult] = []
        self.user: list[_Read] = []
        #: The numbers of the last user message: what the answer answers.
        self.question: tuple[_Read, ...] = ()
        self._user_values: list[float] | None = None
        #: What each result offers, newest first: built as results come (each once).
        self._offers: list[tuple[str, _Offer]] = []

    def add(self, message: Message) -> None:
        if message.role == "user":
            self.question = _user_numbers(message.text)
            self.user.extend(self.question)
            self._user_values = None
        for r in message.tool_results:
            if not is_pause_call(r.call_id) and not is_check_call(r.call_id):
                self.results.append(r)

    def user_values(self) -> list[float]:
        """The user's numbers, sorted."""
        if self._user_values is None:
            self._user_values = sorted(
                abs(u.value) for u in self.user if isinstance(u.value, float)
            )
        return self._user_values

    def offers(self) -> list[tuple[str, _Offer]]:
        """What each result offers, newest first (read once per trace)."""
        if len(self._offers) != len(self.results):  # only the results added since
            added = self.results[len(self._offers) :]
            self._offers[:0] = [(r.call_id, _offer(r)) for r in reversed(added)]
        return self._offers


@functools.lru_cache(maxsize=4096)
def _user_numbers(text: str) -> tuple[_Read, ...]:
    return tuple(_numbers_in(text, answer=False))


def _trace(text: str, index: int, sources: _Sources) -> list[TracedNumber]:
    found = []
    for read in _numbers_in(text, answer=True):
        call_id, rule = _match(read, sources)
        found.append(
            TracedNumber(index, read.text, read.value, call_id, rule, read.start, read.end)
        )
    return found


def _match(read: _Read, sources: _Sources) -> tuple[str | None, Rule | None]:
    if isinstance(read.value, date):
        day = read.value
        for call_id, offer in sources.offers():
            if day in offer.dates:
                return call_id, "shown"
        if any(u.value == day for u in sources.user):
            return None, "question"
        return None, None
    step = read.step or 0.0
    tolerance = step / 2 + 1e-9 * max(1.0, abs(read.value))
    targets = [abs(read.value)]
    if read.percent:
        targets.append(abs(read.value) / 100)
    for call_id, offer in sources.offers():
        for target in targets:
            hit = _near(offer.shown, target, tolerance if target == targets[0] else tolerance / 100)
            if hit is not None:
                exact = target in offer.exact or abs(hit - target) <= 1e-9 * max(1.0, target)
                return call_id, "shown" if exact else "rounded"
    if _in_user(read.value, sources):
        return None, "question"
    for call_id, offer in sources.offers():
        for rule, values in offer.derived.items():
            if _near(values, abs(read.value), tolerance) is not None:
                return call_id, rule  # type: ignore[return-value]
    # over two values, only the digits written count (1,200 is not 1,150 to 1,250 here)
    tight = read.fine / 2 + 1e-9 * max(1.0, abs(read.value))
    plain_ratio = not read.percent and (read.fine < 1 or read.text.endswith("x"))
    for call_id, offer in sources.offers():
        for rule, values in offer.pair_rules(read.percent).items():
            if rule == "ratio" and not read.percent and not plain_ratio:
                continue
            if _near(values, abs(read.value), tight) is not None:
                return call_id, rule  # type: ignore[return-value]
        for u in sources.question:
            if isinstance(u.value, date):
                continue
            for v in (abs(read.value) + abs(u.value), abs(u.value) - abs(read.value)):
                if _near(offer.shown, v, tight) is not None:
                    return call_id, "difference"
    if read.integer and 1900 <= read.value <= 2100 and read.text.isdigit():
        return None, "year"
    return None, None


def _in_user(value: float, sources: _Sources) -> bool:
    return _near(sources.user_values(), abs(value), 1e-9 * max(1.0, abs(value))) is not None


def _near(values: list[float], target: float, tolerance: float) -> float | None:
    """The value of sorted ``values`` nearest ``target`` when within ``tolerance``."""
    i = bisect.bisect_left(values, target - tolerance)
    if i < len(values) and values[i] <= target + tolerance:
        best = values[i]
        j = i + 1
        while j < len(values) and values[j] <= target + tolerance:
            if abs(values[j] - target) < abs(best - target):
                best = values[j]
            j += 1
        return best
    return None
