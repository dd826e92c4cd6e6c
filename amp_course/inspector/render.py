"""The bit inspector's rendering: one line of text per format, or an HTML table."""

from __future__ import annotations

import html
import math

from .bits import INSPECTED_FORMATS, BitFields, inspect


def gap_text(fields: BitFields) -> str:
    """The gap to the next representable value as shown to a reader: "largest finite" at the top
    of a format (the next pattern is inf or NaN), "-" where the value stored is inf or NaN."""
    if not math.isfinite(fields.stored):
        return "-"
    if not math.isfinite(fields.next_up):
        return "largest finite"
    return f"{fields.gap:.3g}"


def error_text(fields: BitFields) -> str:
    """The rounding error as shown to a reader; "-" where it is not a number (inf, NaN)."""
    return f"{fields.error:+.3g}" if math.isfinite(fields.error) else "-"


def describe(fields: BitFields) -> str:
    """One line of text for a BitFields: bits, stored value, error, gap, and what went wrong."""
    line = (
        f"{fields.format:9s} {fields.bits:>36s}  {fields.kind:9s} stored {fields.stored:<14.8g} "
        f"error {error_text(fields):<11s} gap to next {gap_text(fields)}"
    )
    return f"{line}  <- {fields.outcome}" if fields.outcome else line


def to_html(value: float, formats=INSPECTED_FORMATS) -> str:
    """An HTML table of ``value`` in each format, sign/exponent/mantissa coloured."""
    rows = []
    for f in inspect(value, formats):
        sign, exponent, mantissa = (f.bits.split(" ") + [""])[:3]
        rows.append(
            f"<tr><td>{html.escape(f.format)}</td><td style='font-family:monospace'>"
            f"<span style='color:#c0392b'>{sign}</span> "
            f"<span style='color:#2471a3'>{exponent}</span> "
            f"<span style='color:#1e8449'>{mantissa}</span></td><td>{f.kind}</td>"
            f"<td>{f.stored:.8g}</td><td>{error_text(f)}</td><td>{gap_text(f)}</td>"
            f"<td style='color:#b02a37'>{html.escape(f.outcome)}</td></tr>"
        )
    head = (
        "<tr><th>format</th><th>sign exponent mantissa</th><th>kind</th><th>stored</th>"
        "<th>error</th><th>gap to next</th><th>lost</th></tr>"
    )
    return f"<p>value = {value!r}</p><table>{head}{''.join(rows)}</table>"
