"""``%loom eval [SUITE] [--model MODEL] [--instructions NAME] [--agent AGENT]``: replay an
eval suite and show the report; ``%loom eval add ID ... [--suite NAME]``: mark saved threads
as a suite. The work is ``agent.eval`` / ``agent.add_eval``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError

from loom_nb._eval import DEFAULT_SUITE
from loom_nb.models import Model
from loom_nb.notebook.session import Session, usage_errors


def run(session: Session, words: list[str] | None, options: Mapping[str, str]) -> Any:
    """Mark threads (``add ID ...``), or replay a suite and return its report (shown as its
    HTML summary)."""
    words = list(words or [])
    if words and words[0] == "add":
        return _add(session, words[1:], options)
    if "--suite" in options:
        raise UsageError("%loom eval: --suite goes with add; run a suite with %loom eval SUITE")
    if len(words) > 1:
        raise UsageError(f"%loom eval runs one suite at a time, got {' '.join(words)!r}")
    agent = session.agent(options.get("--agent"))
    with usage_errors():
        return agent.eval(
            suite=words[0] if words else DEFAULT_SUITE,
            model=_model(session, options.get("--model")),
            instructions=_instructions(session, options.get("--instructions")),
            context=session.context(),
        )


def _add(session: Session, ids: list[str], options: Mapping[str, str]) -> None:
    if not ids:
        raise UsageError("%loom eval add ID [ID ...]: name the saved threads to mark")
    for flag in ("--model", "--instructions"):
        if flag in options:
            raise UsageError(f"%loom eval add: {flag} goes with %loom eval SUITE, not with add")
    name = options.get("--agent")
    agent = session.agent(name) if name else session.find_thread(ids[0])[0]
    suite = options.get("--suite", DEFAULT_SUITE)
    with usage_errors():
        kept = agent.add_eval(ids, suite=suite, context=session.context())
    threads = f"{len(kept)} thread{'s' if len(kept) != 1 else ''}"
    print(f"Eval suite {suite!r} of {agent.name}: {threads}; run it with %loom eval {suite}")


def _model(session: Session, name: str | None) -> Model | str | None:
    """The model a variable here holds, else the name as given (``openai:gpt-4.1-mini``)."""
    if name is None:
        return None
    value = session.namespace.get(name)
    return value if isinstance(value, Model) else name


def _instructions(session: Session, name: str | None) -> str | None:
    """The str a variable here holds: instructions are too long for a magic's line, so they
    are named, never written inline."""
    if name is None:
        return None
    if name not in session.namespace:
        raise UsageError(
            f"%loom eval: --instructions names a variable holding the instructions (a str); "
            f"no variable {name!r} here"
        )
    value = session.namespace[name]
    if not isinstance(value, str):
        raise UsageError(
            f"%loom eval: --instructions {name}: {name!r} is a {type(value).__name__}, not a str "
            "of instructions"
        )
    return value
