"""Runs shown in a view: opening the view, ending a run, resuming decided calls.

Cells run an agent with ``_loop_thread.run_sync`` (the private loop on its daemon thread; the
kernel stays unpatched). Buttons start work with ``Session.submit`` and return at once, from
whatever thread delivers the click. Everything that touches one thread's pending calls runs
under that thread's asyncio lock on the loop, so two quick clicks never resume twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError

from loom_nb._agent import Agent, Decision, DecisionLike, RunResult
from loom_nb._errors import RunError
from loom_nb._events import MessageAdded, RunEvent
from loom_nb._messages import PendingApproval, Resolution, Thread
from loom_nb.notebook._view import View
from loom_nb.notebook.session import Binding, RunInterrupted, Session, usage_errors


def open_view(session: Session, agent: Agent, binding: Binding | None = None) -> View:
    """A new view of one of ``agent``'s threads, widgets or text as the session displays.

    A widget view's cards resume the run when clicked; that run assigns the names of
    ``binding`` (the ``%%loom`` cell's ``-o`` / ``-O`` / ``--result``) again.
    """
    view: View
    if session.widgets_mode():
        from loom_nb.notebook.widgets import ThreadView

        def resume_click(
            view: ThreadView, pending: PendingApproval, approve: bool | Resolution | str
        ) -> Any:
            session.claim([pending.call_id])
            if view.thread_id is None:
                raise UsageError("this card has no thread yet; wait for the run to stop")
            choice = Decision(approve, pending.digest) if isinstance(approve, bool) else approve
            decisions: dict[str, DecisionLike] = {pending.call_id: choice}
            context = session.context()  # read now: a mistake in it shows on the card
            run = resume(session, agent, view, view.thread_id, decisions, context, binding)
            return session.submit(run)

        def allow_click(view: ThreadView, pending: PendingApproval) -> Any:
            if view.thread_id is None:
                raise UsageError("this card has no thread yet; wait for the run to stop")
            return allow_like(agent, pending, view.thread_id, session.context())

        view = ThreadView(
            agent_name=agent.name,
            rows=session.settings.rows,
            interval=session.settings.stream_interval,
            resumer=resume_click,
            tools=agent.tools,
            allower=allow_click,
            mark_numbers=agent.check_numbers != "off",
        )
    else:
        from loom_nb.notebook.text import TextView

        view = TextView(
            title=agent.name,
            rows=session.settings.rows,
            tools=agent.tools,
            mark_numbers=agent.check_numbers != "off",
        )
    session.views.add(view)
    session.last_view = view
    return view


def allow_like(
    agent: Agent, pending: PendingApproval, thread_id: str, context: Mapping[str, Any] | None
) -> Any:
    """The thread's rule for writes like ``pending``: its tool, table and columns, and at most
    the rows its card counted (``agent.allow`` with the card's effect)."""
    tool = agent.tools.get(pending.tool)
    if tool is None:
        raise UsageError(f"agent {agent.name!r} has no tool {pending.tool!r} any more")
    effect = tool.effect_of(pending.tool, pending.arguments, pending.preview)
    return agent.allow(
        tool=pending.tool,
        table=effect.table,
        columns=sorted(effect.columns) if effect.columns is not None else None,
        max_rows=effect.rows,
        scope="thread",
        thread_id=thread_id,
        context=context,
    )


def render_saved(
    session: Session, agent: Agent, view: View, thread: Thread, *, history: bool = True
) -> None:
    """Draw a thread read from the store in ``view``, each card that waits for a decision
    with its tool's preview read again: the rows as they are now, marked so."""
    with usage_errors():
        fresh = agent.previews_now(thread, context=session.context())
    pending = [
        dataclasses.replace(p, preview=fresh.get(p.call_id, p.preview)) for p in thread.pending
    ]
    thread = dataclasses.replace(thread, pending=pending)
    view.render(thread, history=history, now=set(fresh))


class Followed:
    """A run's events on their way to ``view``, noting its thread (known from the first
    event, before the run returns) and how many messages it completed."""

    def __init__(self, view: View, thread_id: str | None = None) -> None:
        self.view = view
        self.thread_id = thread_id
        self.completed = 0

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, MessageAdded):
            self.completed += 1
        if getattr(event, "thread_id", None):
            self.thread_id = event.thread_id  # type: ignore[union-attr]
        self.view.on_event(event)


def interrupted(session: Session, agent: Agent, followed: Followed) -> RunInterrupted:
    """What Ctrl-C stopped and what was kept, in one line."""
    n = followed.completed
    kept = f"{n} completed message{'s' if n != 1 else ''}" if n else "nothing new"
    if followed.thread_id is None:
        return RunInterrupted(f"{agent.name}'s run was interrupted before it started a thread")
    return RunInterrupted(
        f"{agent.name}'s run was interrupted; {kept} saved in thread {followed.thread_id}, "
        f"which the next %%loom {session.variable(agent)} continues"
    )


def finish(
    session: Session,
    agent: Agent,
    view: View,
    result: RunResult | None,
    error: BaseException | None,
    thread_id: str | None = None,
) -> None:
    """End a new message's run in ``view``; its thread (``thread_id`` when the run has no
    result, e.g. interrupted) becomes the agent's current one."""
    view.finish(result, error)
    tid = result.thread.id if result is not None else thread_id or view.thread_id
    if tid is not None:
        session.current[agent.name] = tid
    if result is not None:
        session.last_result = result


def bind(
    session: Session, binding: Binding, result: RunResult, *, continuation: bool = False
) -> None:
    """Assign the frames and the result to ``binding``'s names. A ``continuation`` (a resume
    after approval) adds its frames to ``-O``'s list and leaves ``-o`` alone when it fetched none.
    """
    frames = result.frames
    ns = session.namespace
    if binding.out and frames:
        ns[binding.out] = frames[-1]
    elif binding.out and not continuation and result.status == "complete":
        ns[binding.out] = None
        print(f"-o {binding.out}: this run fetched no DataFrame; {binding.out} = None")
    if binding.out_all:
        earlier = ns.get(binding.out_all) if continuation else None
        ns[binding.out_all] = (list(earlier) if isinstance(earlier, list) else []) + frames
    if binding.result:
        ns[binding.result] = result


async def resume(
    session: Session,
    agent: Agent,
    view: View,
    thread_id: str,
    decisions: Mapping[str, DecisionLike],
    context: Mapping[str, Any] | None,
    binding: Binding | None = None,
) -> RunResult:
    """Resume ``thread_id`` with ``decisions`` (already claimed), shown in ``view``."""
    async with session.thread_lock(thread_id):
        view.begin()
        try:
            result = await agent.resume(
                thread_id, decisions, context=context, on_event=view.on_event
            )
        except BaseException as exc:
            view.finish(exc.result if isinstance(exc, RunError) else None, exc)
            raise
        finally:  # ended: the store now says where each call is (a retry asks it again)
            session.release(decisions)
        view.finish(result, None)
        session.last_result = result
        if binding is not None:
            bind(session, binding, result, continuation=True)
        return result
