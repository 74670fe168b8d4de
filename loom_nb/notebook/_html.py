"""Small HTML pieces shared by the widgets: escaped text, JSON, bounded DataFrame tables, and
:func:`safe_html`, the one door from loom_nb to the page.

What the model and the data write (replies, streamed text, tool arguments, cell values, column
and category names, titles, errors) is untrusted: a reply holding ``<img onerror=...>`` must not
be able to click Approve. Text enters HTML escaped (:func:`esc`, pandas' own escaping) or as
markdown (:func:`markdown_html`, raw HTML in it escaped), and every HTML string a view puts on
the page (each HTML widget's value, each ``text/html`` output) then passes :func:`safe_html`:
Ammonia's sanitizer (``nh3``) with an allowlist of the tags, attributes and CSS properties the
views draw. No event handler, script, iframe, form, svg or style element, no ``javascript:``
URL, no ``data:`` URL but a PNG image (the charts the project draws) gets through. The
project's own stylesheet (:data:`PAGE_STYLE`, a constant) is the one HTML that does not pass it.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loom_nb import _words
from loom_nb._codec import FrameHead, encode, frame_head, is_dataframe
from loom_nb._counts import counts_text
from loom_nb._errors import MissingExtra
from loom_nb._numbers import TracedNumber, numbers_in_chunk
from loom_nb._tables.filter_text import shown_text, unseen
from loom_nb._tables.update_preview import EFFECT, ROWS_MATCHED

ERROR_STYLE = (
    "border-left:4px solid #d32f2f;background:#fdecea;color:#8b1a1a;"
    "padding:4px 8px;margin:4px 0;white-space:pre-wrap"
)


#: What a card says where its buttons cannot work: a saved notebook, a restarted kernel.
WAITING_HTML = html.escape(_words.DECIDE_ELSEWHERE).replace(
    "%loom approvals", "<code>%loom approvals</code>"
)

#: What an undecided card says in the static form (a saved output cannot know what came after).
SAVED_HTML = (
    "undecided when this output was saved. Decided after this output was saved? See "
    "<code>%loom show</code>. To decide it, run <code>%loom approvals</code>."
)

#: Widgets whose kernel is gone (Kernel → Restart, a notebook opened later) get ipywidgets'
#: ``jupyter-widgets-disconnected`` class. Then a card shows how to decide instead of buttons
#: that reach nobody, the chat hides its input, and the broken-link icon on every widget
#: gives way to one line in the header.
OFFLINE_STYLE = (
    "<style>.loom-thread.jupyter-widgets-disconnected::before,"
    ".loom-thread .jupyter-widgets-disconnected::before,"
    ".loom-chat.jupyter-widgets-disconnected::before{content:none!important;"
    "display:none!important}"
    ".loom-offline,.loom-chat-offline,.loom-gone{display:none!important}"
    ".loom-approval.loom-undecided.jupyter-widgets-disconnected .loom-offline,"
    ".loom-chat.jupyter-widgets-disconnected .loom-chat-offline{display:block!important}"
    ".loom-approval.jupyter-widgets-disconnected .loom-buttons,"
    ".loom-thread.jupyter-widgets-disconnected .loom-running,"
    ".loom-chat.jupyter-widgets-disconnected .loom-chat-box{display:none!important}"
    ".loom-thread.jupyter-widgets-disconnected .loom-gone{display:inline!important}</style>"
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


# pandas' own table, as JupyterLab draws it (its rules for rendered HTML, with its colours),
# scoped to our tables: JupyterLab's stylesheet does not reach the HTML inside a widget.
TABLE_STYLE = (
    "<style>.loom-table table.dataframe{border-collapse:collapse;border-spacing:0;border:none;"
    "font-size:var(--jp-ui-font-size1,13px);color:var(--jp-ui-font-color1,#000);"
    "table-layout:fixed;margin:2px 0 4px 0}"
    ".loom-table table.dataframe thead{border-bottom:var(--jp-border-width,1px) solid "
    "var(--jp-border-color1,#bdbdbd);vertical-align:bottom}"
    ".loom-table table.dataframe td,.loom-table table.dataframe th,"
    ".loom-table table.dataframe tr{text-align:right;vertical-align:middle;padding:0.5em;"
    "line-height:normal;white-space:normal;max-width:none;border:none}"
    ".loom-table table.dataframe th{font-weight:bold}"
    ".loom-table table.dataframe tbody tr:nth-child(odd){background:var(--jp-layout-color0,#fff)}"
    ".loom-table table.dataframe tbody tr:nth-child(even)"
    "{background:var(--jp-rendermime-table-row-background,#f5f5f5)}"
    ".loom-table table.dataframe tbody tr:hover"
    "{background:var(--jp-rendermime-table-row-hover-background,#e1f5fe)}</style>"
)

#: The project's stylesheet, a constant: drawn once per thread (its widget and its static form).
PAGE_STYLE = OFFLINE_STYLE + TABLE_STYLE


def frame_html(df: Any, rows: int, title: str = "") -> str:
    """The frame's first ``rows`` rows as pandas draws a DataFrame (its index included), the
    shape above, "… N more rows" below. Every shown row is visible: no scroll box."""
    found = frame_head(df, max(rows, 0))
    if found is None:
        raise TypeError(f"frame_html takes a DataFrame, got {type(df).__name__}")
    return head_html(found, title)


def head_html(found: FrameHead, title: str = "") -> str:
    """:func:`frame_html` of a frame's first rows (all a saved frame needs decoded)."""
    shown = found.head
    more = found.rows - len(shown)
    caption = f"<b>{esc(title)}</b> · " if title else ""
    table = shown.to_html(max_cols=30)  # escapes every label and value
    footer = (
        f'<div class="loom-more" style="color:#555;font-size:90%">{_words.more_rows(more)}</div>'
        if more > 0
        else ""
    )
    said = ""
    if found.counts is not None:  # what the call matched: "50 of 53 groups (frame_rows=...)"
        said = f" · {esc(counts_text(found.counts))}"
    return (
        f'<div style="font-size:90%;color:#555">{caption}DataFrame · '
        f"{_words.shape(found.rows, found.columns)}{said}</div>"
        f'<div class="loom-table" style="overflow-x:auto">{table}</div>{footer}'
    )


