"""The static form of a thread view: the outputs a notebook keeps beside the widget.

A view is displayed as two kinds of outputs. The widget's own (``application/vnd.jupyter.
widget-view+json``, and an empty ``text/plain``), which JupyterLab and Notebook 7 draw while
the kernel runs, and from saved widget state. And the static form, :class:`StaticOutputs`:
the thread as ``text/html`` (with its ``text/plain`` text), each chart a real ``image/png``
output, so every static copy reads as the thread. nbconvert prefers a widget's mime type to
any other in the same output, and draws nothing of it without a kernel: the static form is
therefore never in the widget's output.

The static HTML is *portable* (:func:`portable_parts`): only tags that nbconvert's sanitizer
(``HTMLExporter(sanitize_html=True)``, its ``clean_html`` filter) keeps, which GitHub and
nbviewer keep too, and no ``<style>`` (a sanitizer shows it as text). Any other sanitizer
drops style attributes at most. Where the widget is drawn, its stylesheet hides the static
outputs of its own view (:func:`hiding_style`, keyed by the view), so the thread shows once.

The static form is sent again when a run ends or a card is decided (``update_display``), so the
output saved with the notebook holds the thread as it is then; while its cell runs, charts
the run drew join it as new outputs. What a button changes later lives in the widget and the
store: a card still undecided in the static form says it was undecided when the output was
saved, and that ``%loom show`` draws it as it is now.
"""

from __future__ import annotations

import functools
import html as _html_lib
import io
import secrets
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from loom_nb import _words
from loom_nb._inert import inert
from loom_nb._messages import Message, PendingApproval, Thread
from loom_nb._numbers import TracedNumber
from loom_nb._tools import Tool
from loom_nb.notebook._calls import CallText
from loom_nb.notebook._html import (
    ERROR_STYLE,
    TABLE_STYLE,
    esc,
    frame_html,
    markdown_html,
    safe_html,
)
from loom_nb.notebook.history import history_html, numbers_by_id

#: Messages the static form holds at most (a resumed thread can have thousands; the widget
#: and ``%loom show`` have them all).
MESSAGES = 200


def thread_html(
    header: str,
    messages: Sequence[Message],
    cards: Sequence[tuple[int, str]],
    errors: Sequence[str],
    footer: str,
    rows: int,
    unfinished: str = "",
    calls: CallText | None = None,
    numbers: Mapping[int, Sequence[TracedNumber]] | None = None,
) -> str:
    """The thread: ``header``, the messages with each card (``(messages before it, html)``)
    in its place, a streamed reply cut short, the errors and ``footer``; ``calls`` says each
    call in words and as code. Sanitized (:func:`safe_html`) after the tables' stylesheet."""
    start = max(0, len(messages) - MESSAGES)
    parts = [header]
    if start:
        parts.append(f"<div><i>{esc(_words.earlier_messages(start))}</i></div>")
    results = {r.call_id: r for m in messages for r in m.tool_results}
    if numbers is None:  # traced over the whole thread, not a slice of it
        numbers = numbers_by_id(messages)
    at = start
    for before, card in sorted(cards, key=lambda c: c[0]):
        if before > at:
            parts.append(history_html(messages[at:before], rows, results, calls, numbers))
            at = before
        parts.append(card)
    parts.append(history_html(messages[at:], rows, results, calls, numbers))
    if unfinished:
        parts.append(
            '<div class="loom-message loom-assistant">'
            f"{markdown_html(unfinished)} <i>{esc(_words.CUT_SHORT)}</i></div>"
        )
    parts.extend(f'<div style="{ERROR_STYLE}">{esc(line)}</div>' for line in errors)
    parts.append(footer)
    # JupyterLab typesets the math in an HTML output (nbviewer too): the model's "$5 and $\\foo$"
    # would be read as TeX. MathJax skips these classes (3 and 2), so the text stays as written.
    inner = "".join(parts)
    static = f'<div class="loom-thread-static mathjax_ignore tex2jax_ignore">{inner}</div>'
    return TABLE_STYLE + safe_html(static)


