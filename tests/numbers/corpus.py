"""The hand-written corpus of answers (``corpus.json``) as threads, and its expected marks."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from loom_nb import Message, TextPart, Thread, ToolCall, ToolResult
from loom_nb._render import frame_for_model

CORPUS = Path(__file__).with_name("corpus.json")
_INVENTED = re.compile(r"\[\[(.+?)\]\]")


@dataclass
class Case:
    scenario: str
    answer: str  # as the model wrote it (the brackets taken out)
    invented: list[tuple[int, int]]  # where the invented numbers are in ``answer``
    thread: Thread


def cases() -> list[Case]:
    """One thread per answer sentence: the question, the calls and their results, the answer."""
    found = []
    for scenario in json.loads(CORPUS.read_text())["scenarios"]:
        for marked in scenario["answers"]:
            answer, invented = _unmark(marked)
            found.append(Case(scenario["name"], answer, invented, _thread(scenario, answer)))
    return found


def _unmark(marked: str) -> tuple[str, list[tuple[int, int]]]:
    spans, out, at = [], [], 0
    for m in _INVENTED.finditer(marked):
        out.append(marked[at : m.start()])
        start = sum(len(p) for p in out)
        out.append(m.group(1))
        spans.append((start, start + len(m.group(1))))
        at = m.end()
    out.append(marked[at:])
    return "".join(out), spans


def _thread(scenario: dict, answer: str) -> Thread:
    calls, results = [], []
    for i, r in enumerate(scenario["results"]):
        call = ToolCall(f"call_{i + 1}", r["tool"], {})
        if "frame" in r:
            df = pd.DataFrame(r["frame"])
            results.append(ToolResult(call.id, call.name, frame_for_model(df), df))
        else:
            results.append(ToolResult(call.id, call.name, r["content"]))
        calls.append(call)
    thread = Thread(id="t", agent="a")
    thread.messages = [
        Message.user(scenario["user"]),
        Message("assistant", list(calls)),
        Message("tool", list(results)),
        Message("assistant", [TextPart(answer)]),
    ]
    return thread