#: Keys a tool's preview may carry besides what it shows: a sentence for the card before the
#: decision (``note``) and one for after the call ran (``after``), e.g. where the change lives.
NOTE, AFTER = "note", "after"
NOTE_STYLE = "background:#fff8e1;border-left:4px solid #f0ad4e;padding:2px 8px;margin:2px 0"


def preview_note(preview: Any, key: str) -> str | None:
    """The preview's ``note`` or ``after`` sentence, if it has one."""
    found = preview.get(key) if isinstance(preview, dict) else None
    return found if isinstance(found, str) else None


def records_frame(value: Any) -> Any:
    """``value`` as a DataFrame when it is one or a list of row dicts, else None."""
    if is_dataframe(value):
        return value
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        import pandas as pd

        return pd.DataFrame(value)
    return None


def card_values(value: Any) -> Any:
    """``value`` as an approval card shows it: every text in it (in dicts, lists and
    DataFrame cells) through :func:`shown_text`, so a line break or a right-to-left override
    in a value to be written reads as what it is, not as what it would look like."""
    if isinstance(value, str):
        return shown_text(value)
    if isinstance(value, dict):
        return {k: card_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [card_values(v) for v in value]
    if is_dataframe(value):
        return _frame_values(value)
    return value


def _frame_values(df: Any) -> Any:
    import pandas as pd

    types = pd.api.types
    shown = None
    for i in range(df.shape[1]):
        column = df.iloc[:, i]
        kind = column.dtype
        holds_text = types.is_object_dtype(kind) or types.is_string_dtype(kind)
        if not (holds_text or isinstance(kind, pd.CategoricalDtype)):
            continue
        texts = column.map(lambda v: shown_text(v) if isinstance(v, str) else v)
        if not texts.equals(column):
            if shown is None:
                shown = df.copy()
            shown.isetitem(i, texts)
    return df if shown is None else shown


def exact_json(value: Any) -> str:
    """:func:`to_json`, with every character that would not show escaped (``\\u202e``)."""
    return "".join(
        ch if ch == "\n" or not unseen(ch) else _json_escape(ch) for ch in to_json(value)
    )


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a surrogate pair, as JSON writes characters past U+FFFF
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


@dataclass
class CardPart:
    """One line of an approval card: a sentence, or a label (in words) with its value as
    text or as a table. The widget card and the text view draw the same parts."""

    label: str = ""
    sentence: str = ""
    text: str = ""
    #: A table: rows (a DataFrame drawn with its index), or one row of values (without).
    frame: Any = None
    index: bool = True
    #: The preview's own note ("ℹ ..."), drawn apart.
    note: bool = False


def card_parts(preview: Any, arguments: dict[str, Any]) -> list[CardPart]:
    """What a card says, in order: the preview (else the arguments), each key as a label in
    words, each value as the table would show it (no JSON quoting); a sentence (the effect,
    a note, an error) stands alone. Texts show as :func:`card_values` writes them."""
    value = card_values(preview if preview is not None else arguments)
    frame = records_frame(value)
    if frame is not None:
        return [CardPart("Rows to write", frame=frame)]
    if not isinstance(value, dict):
        if isinstance(value, str):
            return [CardPart(sentence=_sentence(value))]
        return [CardPart(text=value_text(value))]
    parts = []
    if isinstance(value.get(NOTE), str):
        parts.append(CardPart(sentence=value[NOTE], note=True))
    said = isinstance(value.get(EFFECT), str)  # the sentence says how many rows match
    for key, item in value.items():
        if key in (NOTE, AFTER) or str(key).startswith("_") or (said and key == ROWS_MATCHED):
            continue
        item_frame = records_frame(item)
        if key in (EFFECT, "error") and isinstance(item, str):
            parts.append(CardPart(sentence=_sentence(item)))
        elif item_frame is not None:
            parts.append(CardPart(_words.label(str(key)), frame=item_frame))
        elif isinstance(item, dict) and item:
            import pandas as pd

            row = pd.DataFrame([{str(k): v for k, v in item.items()}])
            parts.append(CardPart(_words.label(str(key)), frame=row, index=False))
        else:
            parts.append(CardPart(_words.label(str(key)), text=value_text(item)))
    return parts


def _sentence(text: str) -> str:
    """``text`` as a sentence: a capital first letter, a full stop at the end."""
    text = text.strip()
    if not text:
        return text
    return text[0].upper() + text[1:] + ("" if text[-1] in ".!?…" else ".")


def value_text(value: Any) -> str:
    """A value on a card as a table cell shows it: texts and numbers as they are, a list as
    its items; JSON only for what has no plainer form (nested lists and dicts)."""
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict | list):
        return to_json(value)
    return str(value)