def thread_text(
    title: str,
    thread_id: str | None,
    messages: Sequence[Message],
    pending: Sequence[PendingApproval],
    errors: Sequence[str],
    rows: int,
    tools: Mapping[str, Tool] | None = None,
    now: Collection[str] = (),
    numbers: Mapping[int, Sequence[TracedNumber]] | None = None,
) -> str:
    """The thread as terminal IPython prints it (each call in words and code, by ``tools``;
    the pending calls in ``now`` with their rows read again; the numbers in no result under
    their message, by ``numbers``)."""
    from loom_nb.notebook.text import TextView

    out = io.StringIO()
    view = TextView(title=title, rows=rows, out=out, tools=tools)
    view.show()
    shown = list(messages[-MESSAGES:])
    if len(shown) < len(messages):
        out.write(_words.earlier_messages(len(messages) - len(shown)) + "\n")
    if numbers is None:  # traced over all the messages, not the last ones alone
        numbers = numbers_by_id(messages)
    thread = Thread(id=thread_id or "", agent=title, messages=shown, pending=list(pending))
    view.render(thread, now=now, numbers=numbers)
    for line in errors:
        out.write(line + "\n")
    return out.getvalue().rstrip("\n")


# ---- the portable form ------------------------------------------------------------------------

#: The tags nbconvert's sanitizer keeps (bleach's defaults and the few its ``clean_html`` adds);
#: it shows any other tag as text. Not ``table``: html5lib adds the ``<tbody>`` the sanitizer
#: then shows as text, so a table is drawn as aligned text in a ``<pre>``.
PORTABLE_TAGS = frozenset(
    {"a", "abbr", "b", "blockquote", "code", "div", "em", "i", "li", "ol", "pre", "span"}
    | {"strong", "ul"}
)
#: Tags drawn as a block of their own (a paragraph, a heading's line, a fold's title).
_AS_DIV = frozenset({"p", "details", "summary", "h1", "h2", "h3", "h4", "h5", "h6"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_VOID = frozenset({"br", "hr", "img"})
_ATTRIBUTES = frozenset({"class", "style", "title"})
#: The classes the static form keeps: not the views' own (``loom-approval``, ...), so that a
#: page finds each thing once, in the widget, where the static form is hidden beside it.
_CLASSES = frozenset({"loom-thread-static", "loom-table-text", "mathjax_ignore", "tex2jax_ignore"})
_PNG_SRC = "data:image/png;base64,"


@dataclass(frozen=True)
class ChartImage:
    """A chart of the thread, as an ``image/png`` output: its PNG (base64) and its caption."""

    png: str
    caption: str


class _Portable(HTMLParser):
    """Rewrites :func:`safe_html`'s output to :data:`PORTABLE_TAGS`, cut at each chart."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str | ChartImage] = []
        self._out: list[str] = []
        self._open: list[tuple[str, str, str]] = []  # (tag, what opened it, what closes it)
        self._skip = 0  # inside <style> or <script>: dropped with its text
        self._rows: list[list[str]] | None = None  # inside a table: its cells' text
        self._tables = 0  # tables open (one inside another reads as more rows)
        self._hidden = 0  # inside a closed fold: the folds open there, this one included
        self._call: str | None = None  # "summary": in a call's title; "body": in its body

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self._skip += 1
            return
        if self._skip:
            return
        kept = {k: v or "" for k, v in attrs}
        if self._hidden:
            self._hidden += tag == "details"
            return
        if tag == "details" and "open" not in kept:  # what a person would have to unfold
            if "loom-tool-call" not in kept.get("class", "").split():
                self._hidden = 1
                return
            self._call = "summary"  # a call: its title, the call in words, and not its body
        if tag == "table":
            self._tables += 1
            self._rows = self._rows if self._rows is not None else []
            return
        if self._rows is not None:
            if tag == "tr":
                self._rows.append([])
            elif tag in ("td", "th"):
                if not self._rows:
                    self._rows.append([])
                self._rows[-1].append("")
            return
        if tag == "img":
            src = kept.get("src", "")
            if src.startswith(_PNG_SRC):
                self._chart(ChartImage(src[len(_PNG_SRC) :], kept.get("alt", "chart")))
            else:
                self._out.append(esc(f"[image: {kept.get('alt', '')}]"))
            return
        if tag == "br":
            self._out.append("<div></div>")
            return
        if tag == "hr":
            self._out.append("<div>———</div>")
            return
        name = tag if tag in PORTABLE_TAGS else "div" if tag in _AS_DIV else "span"  # del
        if "class" in kept:
            kept["class"] = " ".join(c for c in kept["class"].split() if c in _CLASSES)
        shown = "".join(
            f' {k}="{esc(v)}"'
            for k, v in kept.items()
            if (k in _ATTRIBUTES or (k, name) == ("href", "a")) and v
        )
        opener = f"<{name}{shown}>" + ("<b>" if tag in _HEADINGS else "")
        closer = ("</b>" if tag in _HEADINGS else "") + f"</{name}>"
        self._open.append((tag, opener, closer))
        self._out.append(opener)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self._skip = max(0, self._skip - 1)
            return
        if self._skip or tag in _VOID:
            return
        if self._hidden:
            self._hidden -= tag == "details"
            if self._hidden or self._call != "body":
                return
            self._call = None  # the call's fold ends: closed below
        if tag == "summary" and self._call == "summary":
            self._call = "body"
            self._close(tag)
            self._hidden = 1
            return
        if tag == "table" and self._rows is not None:
            self._tables -= 1
            if not self._tables:
                self._out.append(_table_text(self._rows))
                self._rows = None
            return
        if self._rows is not None:
            return
        self._close(tag)

    def _close(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):  # safe_html's output is well nested
            if self._open[i][0] == tag:
                for _, _, closer in reversed(self._open[i:]):
                    self._out.append(closer)
                del self._open[i:]
                return

    def handle_data(self, data: str) -> None:
        if self._skip or self._hidden:
            return
        if self._rows is not None:
            if self._rows and self._rows[-1]:
                self._rows[-1][-1] += data
            return
        self._out.append(_html_lib.escape(data, quote=False))

    def _chart(self, chart: ChartImage) -> None:
        self._out.extend(closer for _, _, closer in reversed(self._open))
        self.parts.append("".join(self._out))
        self.parts.append(chart)
        self._out = [opener for _, opener, _ in self._open]

    def result(self) -> list[str | ChartImage]:
        self.close()
        self._out.extend(closer for _, _, closer in reversed(self._open))
        return [*self.parts, "".join(self._out)]


def _table_text(rows: list[list[str]]) -> str:
    """A table's cells as aligned text (numbers to the right), as pandas prints a frame."""
    cells = [[" ".join(c.split()) for c in row] for row in rows if row]
    if not cells:
        return ""
    width = max(len(r) for r in cells)
    cells = [r + [""] * (width - len(r)) for r in cells]
    sizes = [max(len(r[i]) for r in cells) for i in range(width)]

    def line(row: list[str]) -> str:
        return "  ".join(
            c.rjust(n) if _numeric(c) else c.ljust(n) for c, n in zip(row, sizes, strict=True)
        ).rstrip()

    text = "\n".join(line(r) for r in cells)
    return f'<pre class="loom-table-text">{_html_lib.escape(text, quote=False)}</pre>'


def _numeric(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def portable_parts(fragment: str) -> list[str | ChartImage]:
    """``fragment`` (HTML as :func:`safe_html` gives it, a stylesheet before it at most) as
    portable HTML cut at each chart: ``[html, chart, html, chart, html]``. A table is its
    cells as aligned text, a paragraph or heading a block; a closed fold goes (a call keeps
    its title: the call in words), and so does a ``<style>``. Each piece passes
    :func:`safe_html` again."""
    parser = _Portable()
    parser.feed(fragment)
    return [p if isinstance(p, ChartImage) else safe_html(p) for p in parser.result()]


def shown_frame(df: Any) -> Any:
    """``df`` as a DataFrame still (every pandas operation on it gives a plain one), whose
    ``text/html`` is the portable form of :func:`frame_html` of all its rows: pandas' own HTML
    carries a ``<style>`` and table tags that a sanitizing static copy shows as text."""
    return _shown_frame_type()(df)


@functools.cache
def _shown_frame_type() -> Any:
    import pandas as pd

    class ShownFrame(pd.DataFrame):  # type: ignore[misc]  # pandas has no stubs here
        def _repr_html_(self) -> str:
            parts = portable_parts(safe_html(frame_html(self, len(self))))
            return "".join(p for p in parts if isinstance(p, str))  # a frame draws no chart

        def __repr__(self) -> str:  # text/plain: a terminal's, and a front end's ANSI colours
            return inert(super().__repr__())

    return ShownFrame


def hiding_style(key: str) -> str:
    """The CSS a view's widget carries: where the widget is drawn (a live kernel, saved widget
    state), the static outputs of the same view (:class:`StaticOutputs` with ``key``) hide,
    the chart images after their captions too, in JupyterLab, Notebook 7 and nbconvert's
    templates (``jp-OutputArea-child``) and the classic notebook (``output_area``)."""
    if not key.isalnum():
        raise ValueError(f"a view's key is letters and digits, got {key!r}")
    mine = f".loom-static-{key}"
    caption = f".loom-chart-caption{mine}"
    rules = []
    for area, image in (("jp-OutputArea-child", "jp-RenderedImage"), ("output_area", "output_png")):
        rules.append(f".{area}:has({mine})")
        rules.append(f".{area}:has({caption})+.{area}:has(.{image})")
    return "<style>" + ",".join(rules) + "{display:none!important}</style>"


def new_key() -> str:
    """A key that ties a view's widget to its static outputs."""
    return secrets.token_hex(6)


def _here() -> tuple[int, Any]:
    """Where the code runs: its thread, and the cell IPython counts (None outside IPython)."""
    from IPython import get_ipython

    shell = get_ipython()  # type: ignore[no-untyped-call]
    return threading.get_ident(), getattr(shell, "execution_count", None)


class StaticOutputs:
    """The static form of one view in the cell's outputs: its HTML pieces (the first with the
    thread as text), and before each chart image a caption. Shown once; each :meth:`refresh`
    updates them, and while the cell that showed them runs, adds the outputs of new charts.
    Later (a click, another cell) a chart that has no output yet is named by its caption."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._pieces: list[Any] = []  # display handles of the HTML pieces
        self._charts = 0  # charts shown as images
        self._where: tuple[int, Any] | None = None

    def show(self, fragment: str, text: str) -> None:
        """Display the first piece (the thread so far); :meth:`refresh` adds the charts."""
        from IPython.display import display

        self._where = _here()
        first = display(self._html(fragment, text), raw=True, display_id=True)  # type: ignore[no-untyped-call]
        self._pieces = [first]
        self.refresh(fragment, text)

    def bundles(self, fragment: str, text: str, charts: int | None = None) -> list[dict[str, Any]]:
        """The mime bundles of the static form, with at most ``charts`` charts as images (the
        others named in the last HTML piece)."""
        parts = portable_parts(fragment)
        found = [p for p in parts if isinstance(p, ChartImage)]
        shown = len(found) if charts is None else min(charts, len(found))
        pieces: list[str] = [""]
        out: list[dict[str, Any]] = []
        images: list[ChartImage] = []
        for part in parts:
            if isinstance(part, ChartImage):
                if len(images) < shown:
                    images.append(part)
                    pieces.append("")
                else:
                    pieces[-1] += self._caption(part, later=True)
            else:
                pieces[-1] += part
        out.append(self._html(pieces[0], text))
        for image, piece in zip(images, pieces[1:], strict=True):
            out.append(self._html(self._caption(image), ""))
            out.append({"image/png": image.png, "text/plain": f"[chart: {image.caption}]"})
            out.append(self._html(piece, ""))
        return out

    def refresh(self, fragment: str, text: str) -> None:
        """Send the static form again; add the outputs of new charts while its cell runs."""
        if not self._pieces:
            return
        from IPython.display import display

        adding = self._where == _here()
        bundles = self.bundles(fragment, text, None if adding else self._charts)
        self._pieces[0].update(bundles[0], raw=True)
        for n, at in enumerate(range(1, len(bundles), 3)):
            caption, image, piece = bundles[at : at + 3]
            if n < self._charts:
                self._pieces[n + 1].update(piece, raw=True)
                continue
            display(caption, raw=True)  # type: ignore[no-untyped-call]
            display(image, raw=True)  # type: ignore[no-untyped-call]
            self._pieces.append(display(piece, raw=True, display_id=True))  # type: ignore[no-untyped-call]
            self._charts += 1

    def _html(self, inner: str, text: str) -> dict[str, str]:
        # every output MathJax skips, the captions between the charts too (see static_html)
        classes = f"loom-static loom-static-{self.key} mathjax_ignore tex2jax_ignore"
        body = f'<div class="{classes}">{inner}</div>'
        return {"text/html": safe_html(body), "text/plain": text}

    def _caption(self, chart: ChartImage, *, later: bool = False) -> str:
        said = f"chart: {chart.caption}"
        if later:
            said += " (drawn after this output was saved: see %loom show)"
            return f"<div><i>{esc(said)}</i></div>"
        return f'<div class="loom-chart-caption loom-static-{self.key}"><i>{esc(said)}</i></div>'
