"""The composition root: the one core module that names loom_nb's integrations.

The rest of the core is written against contracts (the ``Store`` protocol, a chart's drawing,
the magics' entry) and never imports an integration package. What fills a contract in when
the user leaves it out or names it by a string is chosen here: the store ``LOOM_STORE`` names,
the model adapter a ``"provider:model"`` string names, the drawing of a saved chart, the
``%load_ext`` entry. Each integration is imported inside the function that needs
it, so importing this module imports none of them, and the core can reach this module from
anywhere without a cycle. ``tests/test_imports.py`` names this module and what it may import.

It imports no core module either, so its answers are typed ``Any`` here and by their contract
where the core receives them (``Store`` in ``_store.store_from_env``, ``Model`` in
``models.resolve_model``, ``ChartDrawing`` in ``_chart.Chart``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def open_store(kind: str, target: str) -> Any:
    """The store ``store_from_env`` chose: ``postgres_store(target)`` for ``"postgresql"``,
    else ``sqlite_store(target)``."""
    if kind == "postgresql":
        from loom_nb.postgres import postgres_store

        return postgres_store(target)
    from loom_nb.sqlite import sqlite_store

    return sqlite_store(target)


def default_sqlite_path() -> str:
    """Where ``sqlite_store()`` keeps threads when given no path (``.loom/loom.db``)."""
    from loom_nb.sqlite import DEFAULT_PATH

    return DEFAULT_PATH


#: The providers a model string may name (``"openai:gpt-4.1-mini"``).
MODEL_PROVIDERS = ("anthropic", "ollama", "openai")


def model_adapter(provider: str, name: str) -> Any:
    """The adapter ``resolve_model`` chose: ``anthropic:`` in ``models.anthropic``, ``openai:``
    and ``ollama:`` (an OpenAI-compatible local server) in ``models.openai``."""
    if provider == "anthropic":
        from loom_nb.models.anthropic import AnthropicModel

        return AnthropicModel(name)
    from loom_nb.models.openai import OpenAIModel, ollama

    return ollama(name) if provider == "ollama" else OpenAIModel(name)


def chart_drawing(spec: Mapping[str, Any], data: Any) -> Any:
    """The drawing of a saved chart (its plan, caption, matplotlib figure and PNG)."""
    from loom_nb.charts._chart import drawing

    return drawing(spec, data)


def eval_html(report: Any) -> str:
    """An eval report's HTML summary (``EvalReport._repr_html_``), drawn by the notebook's
    one renderer."""
    from loom_nb.notebook._evals import report_html

    return report_html(report)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext loom_nb``: registers the ``%loom`` magics."""
    from loom_nb.notebook import load_ipython_extension as load

    load(ipython)
