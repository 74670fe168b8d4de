"""An eval report as HTML: a summary table, one row a thread, and under it each call that
differs with its missing, extra and different rows. Thread and data text is untrusted: every
piece is escaped, and the whole passes through :func:`safe_html`."""

from __future__ import annotations

import json

from loom_nb._eval import EvalCall, EvalReport, EvalThread
from loom_nb.notebook._html import esc, frame_html, safe_html

#: Rows of each missing / extra / different frame shown under a call.
ROWS_SHOWN = 10

_CELL = 'style="padding:2px 8px;text-align:left"'


def report_html(report: EvalReport) -> str:
    """The report's summary, sanitized."""
    same = sum(t.equal for t in report.threads)
    changed = ", other instructions" if report.instructions_changed else ""
    was = ", ".join(report.kept_models) or "unknown"
    head = (
        f"<p><b>Eval of {esc(report.agent)}</b>: {esc(report.model)}{changed} (the saved "
        f"threads: {esc(was)}), writes off; {same} of {len(report.threads)} threads equal "
        f"(numbers within rel {report.rel_tol:g}, abs {report.abs_tol:g})</p>"
    )
    columns = ["thread", "equal", "calls different", "rows missing / extra / different",
               "steps", "tokens", "cost", "seconds"]  # fmt: skip
    rows = "".join(_thread_row(t) for t in report.threads)
    table = (
        "<table><thead><tr>"
        + "".join(f"<th {_CELL}>{esc(c)}</th>" for c in columns)
        + f"</tr></thead><tbody>{rows}</tbody></table>"
    )
    gone = f"<p>Not in the store any more: {esc(', '.join(report.gone))}</p>" if report.gone else ""
    details = "".join(_thread_details(t) for t in report.threads if not t.equal)
    return safe_html(f'<div class="loom-eval">{head}{table}{gone}{details}</div>')


def _thread_row(t: EvalThread) -> str:
    r = t.row()
    cells = [
        f"{esc(t.title or 'untitled')} <code>{esc(t.thread_id)}</code>",
        "✓ equal" if t.equal else "✗ differs",
        f"{r['calls_different']} of {r['calls']}",
        f"{r['missing_rows']} / {r['extra_rows']} / {r['different_rows']}",
        f"{r['kept_steps']} → {r['steps']}",
        f"{r['kept_tokens']:,} → {r['tokens']:,}",
        f"{_cost(r['kept_cost'])} → {_cost(r['cost'])}",
        f"{r['kept_seconds']:.2f} → {r['seconds']:.2f}",
    ]
    return "<tr>" + "".join(f"<td {_CELL}>{c}</td>" for c in cells) + "</tr>"


def _cost(value: float | None) -> str:
    return "price unknown" if value is None else f"${value:,.4f}"


def _thread_details(t: EvalThread) -> str:
    parts = [f"<p>{esc(t.error)}</p>"] if t.error else []
    parts += [_call_html(c) for c in t.calls if not c.equal]
    if t.final is not None and not t.final.equal:
        parts.append("<p>The last DataFrame differs.</p>")
    title = esc(t.title or t.thread_id)
    return f"<details open><summary>{title}</summary>{''.join(parts)}</details>"


def _call_html(c: EvalCall) -> str:
    args = json.dumps(c.args, ensure_ascii=False, default=str)
    line = f"<p>turn {c.turn + 1}: <code>{esc(c.tool)}({esc(args)})</code> {esc(c.status)}"
    line += f": {esc(c.note)}</p>" if c.note else "</p>"
    if c.missing_columns or c.extra_columns:
        line += (
            f"<p>columns missing: {esc(', '.join(c.missing_columns) or 'none')}; extra: "
            f"{esc(', '.join(c.extra_columns) or 'none')}</p>"
        )
    for label, frame in (
        ("missing rows", c.missing_rows),
        ("extra rows", c.extra_rows),
        ("different values", c.different_rows),
    ):
        if frame is not None and len(frame):
            line += frame_html(frame, ROWS_SHOWN, f"{label} ({len(frame)})")
    return line
