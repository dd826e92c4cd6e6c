"""Lesson 01 exercises: reading a number's bit fields, and the value of a bit pattern in any
IEEE-754-style layout (transfer to formats the lesson did not take apart)."""

from __future__ import annotations

import math
import operator

import torch

from ..display import shown
from . import ExerciseFailed, call_answer, fail_on_error, register

# (exponent bits, mantissa bits) of the formats the exercise covers: the three the lesson's hints
# spell out, and two fp8 formats it leaves to the learner (8-bit integer views, other layouts).
LAYOUTS = {
    torch.float32: (8, 23),
    torch.float16: (5, 10),
    torch.bfloat16: (8, 7),
    torch.float8_e5m2: (5, 2),
    torch.float8_e4m3fn: (4, 3),
}
DTYPES = {str(dtype): dtype for dtype in LAYOUTS}

# Where rounding decides, each value exact in float32, so that torch's cast (through float32)
# and rounding once agree: just above e5m2's tie between 1 and 1.25 (2^-20 is below fp16's
# precision: a cast through fp16 lands on the tie, then goes to even), two exact fp16 ties (to
# even: down, then up), and values between a format's largest finite number and the point where
# it overflows (fp16's 65504 and 65520, e5m2's 57344 and 61440, bf16's largest and the next tie):
# each rounds to the largest, not to inf. And NaN, which any NaN pattern answers.
ROUNDING = [1.125 + 2**-20, 1 + 2**-11, 1 + 3 * 2**-11, 65510.0, 60000.0]
ROUNDING += [(2 - 2**-7 + 2**-9) * 2.0**127, math.nan]
# The cases a learner's check cell uses (seed 0): ordinary numbers, fp16's largest, subnormals,
# a value that underflows fp16, both zeros, infinity, one that overflows fp16, two in fp8's
# range, and ROUNDING's.
CASES = [1.0, -2.0, 0.1, 3.14159, 65504.0, -1e-3, 6e-8, 1e-40, 0.0, -0.0, math.inf, 1e5]
CASES += [300.0, -0.0137, *ROUNDING]
EDGES = [0.0, -0.0, math.inf, -math.inf, 65504.0, 1e-40, *ROUNDING]


def cases(seed: int) -> list[float]:
    """Seed 0: CASES. Other seeds: the edge cases, ten random values over fp32's range and five
    over fp8's."""
    if seed == 0:
        return list(CASES)
    generator = torch.Generator().manual_seed(seed)
    exponents = torch.empty(10, dtype=torch.float64).uniform_(-44.0, 38.0, generator=generator)
    fp8_range = torch.empty(5, dtype=torch.float64).uniform_(-5.0, 4.0, generator=generator)
    exponents = torch.cat([exponents, fp8_range])
    mantissas = torch.empty(15, dtype=torch.float64).uniform_(1.0, 10.0, generator=generator)
    signs = torch.randint(0, 2, (15,), generator=generator) * 2 - 1
    # Each drawn value is a float32 number: torch casts a Python float to a 16- or 8-bit format
    # through float32, rounding twice, where NumPy or struct round once; on a float32 number the
    # two agree (a value just above an fp16 tie, -14484.000155, failed a NumPy answer at seed 223).
    values = (signs * mantissas * 10.0**exponents).float().tolist()
    return EDGES + [float(v) for v in values]


def _whole(field) -> int:
    """``field`` as an int if it is a whole number (an int, a numpy or torch integer, or a float
    such as 127.0); ValueError for a fraction such as 127.9, TypeError for a string."""
    if isinstance(field, (str, bytes)):
        raise TypeError
    try:
        return operator.index(field)
    except TypeError:
        number = float(field)
        if not number.is_integer():
            raise ValueError from None
        return int(number)


def observe(decompose, seed: int) -> list[dict]:
    """``decompose(value, dtype)`` for every case and format: three ints, or what went wrong."""
    results = []
    for dtype in LAYOUTS:
        for value in cases(seed):
            got, error = call_answer(decompose, value, dtype)
            record = {"value": value, "dtype": str(dtype), "error": error}
            if error is None:
                try:
                    record["fields"] = [_whole(x) for x in got]
                    if len(record["fields"]) != 3:
                        raise ValueError
                except (TypeError, ValueError):
                    record["fields"], record["returned"] = None, shown(got)
            results.append(record)
    return results