def preview_html(preview: Any, arguments: dict[str, Any], rows: int) -> str:
    """What exactly will be written, as :func:`card_parts` says it; with a preview, the
    exact arguments folded below (JSON, so an unseen character reads as its escape)."""
    parts = []
    for part in card_parts(preview, arguments):
        if part.note:
            note = esc(part.sentence)
            parts.append(f'<div class="loom-note" style="{NOTE_STYLE}">ℹ {note}</div>')
        elif part.sentence:
            parts.append(f'<div class="loom-card-sentence">{esc(part.sentence)}</div>')
        elif part.frame is not None and part.index:
            parts.append(frame_html(part.frame, rows, part.label))
        elif part.frame is not None:
            table = part.frame.to_html(index=False)  # escapes every label and value
            parts.append(
                f'<div style="font-size:90%;color:#555"><b>{esc(part.label)}</b></div>'
                f'<div class="loom-table">{table}</div>'
            )
        else:
            parts.append(f"<div><b>{esc(part.label)}</b>: {esc(part.text)}</div>")
    if preview is not None:
        parts.append(
            "<details><summary>arguments</summary>" + pre(exact_json(arguments)) + "</details>"
        )
    return "".join(parts)


def chart_html(spec: dict[str, Any]) -> str:
    """A chart the agent drew, as a PNG in a data URI: shown offline, without JavaScript, in a
    saved or untrusted notebook. Without matplotlib, its caption and how to install it."""
    from loom_nb.charts import Chart

    chart = Chart(spec)
    try:
        image = base64.b64encode(chart.png()).decode("ascii")
    except MissingExtra as exc:
        return f'<div style="color:#555">[chart: {esc(chart.caption)}] {esc(str(exc))}</div>'
    except Exception as exc:  # a chart saved by an older loom_nb that matplotlib cannot draw
        said = f"could not be drawn ({type(exc).__name__}: {exc})"
        return f'<div style="color:#555">[chart: {esc(chart.caption)}] {esc(said)}</div>'
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


