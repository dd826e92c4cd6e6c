"""Reference for lesson 01's bit-fields exercise."""

from __future__ import annotations

import torch

from ..lesson_01 import LAYOUTS

_INT_VIEW = {32: torch.int32, 16: torch.int16}


def decompose_bits(value: float, dtype: torch.dtype) -> tuple[int, int, int]:
    """Reference: (sign, biased exponent, mantissa) of ``value`` cast to ``dtype``."""
    exponent_bits, mantissa_bits = LAYOUTS[dtype]
    width = 1 + exponent_bits + mantissa_bits
    stored = torch.tensor(value, dtype=torch.float64).to(dtype)
    # view() reinterprets the bits as a signed integer; the mask makes them unsigned.
    bits = stored.view(_INT_VIEW[width]).item() & ((1 << width) - 1)
    sign = bits >> (exponent_bits + mantissa_bits)
    exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = bits & ((1 << mantissa_bits) - 1)
    return sign, exponent, mantissa


SOLUTIONS = {"01.bit_fields": decompose_bits}