def _a_nan(fields: list[int], dtype: torch.dtype) -> bool:
    """Whether (sign, exponent, mantissa) encode a NaN in ``dtype``: any sign, every exponent
    bit set and a mantissa other than 0 (e4m3fn, which has no inf: every mantissa bit set too).
    torch stores one of them; the exercise asks for the fields, not torch's choice of NaN."""
    exponent_bits, mantissa_bits = LAYOUTS[dtype]
    sign, exponent, mantissa = fields
    ones, top = (1 << exponent_bits) - 1, (1 << mantissa_bits) - 1
    if dtype == torch.float8_e4m3fn:  # no inf: its one NaN has every mantissa bit set
        return sign in (0, 1) and exponent == ones and mantissa == top
    return sign in (0, 1) and exponent == ones and 0 < mantissa <= top


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
        if math.isnan(value) and not _a_nan(got["fields"], dtype):
            mantissa_of_nan = (
                "every mantissa bit set"
                if dtype == torch.float8_e4m3fn
                else "a mantissa other than 0"
            )
            raise ExerciseFailed(
                f"decompose(nan, {dtype}) returned (sign, exponent, mantissa) = "
                f"{tuple(got['fields'])}, which is no NaN in {dtype}: a NaN has every exponent bit "
                f"set and {mantissa_of_nan} (torch stores {tuple(want['fields'])})."
            )
        if math.isnan(value):
            continue
        if got["fields"] != want["fields"]:
            width = 1 + exponent_bits + mantissa_bits
            bits = (sign << (width - 1)) | (exponent << mantissa_bits) | mantissa
            raise ExerciseFailed(
                f"decompose({value}, {dtype}) returned (sign, exponent, mantissa) = "
                f"{tuple(got['fields'])}; torch casts {value} to the {width} bits "
                f"{bits:0{width}b}, whose fields are {tuple(want['fields'])}."
            )


register("01.bit_fields", observe, compare)


# ---- Exercise 2: the value of a bit pattern in any IEEE-754-style layout -------------------------
# (exponent bits, mantissa bits, patterns): fp16, bf16 and fp8 e5m2 as torch has them, then
# layouts torch lacks. e5m2 is IEEE-style (an all-ones exponent is inf or NaN); e4m3fn is not.
PATTERNS = [
    (5, 10, [0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8001, 0x03FF, 0x0400, 0x0000, 0x8000]),
    (5, 10, [0x7C00, 0xFC00, 0x7E00]),  # fp16's infinities and a NaN
    (8, 7, [0x3F80, 0x0001, 0x7F7F, 0xFF80]),
    (5, 2, [0x3C, 0x01, 0x03, 0x7B, 0x7C, 0xFD]),
    (3, 4, [0b0_011_0000, 0b0_000_0001, 0b0_111_0000, 0b1_110_1111, 0b0_111_1000]),
    (6, 9, [0b0_011111_000000000, 0b1_000000_100000000, 0b0_111110_111111111]),
    # Wider than float32 (an answer computing in float32 passed every seed without it): 1 plus
    # the layout's step, its smallest subnormal and its largest finite number, none a float32.
    (9, 30, [(255 << 30) | 1, 1, (510 << 30) | ((1 << 30) - 1)]),
]