def failed_html(tool: str, message: str, traceback: str | None = None) -> str:
    """A tool call that failed, with the error the model was given, and where the user's code
    raised it (folded) when this kernel saw it."""
    failed = f"{_words.FAILED} {message}"
    return (
        f'<div style="{ERROR_STYLE}">⚠ <b>{esc(tool)}</b> {esc(failed)}'
        f"{traceback_html(traceback)}</div>"
    )


def traceback_html(traceback: str | None) -> str:
    """A traceback folded under "traceback" (empty without one)."""
    if not traceback:
        return ""
    return (
        '<details class="loom-traceback"><summary>traceback</summary>'
        f'<pre style="white-space: pre-wrap; margin: 0">{esc(traceback)}</pre></details>'
    )


def interrupted_html(text: str) -> str:
    """Where a run of the thread was interrupted (the thread's record of it)."""
    return f'<div style="color:#8b1a1a">⏹ <i>{esc(text)}</i></div>'


def rejected_html(tool: str) -> str:
    """A call the user rejected (:data:`~loom_nb._words.REJECTED`)."""
    return f"✘ <b>{esc(tool)}</b> {esc(_words.REJECTED)}"


def markdown_html(text: str, numbers: Sequence[TracedNumber] = ()) -> str:
    """The model's markdown as HTML, for the page: tables, code, lists and links render; raw
    HTML in it is escaped; links go only to http(s) and mailto; an image it names is a link,
    never loaded (showing a reply must not send anything anywhere); then :func:`safe_html`.

    With ``numbers`` (the text's, from ``trace_numbers``), each number in no result is marked
    "in no result" where the text states it, and a fold under the text says where each other
    one came from."""
    if not numbers:
        return safe_html(_markdown()(text))
    missing = [n for n in numbers if n.rule is None]
    drawn = _marking_markdown(missing)(text) if missing else _markdown()(text)
    return safe_html(drawn + numbers_fold(numbers))


def numbers_fold(numbers: Sequence[TracedNumber]) -> str:
    """A fold that lists where each traced number came from ("" when none matched)."""
    matched = [n for n in numbers if n.rule is not None]
    if not matched:
        return ""
    rows = "".join(f"<li><code>{esc(n.text)}</code>: {esc(n.source)}</li>" for n in matched)
    said = f"{len(matched)} number{'s' if len(matched) != 1 else ''} traced to the results"
    return (
        f'<details class="loom-numbers" style="font-size:85%;color:#666">'
        f"<summary>{esc(said)}</summary><ul>{rows}</ul></details>"
    )


#: How a number in no result is drawn, and the words after it.
UNMATCHED_STYLE = "border-bottom:2px dotted #d32f2f;color:#8b1a1a"
NO_RESULT_STYLE = "color:#d32f2f;font-size:85%"


def number_html(number: TracedNumber) -> str:
    """One traced number: marked when in no result, else titled with where it came from."""
    shown = esc(number.text)
    if number.rule is None:
        return (
            f'<span class="loom-number loom-unmatched" title="{esc(number.source)}" '
            f'style="{UNMATCHED_STYLE}">{shown}</span>'
            f'<span class="loom-no-result" style="{NO_RESULT_STYLE}"> ({esc(number.source)})</span>'
        )
    return f'<span class="loom-number" title="{esc(number.source)}">{shown}</span>'


