"""Lesson 01 exercises: reading a number's bit fields."""

from __future__ import annotations

import math

import torch

from . import ExerciseFailed, call_answer, fail_on_error, register

# (exponent bits, mantissa bits) of the formats the exercise covers.
LAYOUTS = {torch.float32: (8, 23), torch.float16: (5, 10), torch.bfloat16: (8, 7)}
DTYPES = {str(dtype): dtype for dtype in LAYOUTS}

# The cases a learner's check cell uses (seed 0): ordinary numbers, fp16's largest, subnormals,
# a value that underflows fp16, both zeros, infinity, one that overflows fp16.
CASES = [1.0, -2.0, 0.1, 3.14159, 65504.0, -1e-3, 6e-8, 1e-40, 0.0, -0.0, math.inf, 1e5]
EDGES = [0.0, -0.0, math.inf, -math.inf, 65504.0, 1e-40]


def cases(seed: int) -> list[float]:
    """Seed 0: CASES. Other seeds: the edge cases and ten random values over fp32's range."""
    if seed == 0:
        return list(CASES)
    generator = torch.Generator().manual_seed(seed)
    exponents = torch.empty(10, dtype=torch.float64).uniform_(-44.0, 38.0, generator=generator)
    mantissas = torch.empty(10, dtype=torch.float64).uniform_(1.0, 10.0, generator=generator)
    signs = torch.randint(0, 2, (10,), generator=generator) * 2 - 1
    values = (signs * mantissas * 10.0**exponents).tolist()
    return EDGES + [float(v) for v in values]


def observe(decompose, seed: int) -> list[dict]:
    """``decompose(value, dtype)`` for every case and format: three ints, or what went wrong."""
    results = []
    for dtype in LAYOUTS:
        for value in cases(seed):
            got, error = call_answer(decompose, value, dtype)
            record = {"value": value, "dtype": str(dtype), "error": error}
            if error is None:
                try:
                    record["fields"] = [int(x) for x in got]
                    if len(record["fields"]) != 3:
                        raise ValueError
                except (TypeError, ValueError):
                    record["fields"], record["returned"] = None, repr(got)[:80]
            results.append(record)
    return results


def compare(mine, reference, seed: int) -> None:
    for index, want in enumerate(reference):
        got = mine[index]
        value, dtype = want["value"], DTYPES[want["dtype"]]
        exponent_bits, mantissa_bits = LAYOUTS[dtype]
        fail_on_error(got["error"], f"decompose({value}, {dtype})")
        if got.get("fields") is None:
            raise ExerciseFailed(
                f"decompose({value}, {dtype}) returned {got.get('returned')}; return three "
                "integers (sign, exponent, mantissa)."
            )
        sign, exponent, mantissa = want["fields"]
        if got["fields"] != want["fields"]:
            width = 1 + exponent_bits + mantissa_bits
            bits = (sign << (width - 1)) | (exponent << mantissa_bits) | mantissa
            raise ExerciseFailed(
                f"decompose({value}, {dtype}) returned (sign, exponent, mantissa) = "
                f"{tuple(got['fields'])}, but the bits {bits:0{width}b} give "
                f"{tuple(want['fields'])}. {dtype} has 1 sign, {exponent_bits} exponent "
                f"and {mantissa_bits} mantissa bits; mask the integer view to make it unsigned."
            )


register("01.bit_fields", observe, compare)
