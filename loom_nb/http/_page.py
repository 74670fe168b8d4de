"""The thread browser's pages: plain server-drawn HTML (no script), the threads escaped as
text and a thread drawn by the notebook's own static view (``ThreadView.static_html``), the
one renderer that model and data text reach a person through."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from loom_nb._messages import Thread
from loom_nb.notebook._html import esc

_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:24px auto;max-width:960px;color:#222}"
    "table{border-collapse:collapse;width:100%}td,th{padding:4px 8px;text-align:left;"
    "border-bottom:1px solid #ddd}.loom-muted{color:#777;font-size:90%}"
    "input[type=search]{width:60%;padding:4px}"
)


def _document(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>"
    )


def _browser(base_url: str) -> str:
    return f"{base_url}loom/threads"


def thread_url(base_url: str, agent: str, thread_id: str) -> str:
    return f"{_browser(base_url)}/{quote(agent, safe='')}/{quote(thread_id, safe='')}"


def list_page(base_url: str, user: str, text: str | None, page: dict[str, Any]) -> str:
    """The user's threads (a page of them), newest first, with the search box."""
    rows = "".join(
        "<tr class='loom-thread-row'>"
        f"<td><a href='{esc(thread_url(base_url, t['agent'], t['id']))}'>"
        f"{esc(t['title'] or '(untitled)')}</a></td>"
        f"<td>{esc(t['agent'])}</td><td>{t['message_count']}</td>"
        f"<td>{t['pending_count'] or ''}</td>"
        f"<td class='loom-muted'>{esc(t['updated_at'][:16].replace('T', ' '))}</td></tr>"
        for t in page["threads"]
    )
    if not rows:
        rows = (
            "<tr><td colspan=5 class='loom-none'>"
            + (f"No thread mentions “{esc(text)}”." if text else "No threads yet.")
            + "</td></tr>"
        )
    more = ""
    if page["next_cursor"] is not None:
        query = {"cursor": page["next_cursor"], **({"q": text} if text else {})}
        more = f"<p><a class='loom-next' href='?{esc(urlencode(query))}'>Older threads →</a></p>"
    body = (
        f"<h2>Threads</h2><p class='loom-muted'>signed in as {esc(user)}</p>"
        f"<form method='get' action='{esc(_browser(base_url))}'>"
        f"<input type='search' name='q' value='{esc(text or '')}' "
        "placeholder='search the messages'> <button type='submit'>Search</button></form>"
        "<table><thead><tr><th>thread</th><th>agent</th><th>messages</th><th>waiting</th>"
        f"<th>updated (UTC)</th></tr></thead><tbody>{rows}</tbody></table>{more}"
    )
    return _document("Threads", body)


def thread_page(base_url: str, thread: Thread, link: str) -> str:
    """One thread as the notebook's static HTML, and the link that opens it for others."""
    from loom_nb.notebook.widgets import ThreadView

    view = ThreadView(agent_name=thread.agent)
    view.render(thread)
    shared = (
        "anyone signed in to this server who has the link"
        if thread.user_id is None
        else "you (it is scoped to your user)"
    )
    body = (
        f"<p><a href='{esc(_browser(base_url))}'>← all threads</a></p>"
        f"<p class='loom-muted'>Link to this thread (opens for {shared}): "
        f"<input class='loom-link' readonly size=80 value='{esc(link)}'></p>"
        f"{view.static_html()}"
    )
    return _document(thread.title or "Thread", body)


def error_page(base_url: str, message: str) -> str:
    body = (
        f"<p><a href='{esc(_browser(base_url))}'>← all threads</a></p>"
        f"<p class='loom-error'>{esc(message)}</p>"
    )
    return _document("Threads", body)
