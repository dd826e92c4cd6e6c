"""References for lesson 01's exercises: bit fields, and the value of a pattern in any layout."""

from __future__ import annotations

import math

import torch

from ...inspector.bits import int_view
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


def value_of(bits: int, exponent_bits: int, mantissa_bits: int) -> float:
    """Reference: the value an IEEE-754-style pattern encodes (1 sign bit first)."""
    sign = -1.0 if bits >> (exponent_bits + mantissa_bits) else 1.0
    exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = bits & ((1 << mantissa_bits) - 1)
    bias = (1 << (exponent_bits - 1)) - 1
    if exponent == (1 << exponent_bits) - 1:  # all ones: inf, or NaN with a mantissa
        return sign * math.inf if mantissa == 0 else math.nan
    if exponent == 0:  # subnormal: no implicit 1, exponent fixed at 1 - bias
        return sign * math.ldexp(mantissa, 1 - bias - mantissa_bits)
    return sign * math.ldexp((1 << mantissa_bits) + mantissa, exponent - bias - mantissa_bits)


SOLUTIONS["01.value_of"] = value_of