def _marking_markdown(numbers: list[TracedNumber]) -> Any:
    """A markdown renderer that draws each of ``numbers`` (in the order the text states them)
    with :func:`number_html` where its text chunk holds it."""
    import mistune

    class Renderer(mistune.HTMLRenderer):  # type: ignore[misc]
        SAFE_PROTOCOLS = ("http:", "https:", "mailto:")
        GOOD_DATA_PROTOCOLS = ()

        def image(self, text: str, url: str, title: str | None = None) -> str:
            return self.link(f"image: {text}", url, title)  # type: ignore[no-any-return]

        def text(self, text: str) -> str:
            parts: list[str] = []
            at = 0
            for start, end, number in numbers_in_chunk(text, numbers):
                parts.append(esc(text[at:start]))
                parts.append(number_html(number))
                at = end
            parts.append(esc(text[at:]))
            return "".join(parts)

    return mistune.create_markdown(
        escape=True, renderer=Renderer(escape=True), plugins=["table", "strikethrough"]
    )


@functools.cache
def _markdown() -> Any:
    import mistune

    class Renderer(mistune.HTMLRenderer):  # type: ignore[misc]
        SAFE_PROTOCOLS = ("http:", "https:", "mailto:")
        GOOD_DATA_PROTOCOLS = ()

        def image(self, text: str, url: str, title: str | None = None) -> str:
            return self.link(f"image: {text}", url, title)  # type: ignore[no-any-return]

    return mistune.create_markdown(
        escape=True, renderer=Renderer(escape=True), plugins=["table", "strikethrough"]
    )


def safe_html(fragment: str) -> str:
    """``fragment`` as the page may show it: sanitized by Ammonia (``nh3``) to the tags,
    attributes, URLs and CSS properties loom_nb's views draw. Every HTML widget's value and
    every ``text/html`` output of a view passes here (see the module's docstring)."""
    return _cleaner().clean(fragment)  # type: ignore[no-any-return]


#: What the views draw: markdown's tags, pandas' tables, folded calls, cards.
_TAGS = {
    "a", "b", "blockquote", "br", "code", "del", "details", "div", "em", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "i", "img", "li", "ol", "p", "pre", "s", "span", "strong",
    "summary", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
#: Removed with their content (the others outside _TAGS are removed, their text kept).
_DROPPED = {
    "script", "style", "iframe", "frame", "frameset", "object", "embed", "svg", "math",
    "template", "noscript", "form", "select", "textarea", "button", "audio", "video",
}  # fmt: skip
_ATTRIBUTES = {
    "*": {"class", "style", "title"},
    "a": {"href"},
    "img": {"src", "alt"},
    "details": {"open"},
    "table": {"border"},
    "td": {"align", "colspan", "rowspan"},
    "th": {"align", "colspan", "rowspan"},
    "ol": {"start"},
}
#: CSS the views' own style attributes use; nothing that could lay one thing over another.
_CSS = {
    "background", "border", "border-left", "border-radius", "color", "font-size", "height",
    "margin", "max-width", "overflow-x", "padding", "text-align", "white-space",
}  # fmt: skip
#: The one data URL the page may hold: a chart's PNG, drawn by loom_nb.charts.
_PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]*")
_URL_ATTRIBUTES = {"href", "src"}


def _only_png_data(tag: str, attribute: str, value: str) -> str | None:
    if attribute not in _URL_ATTRIBUTES:
        return value
    # as a browser reads a URL: control characters and spaces dropped, scheme in any case
    bare = "".join(ch for ch in value if ord(ch) > 0x20).lower()
    if not bare.startswith("data:"):
        return value
    return value if tag == "img" and attribute == "src" and _PNG.fullmatch(value) else None


@functools.cache
def _cleaner() -> Any:
    import nh3

    return nh3.Cleaner(
        tags=_TAGS,
        clean_content_tags=_DROPPED,
        attributes=_ATTRIBUTES,
        attribute_filter=_only_png_data,
        url_schemes={"http", "https", "mailto", "data"},  # data: narrowed by _only_png_data
        url_relative="deny",  # nothing on the page points into the Jupyter server
        filter_style_properties=_CSS,
    )
