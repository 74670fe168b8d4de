"""What the model and the data write reaches the page inert: the renderer with hostile payloads,
then every view (live run, streaming, chat, cards, ``%loom show``, the static HTML) walked for
what it would put on the page. The browser test (test_browser_inert.py) checks the same in
JupyterLab: no script runs."""

from __future__ import annotations

import base64
import re
from typing import Any

import ipywidgets as widgets
import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from loom_nb import Message, ReplayModel, Reply, TextDelta, Thread, ToolCall, define_agent, tool
from loom_nb._inert import inert
from loom_nb.notebook import session as loom_session
from loom_nb.notebook._html import (
    PAGE_STYLE,
    chart_html,
    markdown_html,
    safe_html,
)
from loom_nb.notebook._page import SafeHTML
from loom_nb.notebook._static import hiding_style
from loom_nb.notebook.widgets import ThreadView
from tests.notebook.hostile import (
    ATTACK,
    HOSTILE_LINE,
    HOSTILE_REPLY,
    PAYLOADS,
    fill,
    problems,
    visible_text,
)

RAW = {name: fill(template, ATTACK) for name, template in PAYLOADS.items()}


# ---- the renderer ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RAW))
def test_markdown_of_a_hostile_reply_is_inert_and_says_what_was_written(name: str) -> None:
    shown = markdown_html(RAW[name])
    assert problems(shown) == [], (name, shown)
    assert not re.search(r"<a [^>]*href=", shown)  # no link the payload chose survives
    assert safe_html(shown) == shown  # already what the sanitizer lets through
    # the person sees the text the model wrote (as text), not an empty reply
    assert visible_text(shown).strip(), name


@pytest.mark.parametrize("name", sorted(RAW))
def test_the_sanitizer_alone_stops_each_payload(name: str) -> None:
    """Even raw HTML (as if a template forgot to escape) loses every way to act."""
    cleaned = safe_html(RAW[name])
    assert problems(cleaned) == [], (name, cleaned)


def test_raw_html_in_a_reply_shows_as_text() -> None:
    shown = markdown_html('Look: <img src=x onerror="alert(1)"> and <b>bold</b>')
    assert "<img" not in shown and "<b>" not in shown
    assert visible_text(shown).strip() == 'Look: <img src=x onerror="alert(1)"> and <b>bold</b>'


def test_math_markup_line_separators_and_cell_markers_stay_text() -> None:
    """Nothing typesets the HTML widget's text (``$...$`` reads as written) and no character
    ends a tag or a line of HTML early."""
    text = RAW["math-href"] + "\n\n" + RAW["separators"]
    shown = markdown_html(text)
    assert problems(shown) == []
    read = visible_text(shown)
    assert "$\\href{javascript:" in read and "$\\foo$" in read
    for ch in "\u2028\u2029\x0b\x0c\x1c\x85":
        assert ch in read
    assert "<!-- #endregion --> # %% [markdown]" in read


def test_markdown_still_looks_like_markdown() -> None:
    text = (
        "## Orders\n\n**2** open, *one* late, ~~none~~ lost, `total > 100`:\n\n"
        "| id | total |\n|---|---:|\n| 101 | 120.0 |\n\n- first\n- second\n\n1. one\n\n"
        "```python\ndf[df.total > 100]\n```\n\n> quoted\n\n[docs](https://example.org/a?b=1)"
    )
    shown = markdown_html(text)
    for tag in ("<h2>", "<strong>", "<em>", "<del>", "<code>", "<table>", "<th>", "<td"):
        assert tag in shown, tag
    assert "<ul>" in shown and "<ol>" in shown and "<blockquote>" in shown
    assert '<pre><code class="language-python">df[df.total &gt; 100]' in shown
    assert 'href="https://example.org/a?b=1"' in shown and 'rel="noopener noreferrer"' in shown


@pytest.mark.parametrize(
    "link",
    [
        "javascript:alert(1)",
        "JAVASCRIPT:alert(1)",
        " javascript:alert(1)",
        "&#106;avascript:alert(1)",
        "&#x6A;avascript:alert(1)",
        "java%0ascript:alert(1)",
        "vbscript:msgbox(1)",
        "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
        "data:image/png;base64,iVBORw0KGgo=",
        "/api/contents/secret.txt",
        "file:///etc/passwd",
    ],
)
def test_links_and_images_go_nowhere_but_http_and_mailto(link: str) -> None:
    for text in (f"[click]({link})", f"![pic]({link})", f"<{link}>"):
        shown = markdown_html(text)
        assert "href=" not in shown and "src=" not in shown, (text, shown)


