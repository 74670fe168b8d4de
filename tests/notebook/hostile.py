"""Hostile text for the views: HTML and markdown a model (or a value in the data) could write
to make the page run script, click Approve, or dress itself as loom_nb's own buttons.

Each payload is a template with ``{js}`` (script to run, in an attribute) and ``{url}`` (the
same script as a ``javascript:`` URL). The tests fill them with an attack (:data:`ATTACK`) or,
as a control shown the unsafe way, with a line that only records which payload ran.
"""

from __future__ import annotations

import base64
import html
import re
from html.parser import HTMLParser
from urllib.parse import quote

#: What a reply's script tries: set a flag, click every Approve button, write a file through
#: the Jupyter contents API (with the page's cookies and XSRF token).
ATTACK = (
    "window.__loomPwned=(window.__loomPwned||0)+1;"
    "document.querySelectorAll('button.loom-approve').forEach(function(b){b.click()});"
    "fetch('/api/contents/pwned.txt',{method:'PUT',headers:{'Content-Type':'application/json',"
    "'X-XSRFToken':(document.cookie.match(/_xsrf=([^;]+)/)||['',''])[1]},"
    "body:JSON.stringify({type:'file',format:'text',content:'pwned'})})"
)

_SVG = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>').decode()

#: name -> template. Script in attributes, URLs, frames, and look-alikes of loom's own UI.
PAYLOADS = {
    "img-onerror": '<img src=x onerror="{js}">',
    "details-ontoggle": '<details open ontoggle="{js}"><summary>s</summary>d</details>',
    "svg-onload": '<svg onload="{js}"><circle r="1"/></svg>',
    "svg-animate": '<svg><animate onbegin="{js}" attributeName="x" dur="1s"/></svg>',
    "input-autofocus": '<input autofocus onfocus="{js}">',
    "video-source": '<video><source onerror="{js}"></video>',
    "iframe-srcdoc": "<iframe srcdoc=\"<script>parent.eval(atob('{b64}'))</script>\"></iframe>",
    "iframe-javascript": '<iframe src="{url}"></iframe>',
    "object-data": '<object data="{url}"></object>',
    "script": "<script>{js}</script>",
    "math-mxss": '<math><mtext><table><mglyph><style><img src=x onerror="{js}">',
    "entity-onerror": '<img src=x onerror="{js_entities}">',
    "a-javascript": '<a class="loom-js-link" href="{url}">raw link</a>',
    "md-javascript-link": "[markdown link]({url})",
    "md-entity-link": "[entity link](&#106;avascript:{js_quoted})",
    "md-case-link": "[case link](JaVaScRiPt:{js_quoted})",
    "md-autolink": "<javascript:{js_quoted}>",
    "md-image-onerror": '![alt" onerror="{js}](x)',
    "md-data-image": f"![svg image](data:image/svg+xml;base64,{_SVG})",
    "md-data-link": "[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "style": "<style>.loom-approval{{display:none!important}}</style>",
    "style-attr": '<div style="position:fixed;inset:0;z-index:9999;background:#fff">cover</div>',
    "form": (
        '<form action="/api/contents/pwned.txt" method="post">'
        '<button class="loom-approve">Approve</button></form>'
    ),
    "meta-refresh": '<meta http-equiv="refresh" content="0;url={url}">',
    "base-href": '<base href="javascript:{js_quoted}//">',
    # text other readers split or typeset: MathJax's \\href, line separators, jupytext markers
    "math-href": "$\\href{{{url}}}{{math link}}$ and $\\foo$",
    "separators": "a\u2028b\u2029c\x0bd\x0ce\x1cf\x85g <!-- #endregion --> # %% [markdown]",
}


#: The payloads that run script without a click when shown the unsafe way (the control a
#: browser test shows first); the others restyle, navigate or pose, and would disturb the page.
SCRIPTED = [
    name
    for name in PAYLOADS
    if name not in ("style", "style-attr", "form", "meta-refresh", "base-href")
    and not name.startswith(("md-", "a-", "math-", "separators"))
]


def fill(template: str, js: str) -> str:
    """``template`` with ``js`` in every form it takes (attribute, URL, entities, base64)."""
    return template.format(
        js=js,
        url="javascript:" + quote(js, safe=""),
        js_quoted=quote(js, safe=""),
        js_entities="".join(f"&#{ord(c)};" for c in js),
        b64=base64.b64encode(js.encode()).decode(),
    )


def control(name: str) -> str:
    """Script that only records that payload ``name`` ran (``window.__loomControl``)."""
    return f"(window.__loomControl=window.__loomControl||[]).push('{name}')"


#: Every payload with the attack, one per paragraph, as a model would write it in a reply.
HOSTILE_REPLY = "\n\n".join(
    f"{name}: {fill(template, ATTACK)}" for name, template in PAYLOADS.items()
)
#: One line of them all, for names, titles, values and error messages.
HOSTILE_LINE = " ".join(fill(t, ATTACK) for t in PAYLOADS.values())

#: Tags and attributes that have no place in what a view draws.
_BAD_TAGS = {
    "script", "style", "iframe", "frame", "object", "embed", "svg", "math", "form", "input",
    "button", "textarea", "select", "video", "audio", "source", "meta", "base", "link",
    "template", "animate", "set", "mglyph",
}  # fmt: skip
_URL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


class _Check(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BAD_TAGS:
            self.problems.append(f"<{tag}>")
        for name, value in attrs:
            value = value or ""
            bare = "".join(ch for ch in value if ord(ch) > 0x20).lower()
            if name.startswith("on") or name in ("srcdoc", "formaction", "action"):
                self.problems.append(f"<{tag} {name}>")
            elif name in ("href", "src", "data", "xlink:href", "poster", "background"):
                scheme = _URL.match(bare)
                png = tag == "img" and bare.startswith("data:image/png;base64,")
                if scheme and scheme.group(0) not in ("http:", "https:", "mailto:") and not png:
                    self.problems.append(f"<{tag} {name}={value[:40]}>")
                elif not scheme and name in ("href", "src") and bare:
                    self.problems.append(f"<{tag} {name}={value[:40]}> (relative)")
            elif name == "style" and re.search(r"position|z-index|inset|expression|url\(", bare):
                self.problems.append(f"<{tag} style={value[:40]}>")


def problems(fragment: str) -> list[str]:
    """What in ``fragment`` could act or pose (tags, handlers, URLs, overlays), read by
    Python's own HTML parser (independent of the sanitizer under test)."""
    check = _Check()
    check.feed(fragment)
    check.close()
    return check.problems


def visible_text(fragment: str) -> str:
    """The text a person reads in ``fragment`` (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]*>", "", fragment))
