"""Reference for lesson 01's bit-fields exercise."""

from __future__ import annotations

import torch

from ...inspector import int_view
from ..lesson_01 import LAYOUTS


def decompose_bits(value: float, dtype: torch.dtype) -> tuple[int, int, int]:
    """Reference: (sign, biased exponent, mantissa) of ``value`` cast to ``dtype``."""
    exponent_bits, mantissa_bits = LAYOUTS[dtype]
    bits = int_view(torch.tensor(value, dtype=torch.float64).to(dtype))  # torch's cast, unsigned
    sign = bits >> (exponent_bits + mantissa_bits)
    exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = bits & ((1 << mantissa_bits) - 1)
    return sign, exponent, mantissa


SOLUTIONS = {"01.bit_fields": decompose_bits}