def test_an_image_the_model_names_is_a_link_never_loaded() -> None:
    shown = markdown_html("![revenue](https://example.org/track.png?rows=secret)")
    assert "<img" not in shown
    assert 'href="https://example.org/track.png?rows=secret"' in shown
    assert "image: revenue" in visible_text(shown)


def test_only_the_projects_chart_pngs_keep_a_data_url() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n....").decode()
    ours = f'<img class="loom-chart-image" src="data:image/png;base64,{png}" alt="chart">'
    assert f'src="data:image/png;base64,{png}"' in safe_html(ours)
    for other in (
        '<img src="data:image/svg+xml;base64,PHN2Zy8+">',
        '<img src="data:image/png;base64,AAA&quot; onerror=&quot;x">',
        '<img src="data:text/html,<script>alert(1)</script>">',
        '<a href="data:image/png;base64,AAAA">x</a>',
        '<img src="DATA:image/svg+xml,x">',
        '<img src=" d\tata:text/html,x">',
    ):
        assert "data:" not in safe_html(other).lower(), other


async def test_a_chart_the_project_draws_keeps_its_png_through_the_sanitizer() -> None:
    pytest.importorskip("matplotlib")
    from tests.charts._chart_data import draw, orders, results

    found = results(("call_rows", "frames_select", orders()))
    out = await draw(found, result="call_rows", kind="bar", x="status", y="total")
    assert out.chart is not None
    drawn = chart_html(out.chart)
    kept = safe_html(drawn)
    assert 'src="data:image/png;base64,' in kept and problems(kept) == []
    assert kept.split('src="')[1].split('"')[0] == drawn.split('src="')[1].split('"')[0]


# ---- every view --------------------------------------------------------------------------------


def _widgets(root: Any) -> list[Any]:
    found, todo = [], [root]
    while todo:
        w = todo.pop()
        found.append(w)
        todo.extend(getattr(w, "children", ()))
    return found


def assert_inert_widgets(root: Any) -> int:
    """Every widget under ``root``: no Output holding markdown or HTML, every HTML widget a
    SafeHTML whose value is inert (the stylesheet constant aside). Returns the HTML count."""
    count = 0
    for w in _widgets(root):
        if isinstance(w, widgets.Output):
            kinds = {k for o in w.outputs for k in o.get("data", {})}
            assert not kinds & {"text/markdown", "text/html"}, kinds
        if isinstance(w, widgets.HTML):
            if "loom-style" in w._dom_classes:
                [key] = set(re.findall(r"loom-static-(\w+)", w.value))  # the view's own key
                assert w.value == PAGE_STYLE + hiding_style(key)
                continue
            assert isinstance(w, SafeHTML), w
            assert problems(w.value) == [], w.value
            assert safe_html(w.value) == w.value
            count += 1
        if isinstance(w, widgets.Accordion):
            assert all(isinstance(t, str) for t in w.titles)  # drawn as text by Lumino
    return count


def assert_inert_outputs(outputs: list[Any]) -> None:
    """What IPython displayed: no model text as markdown; any HTML inert."""
    assert outputs, "nothing was displayed"
    for out in outputs:
        assert "text/markdown" not in out.data
        if "text/html" in out.data:
            body = out.data["text/html"]
            assert "<style" not in body  # a sanitizer would show it as text
            assert "mathjax_ignore" in body  # an HTML output's math is typeset otherwise
            assert problems(body) == [], body[:500]


