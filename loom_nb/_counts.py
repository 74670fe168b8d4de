"""How many rows a table tool's DataFrame holds, of how many its call matched.

The model sees at most ``max_rows`` rows of a result; the user's DataFrame of the same call
holds every matching row up to the connector's ``frame_rows``. The counts travel with the
frame, in ``df.attrs["loom"]`` (saved with it in the thread), so the call header, the frame's
caption and the static view say ``3 rows (limit 50)``, ``53 groups`` or, where the frame is
cut, ``50 of 53 groups`` and the setting that raises it. Plain dicts only: no pandas here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The key of ``DataFrame.attrs`` that holds the counts.
ATTR = "loom"


def counts(
    *,
    rows: int,
    matched: int | None,
    what: str = "row",
    limit: int | None = None,
    offset: int = 0,
    frame_rows: int,
    max_rows: int | None = None,
    buckets: Mapping[str, str] | None = None,
    edges: Mapping[str, list[float]] | None = None,
) -> dict[str, Any]:
    """The counts of one call's frame: ``rows`` it holds, ``matched`` by the call (None when
    nobody counted), the ``limit`` the model asked for, the connector's ``frame_rows`` and its
    ``max_rows`` (the model's page).
    ``buckets`` names the time bucket of each bucket column (``{"week_created_at": "week"}``)
    and ``edges`` the bin edges of each bins column, so a chart draws each bar one bucket or
    bin wide."""
    out: dict[str, Any] = {"what": what, "rows": rows, "matched": matched, "offset": offset}
    out["limit"] = limit
    out["frame_rows"] = frame_rows
    if max_rows is not None:  # the model's page of the frame: its first max_rows rows
        out["max_rows"] = max_rows
    if buckets:
        out["buckets"] = dict(buckets)
    if edges:
        out["edges"] = {k: [float(e) for e in v] for k, v in edges.items()}
    return out


def with_counts(df: Any, found: Mapping[str, Any]) -> Any:
    """``df`` with ``found`` in its attrs (the same object)."""
    df.attrs[ATTR] = dict(found)
    return df


def counts_of(attrs: Any) -> dict[str, Any] | None:
    """The counts in a frame's ``attrs`` (or in the attrs mapping itself), if any. pandas
    copies ``attrs`` to frames made from this one (``df.head(5)``): counts that are not of a
    frame's own rows are not its counts."""
    frame = None
    if not isinstance(attrs, Mapping):
        frame, attrs = attrs, getattr(attrs, "attrs", None)
    found = attrs.get(ATTR) if isinstance(attrs, Mapping) else None
    if not isinstance(found, Mapping) or not isinstance(found.get("rows"), int):
        return None
    if frame is not None and len(frame) != found["rows"]:
        return None
    return dict(found)


def cut(found: Mapping[str, Any]) -> bool:
    """Whether ``frame_rows`` cut the frame: fewer rows than matched, or (uncounted) as many
    as it allows."""
    rows, matched, bound = found["rows"], found.get("matched"), found["frame_rows"]
    limit = found.get("limit")
    if limit is not None and limit <= bound:  # the model's own limit, not the bound
        return False
    if matched is not None:
        return bool(rows < matched - found.get("offset", 0))
    return bool(rows >= bound)


def partial(found: Mapping[str, Any]) -> bool:
    """Whether the frame holds fewer rows than the call matched (a limit or ``frame_rows``)."""
    matched = found.get("matched")
    return matched is not None and found["rows"] < matched - found.get("offset", 0)


def counts_text(found: Mapping[str, Any]) -> str:
    """``3 rows (limit 50)``, ``53 groups``, ``50 of 53 groups (frame_rows=50 cut it)``."""
    rows, matched, what = found["rows"], found.get("matched"), found.get("what", "row")
    offset, limit, bound = found.get("offset", 0), found.get("limit"), found["frame_rows"]
    after = matched - offset if matched is not None else None
    if after is not None and rows < after:
        text = f"{rows:,} of {_plural(after, what)}"
    else:
        text = _plural(rows, what)
    if offset:
        text += f" from offset {offset:,}"
    if cut(found):
        text += (
            f" (frame_rows={bound:,} cut it)"
            if matched is not None
            else f" (frame_rows={bound:,} reached: more may match)"
        )
    elif limit is not None:
        text += f" (limit {limit:,})"
    return text


def words_with_counts(words: str, found: Mapping[str, Any] | None) -> str:
    """A call's words with what came back (``frames_select · orders · 3 rows (limit 50)``):
    the page the model asked for, at the end of the words, gives way to the counts, which
    say it. The words alone without counts."""
    if found is None:
        return words
    limit, offset = found.get("limit"), found.get("offset", 0)
    asked = " ".join(
        [*([] if limit is None else [f"limit {limit:,}"])]
        + ([f"from offset {offset:,}"] if offset else [])
    )
    if asked and words.endswith(f" · {asked}"):
        words = words[: -len(asked) - 3]
    return f"{words} · {counts_text(found)}"


def frame_note(found: Mapping[str, Any]) -> str:
    """What the model is told about the user's DataFrame of its call."""
    rows, what = found["rows"], found.get("what", "row")
    if cut(found):
        return (
            f"The user's DataFrame of this call holds {counts_text(found)}; the user can raise "
            "frame_rows for more."
        )
    return f"The user's DataFrame of this call holds {_plural(rows, what)}."


def _plural(count: int, what: str) -> str:
    return f"{count:,} {what}{'' if count == 1 else 's'}"
