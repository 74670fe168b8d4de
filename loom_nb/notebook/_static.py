"""The static form of a thread view: HTML and text beside the widget, in the same output.

A view is displayed as one mime bundle: the widget (``application/vnd.jupyter.widget-view+json``),
this HTML (``text/html``) and this text (``text/plain``). JupyterLab and Notebook 7 draw the
widget when the output is trusted (its renderer ranks first but is not "safe"); an untrusted
notebook, GitHub, nbviewer and nbconvert without widget state draw the HTML; a terminal or a
plain-text export the text. The HTML never shows buttons: a card reads "waiting for approval —
run ``%loom approvals`` to decide".

The HTML is sent again when a run ends (``update_display``), so the output saved with the
notebook holds the final thread. JupyterLab applies such updates while the displaying cell runs;
what a button changes later lives in the widget (and in the store: ``%loom show`` draws it).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

from loom_nb import _words
from loom_nb._messages import Message, PendingApproval, Thread
from loom_nb._tools import Tool
from loom_nb.notebook._calls import CallText
from loom_nb.notebook._html import ERROR_STYLE, TABLE_STYLE, esc, markdown_html, safe_html
from loom_nb.notebook.history import history_html

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
) -> str:
    """The thread: ``header``, the messages with each card (``(messages before it, html)``)
    in its place, a streamed reply cut short, the errors and ``footer``; ``calls`` says each
    call in words and as code. Sanitized (:func:`safe_html`) after the tables' stylesheet."""
    start = max(0, len(messages) - MESSAGES)
    parts = [header]
    if start:
        parts.append(f"<div><i>{esc(_words.earlier_messages(start))}</i></div>")
    results = {r.call_id: r for m in messages for r in m.tool_results}
    at = start
    for before, card in sorted(cards, key=lambda c: c[0]):
        if before > at:
            parts.append(history_html(messages[at:before], rows, results, calls))
            at = before
        parts.append(card)
    parts.append(history_html(messages[at:], rows, results, calls))
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
) -> str:
    """The thread as terminal IPython prints it (each call in words and code, by ``tools``)."""
    from loom_nb.notebook.text import TextView

    out = io.StringIO()
    view = TextView(title=title, rows=rows, out=out, tools=tools)
    view.show()
    shown = list(messages[-MESSAGES:])
    if len(shown) < len(messages):
        out.write(_words.earlier_messages(len(messages) - len(shown)) + "\n")
    thread = Thread(id=thread_id or "", agent=title, messages=shown, pending=list(pending))
    view.render(thread)
    for line in errors:
        out.write(line + "\n")
    return out.getvalue().rstrip("\n")
