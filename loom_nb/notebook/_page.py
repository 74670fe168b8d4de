"""The widgets a view draws HTML with: each value passes :func:`~loom_nb.notebook._html.safe_html`.

ipywidgets' HTML widget sets its value as the element's ``innerHTML`` as it is, and an Output
widget renders ``text/markdown`` as trusted (JupyterLab passes its raw HTML on). So no view
shows model or data text in an Output or a plain HTML widget: every HTML widget of the views is
a :class:`SafeHTML`, which sanitizes each value it is given, at construction and on every
update (a streamed reply, a card's outcome).
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import traitlets

from loom_nb.notebook._html import PAGE_STYLE, safe_html
from loom_nb.notebook._static import hiding_style


class SafeHTML(widgets.HTML):  # type: ignore[misc]
    """An HTML widget whose every value is :func:`safe_html` of what it was given."""

    @traitlets.validate("value")
    def _sanitized(self, proposal: dict[str, Any]) -> str:
        return safe_html(proposal["value"])


def html(value: str, *classes: str) -> SafeHTML:
    """A :class:`SafeHTML` with ``value``, its DOM node carrying ``classes``."""
    return SafeHTML(value, _dom_classes=classes)  # the classes come with the widget's state


def style(key: str) -> widgets.HTML:
    """The project's stylesheet (:data:`PAGE_STYLE`, a constant with no text of the model or
    the data) and the rule that hides the static outputs of view ``key`` where the widget is
    drawn (``_static.hiding_style``): the one HTML widget that does not sanitize, since its
    ``<style>`` would go."""
    return widgets.HTML(PAGE_STYLE + hiding_style(key), _dom_classes=("loom-style",))
