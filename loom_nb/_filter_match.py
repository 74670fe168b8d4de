"""Whether an update's filter, in a card's words, is inside a rule's ``where=`` pattern.

A rule's filter and a call's are both read as the card writes them (``where_text``) and
compared condition by condition, value by value: never as text, where a ``*`` could run on
past a value's closing quote (``status = 'open'*`` over ``status = 'open'' x'``). Either one
that does not read as such a filter matches nothing.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

#: A token: an escape string (``E'a\\nb'``), a quoted text (``''`` is a quote), an operator,
#: a bracket, a comma or the pattern's ``*``, or a bare word (a column, a keyword, a number).
_TOKEN = re.compile(
    r"\s*(?:(?P<escaped>[Ee]'(?:[^'\\]|\\.)*')|(?P<quoted>'(?:[^']|'')*')"
    r"|(?P<op>!=|>=|<=|[=<>(),*])|(?P<word>[\w.+-]+))",
    re.DOTALL,
)
_COLUMN = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)?")
_COMPARISONS = frozenset({"=", "!=", ">", ">=", "<", "<=", "LIKE", "ILIKE"})
_UNESCAPED = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}
#: The pattern's ``*`` where a value goes: any one value.
_ANY = ("any", None)

Token = tuple[str, str]
#: A value as compared: ``("text", "open")``, ``("number", Decimal("1"))``, ``("bool", "TRUE")``.
Value = tuple[str, Any]
#: One condition: negated, column, operator (``IS NULL`` and ``IN`` among them), its values.
Condition = tuple[bool, str, str, tuple[Value, ...]]


class Unread(Exception):
    """The text does not read as a filter."""


def filter_inside(where: str, pattern: str) -> bool:
    """Whether a call's filter ``where`` (the card's words) is inside ``pattern``: each of the
    pattern's conditions is one of the call's, and the call has no other, unless the pattern
    has a ``*`` of its own (``status = 'open'*``, ``status = 'open' AND *``): then any further
    conditions, which only narrow the rows. A ``*`` where a value goes (``status = *``) is any
    one value; inside quotes it is the character. Values compare as values (``1`` is ``1.0``,
    ``'1'`` is text), keywords in any case."""
    try:
        wanted, more = read_filter(pattern, pattern=True)
        found, _ = read_filter(where, pattern=False)
    except Unread:
        return False
    if not all(any(_fits(w, c) for c in found) for w in wanted):
        return False
    return more or all(any(_fits(w, c) for w in wanted) for c in found)


def read_filter(text: str, *, pattern: bool) -> tuple[list[Condition], bool]:
    """``text``'s conditions, and whether it (a pattern) lets further conditions in."""
    tokens = _tokens(text)
    conditions: list[Condition] = []
    more = False
    i = 0
    while True:
        if pattern and _at(tokens, i) == ("op", "*"):
            more, i = True, i + 1
        else:
            condition, i = _condition(tokens, i, pattern)
            conditions.append(condition)
            if pattern and _at(tokens, i) == ("op", "*"):
                more, i = True, i + 1
        if i == len(tokens):
            return conditions, more
        if not _keyword(tokens, i, "AND"):
            raise Unread
        i += 1


def _tokens(text: str) -> list[Token]:
    tokens: list[Token] = []
    at = 0
    while text[at:].strip():
        m = _TOKEN.match(text, at)
        if m is None or m.lastgroup is None:
            raise Unread
        raw = m.group(m.lastgroup)
        if m.lastgroup == "quoted":
            tokens.append(("text", raw[1:-1].replace("''", "'")))
        elif m.lastgroup == "escaped":
            tokens.append(("text", _unescape(raw[2:-1])))
        else:
            tokens.append((m.lastgroup, raw))
        at = m.end()
    return tokens


def _unescape(body: str) -> str:
    # PostgreSQL's escape string, as ``filter_text`` writes it: \\n, \\', \\\\, \\uXXXX, ...
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        code = body[i + 1]
        width = {"u": 4, "U": 8}.get(code)
        if width is None:
            out.append(_UNESCAPED.get(code, code))
            i += 2
            continue
        digits = body[i + 2 : i + 2 + width]
        if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise Unread
        try:
            out.append(chr(int(digits, 16)))
        except (ValueError, OverflowError):
            raise Unread from None
        i += 2 + width
    return "".join(out)


def _at(tokens: list[Token], i: int) -> Token | None:
    return tokens[i] if i < len(tokens) else None


def _keyword(tokens: list[Token], i: int, word: str) -> bool:
    token = _at(tokens, i)
    return token is not None and token[0] == "word" and token[1].upper() == word


def _expect(tokens: list[Token], i: int, op: str) -> int:
    if _at(tokens, i) != ("op", op):
        raise Unread
    return i + 1


def _condition(tokens: list[Token], i: int, pattern: bool) -> tuple[Condition, int]:
    # [NOT (] column = value | column IN (value, ...) | column IS [NOT] NULL [)]
    wrapped = negate = _keyword(tokens, i, "NOT") and _at(tokens, i + 1) == ("op", "(")
    if wrapped:
        i += 2
    token = _at(tokens, i)
    if token is None or token[0] != "word" or not _COLUMN.fullmatch(token[1]):
        raise Unread
    column, i = token[1], i + 1
    values: tuple[Value, ...] = ()
    if _keyword(tokens, i, "IS"):
        i += 1
        is_not = _keyword(tokens, i, "NOT")
        i += is_not
        if not _keyword(tokens, i, "NULL"):
            raise Unread
        # NOT (x IS NULL) is x IS NOT NULL: one condition, written either way
        op, i, negate = ("IS NOT NULL" if is_not != wrapped else "IS NULL"), i + 1, False
    elif _keyword(tokens, i, "IN"):
        op, i = "IN", _expect(tokens, i + 1, "(")
        items = [_value(_at(tokens, i), pattern)]
        i += 1
        while _at(tokens, i) == ("op", ","):
            items.append(_value(_at(tokens, i + 1), pattern))
            i += 2
        values, i = tuple(items), _expect(tokens, i, ")")
    else:
        token = _at(tokens, i)
        op = "" if token is None else token[1].upper() if token[0] == "word" else token[1]
        if token is None or token[0] == "text" or op not in _COMPARISONS:
            raise Unread
        values, i = (_value(_at(tokens, i + 1), pattern),), i + 2
    if wrapped:
        i = _expect(tokens, i, ")")
    return (negate, column, op, values), i


def _value(token: Token | None, pattern: bool) -> Value:
    if token is None:
        raise Unread
    kind, text = token
    if kind == "text":
        return ("text", text)
    if pattern and token == ("op", "*"):
        return _ANY
    if kind != "word":
        raise Unread
    if text.upper() in ("TRUE", "FALSE"):
        return ("bool", text.upper())
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise Unread from None
    return ("number", "NaN" if number.is_nan() else number)


def _fits(wanted: Condition, found: Condition) -> bool:
    return (
        wanted[:3] == found[:3]
        and len(wanted[3]) == len(found[3])
        and all(w in (_ANY, f) for w, f in zip(wanted[3], found[3], strict=True))
    )
