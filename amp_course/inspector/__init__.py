"""Bit inspector: a value's sign, exponent and mantissa bits in fp32, TF32, fp16, bf16 and fp8.

``bits`` takes a value apart (torch's rounding, done once from the exact value), ``render`` shows
the result as text lines or an HTML table, ``widget`` is the interactive UI; ``show`` displays
whichever the front end can render (``amp_course.display``). Everything public is re-exported
here, so notebooks call ``ac.inspector.decompose`` and ``ac.inspector.show``.
"""

from __future__ import annotations

from .bits import (
    INSPECTED_FORMATS,
    BitFields,
    compose,
    decompose,
    inspect,
    int_view,
    representable_values,
)
from .render import describe, error_text, gap_text, to_html

__all__ = [
    "INSPECTED_FORMATS",
    "BitFields",
    "compose",
    "decompose",
    "describe",
    "error_text",
    "gap_text",
    "inspect",
    "int_view",
    "representable_values",
    "show",
    "to_html",
]


def show(value: float = 0.1, interactive: bool | None = None, formats=INSPECTED_FORMATS) -> None:
    """Display the inspector once: a widget (value box, log slider, format buttons) where widgets
    render, else one table, as HTML with a plain-text fallback (papermill, nbval, a terminal).

    ``interactive=None`` decides by the front end, as the quizzes do; True or False forces it.
    Returns nothing, so a notebook cell ending with ``show(...)`` does not display it twice.
    """
    from IPython import get_ipython
    from IPython.display import display

    from .. import display as front_end

    if interactive is None:
        interactive = front_end.widgets_available()
    if interactive:
        from .widget import BitInspector

        display(BitInspector(value, formats).ui)
        return
    text = "\n".join(describe(fields) for fields in inspect(value, formats))
    if get_ipython() is None:  # plain Python: nothing renders HTML
        print(text)
        return
    # One output with two renderings: front ends show the table, text viewers the lines.
    display({"text/plain": text, "text/html": to_html(value, formats)}, raw=True)
