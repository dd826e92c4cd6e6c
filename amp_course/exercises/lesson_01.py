"""Lesson 01 exercises: reading a number's bit fields."""

from __future__ import annotations

import math

import torch

from ..inspector import int_view
from . import ExerciseFailed, exercise

# (exponent bits, mantissa bits) of the formats the exercise covers.
LAYOUTS = {torch.float32: (8, 23), torch.float16: (5, 10), torch.bfloat16: (8, 7)}


def _bits(value: float, dtype: torch.dtype) -> int:
    """The unsigned bits of ``value`` cast to ``dtype`` by torch (its integer view, masked)."""
    return int_view(torch.tensor(value, dtype=torch.float64).to(dtype))


def decompose_bits(value: float, dtype: torch.dtype) -> tuple[int, int, int]:
    """Reference: (sign, biased exponent, mantissa) of ``value`` cast to ``dtype``."""
    exponent_bits, mantissa_bits = LAYOUTS[dtype]
    bits = _bits(value, dtype)
    sign = bits >> (exponent_bits + mantissa_bits)
    exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = bits & ((1 << mantissa_bits) - 1)
    return sign, exponent, mantissa


CASES = [1.0, -2.0, 0.1, 3.14159, 65504.0, -1e-3, 6e-8, 1e-40, 0.0, -0.0, math.inf, 1e5]


@exercise("01.bit_fields", solution=decompose_bits)
def check_bit_fields(decompose):
    for dtype, (exponent_bits, mantissa_bits) in LAYOUTS.items():
        width = 1 + exponent_bits + mantissa_bits
        for value in CASES:
            bits, want = _bits(value, dtype), decompose_bits(value, dtype)
            got = decompose(value, dtype)
            try:
                got = tuple(int(x) for x in got)
            except (TypeError, ValueError):
                raise ExerciseFailed(
                    f"decompose({value}, {dtype}) returned {got!r}; return three "
                    "integers (sign, exponent, mantissa)."
                ) from None
            if got != want:
                raise ExerciseFailed(
                    f"decompose({value}, {dtype}) returned (sign, exponent, mantissa) = {got}, "
                    f"but the bits {bits:0{width}b} give {want}. {dtype} has 1 sign, "
                    f"{exponent_bits} exponent and {mantissa_bits} mantissa bits; mask the "
                    "integer view to make it unsigned."
                )