@pytest.fixture
def hostile_shell(shell: InteractiveShell) -> InteractiveShell:
    """The ``shell`` fixture's agent, given tools whose names, values and errors are hostile."""
    cell = shell.run_cell
    written: list[str] = shell.user_ns["written"]

    @tool
    def rows() -> pd.DataFrame:
        "Rows whose column names, index, values and categories are hostile."
        frame = pd.DataFrame(
            {HOSTILE_LINE[:200]: [HOSTILE_LINE, "ok"], "n": [1, 2]},
            index=pd.Index([RAW["img-onerror"], RAW["svg-onload"]], name=RAW["form"]),
        )
        frame["kind"] = pd.Categorical([RAW["details-ontoggle"], RAW["style"]])
        return frame

    @tool
    def broken(why: str) -> str:
        "Fails with the model's text."
        raise ValueError(why)

    @tool(needs_approval=True, preview=lambda a: {"note": a["note"], "rows": [a]})
    def save_note(note: str) -> str:
        "Write a note (waits for approval)."
        written.append(note)
        return "saved"

    model = ReplayModel(
        [
            Reply(HOSTILE_REPLY, [("rows", {}), ("broken", {"why": HOSTILE_LINE})]),
            Reply(HOSTILE_REPLY, [("save_note", {"note": HOSTILE_LINE})]),
            HOSTILE_REPLY,
        ]
    )
    agent = define_agent(name="analyst", model=model, tools=[rows, broken, save_note])
    shell.user_ns.update(analyst=agent, model=model)
    cell("%config LoomMagics.display = 'widgets'", store_history=False)
    return shell


def test_every_view_of_a_hostile_thread_is_inert(hostile_shell: InteractiveShell) -> None:
    sh, written = hostile_shell, hostile_shell.user_ns["written"]
    # a live run: the reply streamed, a table, an error, a card that waits
    with capture_output(display=True) as live:
        assert sh.run_cell(f"%%loom analyst --new\n{HOSTILE_LINE}").success
    view: Any = loom_session(sh).last_view
    assert len(view.cards) == 1 and view.cards[0].decision is None and written == []
    classes = [c for w in _widgets(view) for c in getattr(w, "_dom_classes", ())]
    for kind in ("loom-assistant", "loom-frame", "loom-error", "loom-approval", "loom-user"):
        assert kind in classes, kind
    assert assert_inert_widgets(view) > 10
    assert_inert_outputs(live.outputs)
    card = view.cards[0]
    assert problems(card.static_html()) == []
    assert "text/html" not in view._repr_mimebundle_()  # the static form is its own output
    static = view.static_bundles()
    assert not [b for b in static if "text/markdown" in b]
    assert "onerror" in visible_text("".join(b.get("text/html", "") for b in static))
    thread_id = view.thread_id

    # %loom show and %loom resume: the saved thread as one block of HTML, the card again
    for line in (f"%loom show {thread_id}", f"%loom resume {thread_id}"):
        with capture_output(display=True) as shown:
            assert sh.run_cell(line).success
        again: Any = loom_session(sh).last_view
        assert again is not view
        assert [w for w in _widgets(again) if "loom-history" in w._dom_classes]
        assert assert_inert_widgets(again) > 3
        assert_inert_outputs(shown.outputs)
    assert written == []

    # the chat: the same thread continued from its input box
    sh.user_ns["model"].add(Reply(HOSTILE_REPLY))
    with capture_output(display=True) as chatted:
        assert sh.run_cell("%loom analyst").success
        chat = loom_session(sh).last_chat
        chat.view.cards[0].reject()  # the pending write is decided (rejected): nothing written
        chat.wait(10)
        chat.ask(HOSTILE_LINE)
        chat.wait(10)
    assert written == []
    assert assert_inert_widgets(chat) > 3
    assert_inert_outputs(chatted.outputs)
    assert_inert_outputs([_Bundle(b) for b in chat.view.static_bundles()])


def test_streamed_text_is_inert_at_every_flush() -> None:
    """Each delta of a reply that builds a payload piece by piece (tags split across deltas)
    shows inert, and so does the reply cut short in the static form."""
    view = ThreadView(agent_name="analyst", interval=0)
    seen = []
    for piece in HOSTILE_REPLY.split(" "):
        view.on_event(TextDelta(piece + " "))
        stream = view._stream
        assert isinstance(stream, SafeHTML)
        seen.append(stream.value)
        assert problems(stream.value) == []
    assert len(set(seen)) > 20 and view.stream_updates == len(seen)
    view.finish(None, RuntimeError(HOSTILE_LINE))  # the run fails mid-reply
    assert_inert_widgets(view)
    static = view.static_html()
    assert "(cut short)" in static
    assert_inert_outputs([_Bundle(b) for b in view.static_bundles()])
    view.on_event(TextDelta("next "))
    view.on_event(_added(Message("assistant", [ToolCall("c1", HOSTILE_LINE[:80], {"a": 1})])))
    assert_inert_widgets(view)


