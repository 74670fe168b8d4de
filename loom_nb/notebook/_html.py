"""Small HTML pieces shared by the widgets: escaped text, JSON, bounded DataFrame tables."""

from __future__ import annotations

import base64
import functools
import html
import json
from typing import Any

from loom_nb._codec import FrameHead, encode, frame_head, is_dataframe
from loom_nb._errors import MissingExtra

ERROR_STYLE = (
    "border-left:4px solid #d32f2f;background:#fdecea;color:#8b1a1a;"
    "padding:4px 8px;margin:4px 0;white-space:pre-wrap"
)


def esc(text: str) -> str:
    """Text escaped for HTML, quotes included."""
    return html.escape(text, quote=True)


def pre(text: str) -> str:
    """Text as an escaped, wrapping ``<pre>`` block."""
    return f'<pre style="white-space:pre-wrap;margin:2px 0">{esc(text)}</pre>'


def to_json(value: Any) -> str:
    """``value`` as indented JSON (DataFrames and loom values encoded), else its repr."""
    try:
        return json.dumps(encode(value), indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def shape_text(df: Any) -> str:
    """``3 rows × 2 columns``."""
    rows, cols = df.shape
    return _shape_words(rows, cols)


def _shape_words(rows: int, cols: int) -> str:
    return f"{rows} row{'s' if rows != 1 else ''} × {cols} column{'s' if cols != 1 else ''}"


# JupyterLab's own table style does not reach widget HTML; this one is scoped to our tables.
TABLE_STYLE = (
    "<style>.loom-table{border-collapse:collapse;font-size:90%;margin:2px 0}"
    ".loom-table th,.loom-table td{padding:2px 10px;border-bottom:1px solid #e4e4e4;"
    "text-align:left}.loom-table thead th{background:#f4f4f4}"
    ".loom-table tbody tr:nth-child(even){background:#fafafa}</style>"
)


def frame_html(df: Any, rows: int, title: str = "") -> str:
    """A bounded table with the frame's shape above it (the index only when it says
    something: a default 0..n-1 index is left out)."""
    found = frame_head(df, max(rows, 0))
    if found is None:
        raise TypeError(f"frame_html takes a DataFrame, got {type(df).__name__}")
    return head_html(found, title)


def head_html(found: FrameHead, title: str = "") -> str:
    """:func:`frame_html` of a frame's first rows (all a saved frame needs decoded)."""
    shown = found.head
    note = f" (first {len(shown)} shown)" if len(shown) < found.rows else ""
    caption = f"<b>{esc(title)}</b> · " if title else ""
    table = TABLE_STYLE + shown.to_html(
        border=0, max_cols=30, notebook=False, index=not found.plain_index, classes="loom-table"
    )
    shape = _shape_words(found.rows, found.columns)
    return (
        f'<div style="font-size:90%;color:#555">{caption}DataFrame · {shape}{note}</div>'
        f'<div style="max-height:360px;overflow:auto">{table}</div>'
    )


def records_frame(value: Any) -> Any:
    """``value`` as a DataFrame when it is one or a list of row dicts, else None."""
    if is_dataframe(value):
        return value
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        import pandas as pd

        return pd.DataFrame(value)
    return None


def preview_html(preview: Any, arguments: dict[str, Any], rows: int) -> str:
    """What exactly will be written: rows as a table, an update's changes and filter, else
    the arguments as JSON."""
    value = preview if preview is not None else arguments
    frame = records_frame(value)
    if frame is not None:
        return frame_html(frame, rows, "rows to write")
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            if str(key).startswith("_"):  # the tool's own bookkeeping, not for the reader
                continue
            item_frame = records_frame(item)
            if item_frame is not None:
                parts.append(frame_html(item_frame, rows, str(key)))
            elif isinstance(item, dict) and item and key != "error":
                cells = "".join(
                    f"<tr><td><code>{esc(str(k))}</code></td><td>{esc(to_json(v))}</td></tr>"
                    for k, v in item.items()
                )
                parts.append(f"<div><b>{esc(str(key))}</b></div><table>{cells}</table>")
            else:
                code = esc(to_json(item))
                parts.append(f"<div><b>{esc(str(key))}</b>: <code>{code}</code></div>")
        if preview is not None:
            parts.append(
                "<details><summary>arguments</summary>" + pre(to_json(arguments)) + "</details>"
            )
        return "".join(parts)
    return pre(to_json(value))


def chart_html(spec: dict[str, Any]) -> str:
    """A chart the agent drew, as a PNG in a data URI: shown offline, without JavaScript, in a
    saved or untrusted notebook. Without matplotlib, its caption and how to install it."""
    from loom_nb.charts import Chart

    chart = Chart(spec)
    try:
        image = base64.b64encode(chart.png()).decode("ascii")
    except MissingExtra as exc:
        return f'<div style="color:#555">[chart: {esc(chart.caption)}] {esc(str(exc))}</div>'
    return (
        f'<img class="loom-chart-image" src="data:image/png;base64,{image}" '
        f'alt="{esc(chart.caption)}" style="max-width:100%;height:auto">'
    )


USER_STYLE = "background:#f3f6fb;padding:4px 8px;border-radius:4px"


def user_html(text: str) -> str:
    """The user's message, escaped, in its box."""
    return (
        f'<div style="{USER_STYLE}"><b>You</b>'
        f'<div style="white-space:pre-wrap">{esc(text)}</div></div>'
    )


def failed_html(tool: str, message: str) -> str:
    """A tool call that failed, with the error the model was given."""
    return f'<div style="{ERROR_STYLE}">⚠ <b>{esc(tool)}</b> failed: {esc(message)}</div>'


def rejected_html(tool: str) -> str:
    """A call the user rejected: nothing was run or written."""
    return f"✘ <b>{esc(tool)}</b> rejected: nothing was run or written."


def markdown_html(text: str) -> str:
    """The assistant's markdown as HTML, raw HTML in it escaped (it is the model's text)."""
    return _markdown()(text)  # type: ignore[no-any-return]


@functools.cache
def _markdown() -> Any:
    import mistune

    return mistune.create_markdown(escape=True, plugins=["table", "strikethrough"])
