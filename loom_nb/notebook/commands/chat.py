"""``%loom AGENT``: the chat widget, the agent's current thread with an input box below."""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from loom_nb._agent import Agent, RunResult
from loom_nb._errors import RunError
from loom_nb.notebook import _runs
from loom_nb.notebook.session import Session, usage_errors

if TYPE_CHECKING:  # ipywidgets is imported only when a chat is shown
    from loom_nb.notebook.widgets import ThreadView


def run(session: Session, agent_name: str | None) -> None:
    """Show the chat widget on the agent's current thread (text mode: a hint instead). It is
    displayed, not returned, so the cell shows it once; ``session().last_chat`` holds it."""
    agent = session.agent(agent_name)
    session.last_agent = agent.name
    if not session.widgets_mode():
        raise UsageError(
            f"the chat widget needs a Jupyter frontend; here use %%loom {session.variable(agent)}"
        )
    from loom_nb.notebook import widgets

    view = _runs.open_view(session, agent)
    assert isinstance(view, widgets.ThreadView)
    tid = session.current_thread(agent)
    if tid is not None:
        with usage_errors():
            thread = agent.thread(tid, context=session.context())
        _runs.render_saved(session, agent, view, thread)
    widget = widgets.ChatWidget(view, lambda text: _send(session, agent, view, text))
    session.last_chat = widget
    widget.show()


def _send(
    session: Session, agent: Agent, view: ThreadView, prompt: str
) -> concurrent.futures.Future[Any]:
    """The chat's Send: runs on the current thread without blocking the kernel."""
    tid = session.current.get(agent.name)
    context = session.context()

    async def go() -> RunResult:
        view.begin()
        try:
            result = await agent.run(prompt, thread_id=tid, context=context, on_event=view.on_event)
        except BaseException as exc:
            failed = exc.result if isinstance(exc, RunError) else None
            _runs.finish(session, agent, view, failed, exc)
            raise
        _runs.finish(session, agent, view, result, None)
        return result

    future = session.submit(go())
    view.future = future
    return future