class _Bundle:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data


def _added(message: Message) -> Any:
    from loom_nb._events import MessageAdded

    return MessageAdded(message, "t1")


def test_a_hostile_title_and_agent_name_stay_text(shell: InteractiveShell) -> None:
    agent = shell.user_ns["analyst"]
    thread = Thread(
        id="t-hostile",
        agent="analyst",
        title=HOSTILE_LINE,
        messages=[Message("user", HOSTILE_LINE), Message("assistant", HOSTILE_REPLY)],
    )
    agent.store.save_thread(thread)
    shell.run_cell("%config LoomMagics.display = 'widgets'", store_history=False)
    with capture_output(display=True) as shown:
        assert shell.run_cell("%loom show t-hostile").success
    view: Any = loom_session(shell).last_view
    assert "onerror" in visible_text(view.header.value)
    assert_inert_widgets(view)
    assert_inert_outputs(shown.outputs)
    named = ThreadView(agent_name=HOSTILE_LINE)
    assert_inert_widgets(named)
    assert_inert_outputs([_Bundle(b) for b in named.static_bundles()])


#: What a terminal acts on: conceal (hides all that follows), clear the screen, write the
#: clipboard (OSC 52), an 8-bit CSI, a carriage return over the line, a bidi override.
TERMINAL = "a\x1b[8m b\x1b[2J\x1b[H c\x1b]52;c;cHduZWQ=\x07 d\x9b31m e\rf \u202eg"


def test_the_text_view_shows_terminal_controls_as_text(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a terminal (the text view), what the model, the tools and the data write cannot
    hide the card that follows it, clear the screen or write the clipboard: every control but
    newline and tab shows as its escape."""
    model, written = shell.user_ns["model"], shell.user_ns["written"]

    @tool
    def fetch(q: str) -> pd.DataFrame:
        "Rows of hostile text."
        if q == "fail":
            raise ValueError(TERMINAL)
        return pd.DataFrame({TERMINAL: [TERMINAL]})

    shell.user_ns["analyst"] = define_agent(
        name="analyst",
        model=model,
        tools=[fetch, shell.user_ns["analyst"].tools["insert_ticket"]],
    )
    model.add(
        Reply(TERMINAL, [("fetch", {"q": TERMINAL}), ("fetch", {"q": "fail"})]),
        Reply(TERMINAL, [("insert_ticket", {"subject": TERMINAL})]),
    )
    assert shell.run_cell(f"%%loom analyst --new\n{TERMINAL}").success
    out = capsys.readouterr().out
    thread_id = loom_session(shell).current["analyst"]
    assert shell.run_cell(f"%loom show {thread_id}").success
    out += capsys.readouterr().out
    assert written == []
    controls = {c for c in out if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0}
    assert controls == set() and "\u202e" not in out
    shown = r"a\x1b[8m b\x1b[2J\x1b[H c\x1b]52;c;cHduZWQ=\x07 d\x9b31m e\x0df \u202eg"
    assert inert(TERMINAL) == shown
    assert out.count(shown) >= 6  # the question and both replies, live and shown again
    assert "insert_ticket" in out.split(r"\x1b[8m")[-1]  # the card reads after a conceal


def test_the_threads_listing_and_a_deletion_show_terminal_controls_as_text(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """A thread's title (its first prompt's words, which may be pasted data) lists and
    deletes in a terminal as text: its text/plain form holds no control to act on."""
    shell.user_ns["model"].add(Reply("ok"))
    assert shell.run_cell(f"%%loom analyst --new\n{TERMINAL}").success
    thread_id = loom_session(shell).current["analyst"]
    capsys.readouterr()
    listed = shell.run_cell("%loom threads")
    assert listed.success
    with pd.option_context("display.width", 2000, "display.max_columns", None):
        plain = repr(listed.result)  # wide, as a wide terminal shows the title column
    assert thread_id in plain and r"\x1b[" in plain
    deleted = shell.run_cell(f"%loom delete {thread_id}")
    out = capsys.readouterr().out
    assert deleted.success and f"Deleted thread {thread_id}" in out
    for text in (plain, out):
        controls = {c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0}
        assert controls == set() and "\u202e" not in text
