"""The corpus of hand-written answers: no number in a result (or derivable from one by the
stated rules) is marked "in no result", and every invented number is."""

from __future__ import annotations

from loom_nb import trace_numbers
from tests.numbers.corpus import cases


def _scores() -> tuple[list[str], list[str], int, int]:
    false_marks, missed = [], []
    marked = invented = 0
    for case in cases():
        traced = trace_numbers(case.thread)
        for a, b in case.invented:
            invented += 1
            hits = [n for n in traced if n.start < b and a < n.end]
            if not hits or any(n.rule is not None for n in hits):
                missed.append(f"{case.answer!r}: {case.answer[a:b]!r} -> {hits}")
        for n in traced:
            if n.rule is not None:
                continue
            marked += 1
            if not any(n.start < b and a < n.end for a, b in case.invented):
                false_marks.append(f"{case.answer!r}: {n.text!r} marked")
    return false_marks, missed, marked, invented


def test_the_corpus_has_200_sentences_with_invented_numbers() -> None:
    found = cases()
    assert len(found) >= 200
    assert sum(len(c.invented) for c in found) >= 60


def test_no_false_mark_and_every_invented_number_marked(capsys) -> None:  # type: ignore[no-untyped-def]
    false_marks, missed, marked, invented = _scores()
    true_marks = marked - len(false_marks)
    precision = true_marks / marked if marked else 1.0
    recall = (invented - len(missed)) / invented
    with capsys.disabled():
        print(
            f"\n'in no result' over {len(cases())} sentences: precision {precision:.3f} "
            f"({true_marks}/{marked}), recall {recall:.3f} ({invented - len(missed)}/{invented})"
        )
    assert false_marks == []
    assert missed == []
