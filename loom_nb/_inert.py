"""Text as a terminal shows it without acting on it: the text view, the lines and tables the
magics print and a chart's labels pass what the model, the data or the tools wrote through
:func:`inert`."""

from __future__ import annotations

#: What a terminal would act on rather than show: C0 controls but newline and tab (escape
#: sequences that hide, clear, move or write the clipboard; a carriage return that writes
#: over a line), DEL, C1 controls (8-bit CSI) and bidirectional overrides (text that reads
#: other than it is). The model's, the data's and the tools' text all pass through it, shown
#: as escapes.
_INERT = str.maketrans(
    {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if chr(c) not in "\n\t"}
    | {c: f"\\u{c:04x}" for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]}
)


def inert(text: str) -> str:
    """``text`` as a terminal shows it without acting on any of it."""
    return text.translate(_INERT)
