"""A ``chart`` call in words and as code: the code draws the same chart with matplotlib from the
variable holding the result it charts (``CodeContext.result_of``), through ``draw_chart``
(``_pyplot.py``), which an export defines once in its first cell."""

from __future__ import annotations

from typing import Any

from loom_nb._code import CodeContext, py_literal
from loom_nb._embed import embed


def chart_words(args: dict[str, Any]) -> str:
    """``bar of call_3 · x week_created_at · y total``."""
    parts = [f"{args['kind']} of {args['result']}", f"x {args['x']}"]
    if args.get("y") is not None:
        parts.append(f"y {args['y']}")
    if args.get("color") is not None:
        parts.append(f"color {args['color']}")
    return " · ".join(parts)


def chart_code(args: dict[str, Any], ctx: CodeContext) -> str | None:
    """``result_4 = draw_chart(result_3, "bar", x=..., y=...)``; None when the result it
    charts has no variable (a view that shows calls one by one)."""
    source = ctx.result_of(str(args.get("result")))
    if source is None:
        return None
    draw = embed("loom_nb.charts._pyplot", ctx)["draw_chart"]
    named = [f"x={py_literal(args['x'])}"]
    named += [
        f"{key}={py_literal(args[key])}"
        for key in ("y", "color", "title")
        if args.get(key) is not None
    ]
    # A histogram of a bins aggregate draws its counts in the aggregate's own bins: their
    # edges are in the chart's saved spec (the export's ``data`` of a chart call).
    edges = ctx.data.get("edges") if isinstance(ctx.data, dict) else None
    if args.get("kind") == "histogram" and args.get("y") is not None and edges is not None:
        named.append(f"edges={py_literal([float(e) for e in edges])}")
    return f"{ctx.result} = {draw}({source}, {py_literal(args['kind'])}, {', '.join(named)})"
