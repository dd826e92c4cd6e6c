"""Lesson 11 exercises: an MX round trip for element layouts the lesson did not show (``mx``), the
predicted FP8 gain of new GEMM shapes and devices (``gain``), and the bytes of AdamW's moments with
8-bit blockwise states (``moments``).

Each is three pieces: ``observe`` runs a function on cases built from a seed and records what it
returned; ``compare`` raises ExerciseFailed at the first difference, saying what differs; the
references are in ``solutions/lesson_11.py``.
"""

from __future__ import annotations

from .. import register
from .gain import compare_gain, observe_gain
from .moments import compare_moments, observe_moments
from .mx import compare_mx, observe_mx

register("11.mx_roundtrip", observe_mx, compare_mx)
register("11.fp8_gain", observe_gain, compare_gain)
register("11.moment_bytes", observe_moments, compare_moments)