def patterns(seed: int) -> list[tuple[int, int, int]]:
    """(bits, exponent_bits, mantissa_bits) to decode: PATTERNS for seed 0, else random layouts
    (2 to 8 exponent bits, 1 to 12 mantissa bits, then one of 9 to 11 and 24 to 40, wider than
    float32) with both zeros, the smallest subnormal of each sign, the largest finite number,
    both infinities and a NaN each (a sign dropped from -inf or from a subnormal, or added to +0,
    passed most seeds when only one sign was drawn)."""
    if seed == 0:
        return [(bits, e, m) for e, m, chosen in PATTERNS for bits in chosen]
    generator = torch.Generator().manual_seed(seed)
    drawn = []
    for index in range(5):
        wide = index == 4
        e = int(torch.randint(9 if wide else 2, 12 if wide else 9, (1,), generator=generator))
        m = int(torch.randint(24 if wide else 1, 41 if wide else 13, (1,), generator=generator))
        width = 1 + e + m
        top = ((1 << e) - 1) << m
        negative = 1 << (width - 1)
        special = [0, negative, 1, negative | 1, top - 1, top, negative | top, top | 1]
        randoms = torch.randint(0, 1 << width, (4,), generator=generator).tolist()
        drawn += [(bits, e, m) for bits in special + randoms]
    return drawn


def observe_values(value_of, seed: int) -> list[dict]:
    """``value_of(bits, exponent_bits, mantissa_bits)`` for every pattern, as a float."""
    results = []
    for bits, e, m in patterns(seed):
        got, error = call_answer(value_of, bits, e, m)
        record = {"case": [bits, e, m], "error": error}
        if error is None:
            try:
                if isinstance(got, (str, bytes)):  # float("nan") would take a string
                    raise TypeError
                record["value"] = float(got)
            except (TypeError, ValueError):
                record["value"], record["returned"] = None, shown(got)
        results.append(record)
    return results


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (
        a == b and math.copysign(1, a) == math.copysign(1, b)
    )


def _fields(bits: int, e: int, m: int) -> tuple[int, int, int]:
    """(sign bit, exponent field, mantissa field) of ``bits``."""
    return bits >> (e + m), (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)


def _misreadings(bits: int, e: int, m: int, value: float) -> list[tuple[float, str]]:
    """Values that common misreadings of the pattern give (``value`` is the right one), each with
    how it differs from the right one, as significand x 2^exponent."""
    sign, exponent, mantissa = _fields(bits, e, m)
    bias, s, fraction = (1 << (e - 1)) - 1, -1.0 if sign else 1.0, mantissa / (1 << m)
    found = [(-value, "yours has the other sign")]
    if exponent == 0:
        right = f"the reference's {fraction:g} x 2^{1 - bias}"
        found += [
            (s * (1 + fraction) * 2.0 ** (1 - bias), f"yours is {1 + fraction:g} x 2^{1 - bias}"),
            (s * fraction * 2.0**-bias, f"yours is {fraction:g} x 2^{-bias}"),
        ]
    elif exponent == (1 << e) - 1:
        right = f"the exponent field is all ones ({exponent})"
        found.append((s * (1 + fraction) * 2.0 ** (exponent - bias), ""))
    else:
        right = f"the reference's {1 + fraction:g} x 2^{exponent - bias}"
        found += [
            (
                s * (1 + fraction) * 2.0 ** (exponent - bias - 1),
                f"yours is {1 + fraction:g} x 2^{exponent - bias - 1}",
            ),
            (
                s * fraction * 2.0 ** (exponent - bias),
                f"yours is {fraction:g} x 2^{exponent - bias}",
            ),
        ]
    return [(v, f"{text}, {right}" if text else right) for v, text in found[1:]] + found[:1]


def compare_values(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        bits, e, m = want["case"]
        call = f"value_of(0b{bits:0{1 + e + m}b}, {e}, {m})"
        fail_on_error(got["error"], call)
        if got.get("value") is None:
            raise ExerciseFailed(
                f"{call} returned {got.get('returned')}; the reference returns a number."
            )
        if _same(got["value"], want["value"]):
            continue
        how = next(
            (w for v, w in _misreadings(bits, e, m, want["value"]) if _same(v, got["value"])), ""
        )
        sign, exponent, mantissa = _fields(bits, e, m)
        raise ExerciseFailed(
            f"{call} returned {got['value']!r}, but 1 sign, {e} exponent and {m} mantissa bits "
            f"encode {want['value']!r} (sign bit {sign}, exponent field {exponent}, mantissa "
            f"field {mantissa})" + (f": {how}." if how else ".")
        )


register("01.value_of", observe_values, compare_values)
