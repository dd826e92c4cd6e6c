"""A value's sign, exponent and mantissa bits in fp32, TF32, fp16, bf16 and fp8, rounded as torch
rounds."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import torch

from ..formats import FloatFormat, get_format
from ..precisions import NAMES

# The training precisions (fp32, tf32, fp16, bf16), then the fp8 formats of lessons 01 and 08.
INSPECTED_FORMATS = (*NAMES, "fp8 e4m3", "fp8 e5m2")

# Integer dtypes with the same width, so ``tensor.view(int_dtype)`` exposes a format's bits.
_INT_VIEW = {32: torch.int32, 16: torch.int16, 8: torch.uint8}


def int_view(stored: torch.Tensor) -> int:
    """The bits of a one-element float tensor as an unsigned integer (the sign bit on top).

    ``view`` reinterprets the bits as a (signed) integer of the same width; the mask makes it
    unsigned.
    """
    width = torch.finfo(stored.dtype).bits
    return stored.view(_INT_VIEW[width]).item() & (2**width - 1)


@dataclass(frozen=True)
class BitFields:
    """One value rounded into one format, split into its bit fields."""

    format: str
    value: float  # what was asked for
    stored: float  # the nearest value the format holds (rounded once, from the exact value)
    sign: int
    exponent: int  # the raw (biased) exponent field
    mantissa: int  # the raw mantissa (fraction) field
    exponent_bits: int
    mantissa_bits: int
    kind: str  # "zero", "subnormal", "normal", "inf" or "nan"
    next_up: float  # the next representable value towards +inf (nan where there is none)
    outcome: str = ""  # what rounding did, in words, where it lost the value: overflow...

    @property
    def bits(self) -> str:
        """The bit pattern as ``sign exponent mantissa``, e.g. ``0 01111 0000000000``."""
        e, m = self.exponent_bits, self.mantissa_bits
        mantissa = f"{self.mantissa:0{m}b}" if m else ""
        return f"{self.sign} {self.exponent:0{e}b} {mantissa}"

    @property
    def error(self) -> float:
        """Rounding error, stored minus asked (nan when either is not finite)."""
        if math.isfinite(self.stored) and math.isfinite(self.value):
            return self.stored - self.value
        return math.nan

    @property
    def gap(self) -> float:
        """Distance to the next representable value: the resolution around this number."""
        if math.isfinite(self.stored) and math.isfinite(self.next_up):
            return self.next_up - self.stored
        return math.nan


@cache
def _named_format(name: str) -> FloatFormat:
    return get_format(name)


def _format(fmt: str | FloatFormat) -> FloatFormat:
    fmt = _named_format(fmt) if isinstance(fmt, str) else fmt
    if fmt.name not in INSPECTED_FORMATS:
        raise ValueError(f"The inspector knows {', '.join(INSPECTED_FORMATS)}; got {fmt.name!r}.")
    return fmt


def _has_inf(fmt: FloatFormat) -> bool:
    # e4m3fn ("fn" = finite, NaN only) spends the all-ones exponent on normal numbers.
    return fmt.name != "fp8 e4m3"


def compose(sign: int, exponent: int, mantissa: int, fmt: str | FloatFormat) -> float:
    """The value a bit pattern encodes, from the IEEE-754 rules (and e4m3fn's exception)."""
    fmt = _format(fmt)
    e_bits, m_bits = fmt.exponent_bits, fmt.mantissa_bits
    if not (sign in (0, 1) and 0 <= exponent < 2**e_bits and 0 <= mantissa < 2**m_bits):
        raise ValueError(
            f"sign, exponent, mantissa ({sign}, {exponent}, {mantissa}) do not fit "
            f"{fmt.name}'s 1/{e_bits}/{m_bits} bits."
        )
    top = 2**e_bits - 1
    if _has_inf(fmt) and exponent == top:
        return (-1) ** sign * math.inf if mantissa == 0 else math.nan
    if not _has_inf(fmt) and exponent == top and mantissa == 2**m_bits - 1:
        return math.nan
    bias = 2 ** (e_bits - 1) - 1
    if exponent == 0:  # subnormal: no implicit leading 1, exponent fixed at 1 - bias
        return (-1) ** sign * math.ldexp(mantissa, 1 - bias - m_bits)
    return (-1) ** sign * math.ldexp(2**m_bits + mantissa, exponent - bias - m_bits)


def _nearest(value: float, fmt: FloatFormat) -> float:
    """Finite ``value`` rounded once, from its exact binary value, to ``fmt``'s grid (ties to even).

    torch casts a float64 to a 16- or 8-bit type through float32, and TF32 is fp32 rounded again,
    so a double just above a rounding tie would be rounded twice and could land on the wrong
    neighbour; this rounds it once. Above the largest finite value the grid goes on: the caller's
    cast of the result then overflows to inf, or saturates, exactly as torch does.
    """
    if value == 0:
        return value  # keeps the sign of -0.0
    bias = 2 ** (fmt.exponent_bits - 1) - 1
    binade = max(math.frexp(value)[1] - 1, 1 - bias)  # subnormals share the lowest normal binade
    step = Fraction(2) ** (binade - fmt.mantissa_bits)
    nearest = round(abs(Fraction(value)) / step) * step  # round() on a Fraction: half to even
    try:
        return math.copysign(float(nearest), value)
    except OverflowError:  # rounded up past the largest double: far beyond every format
        return math.copysign(math.inf, value)


def _pattern(value: float, fmt: FloatFormat) -> int:
    """The unsigned bit pattern of ``value`` rounded into ``fmt`` (TF32 in fp32's layout).

    Finite values are rounded once here; the float32 holding the result converts to the format
    exactly (or overflows: inf, or e4m3's saturation, as torch casts it). TF32 has no torch
    dtype: its pattern is the top 19 bits of that exactly representable float32.
    """
    exact = _nearest(value, fmt) if math.isfinite(value) else value
    as_fp32 = torch.tensor(exact, dtype=torch.float64).to(torch.float32)  # exact, or inf
    if fmt.dtype is None:  # tf32
        return int_view(as_fp32) >> (23 - fmt.mantissa_bits)
    return int_view(as_fp32.to(fmt.dtype))


def _fields(pattern: int, fmt: FloatFormat) -> tuple[int, int, int]:
    m_bits, e_bits = fmt.mantissa_bits, fmt.exponent_bits
    sign = pattern >> (e_bits + m_bits)
    return sign, (pattern >> m_bits) & (2**e_bits - 1), pattern & (2**m_bits - 1)


def _next_up(pattern: int, fmt: FloatFormat) -> float:
    width = 1 + fmt.exponent_bits + fmt.mantissa_bits
    sign_bit = 1 << (width - 1)
    value = compose(*_fields(pattern, fmt), fmt)
    if math.isnan(value) or value == math.inf:
        return math.nan
    if pattern == sign_bit:  # -0: the next value up is the smallest positive subnormal
        return compose(0, 0, 1, fmt)
    # Patterns of one sign are ordered like the magnitudes they encode, so one step up in value
    # is +1 on the pattern for positives and -1 for negatives.
    return compose(*_fields(pattern - 1 if pattern & sign_bit else pattern + 1, fmt), fmt)


def decompose(value: float, fmt: str | FloatFormat) -> BitFields:
    """Round ``value`` to the nearest value ``fmt`` holds and split the result into bit fields.

    The rounding is torch's (nearest, ties to even; inf, NaN and fp8 e4m3 saturation as torch
    casts them), done once from the exact value of the float64 ``value``.
    """
    fmt = _format(fmt)
    value = float(value)
    pattern = _pattern(value, fmt)
    sign, exponent, mantissa = _fields(pattern, fmt)
    stored = compose(sign, exponent, mantissa, fmt)
    if math.isnan(stored):
        kind = "nan"
    elif math.isinf(stored):
        kind = "inf"
    elif exponent == 0:
        kind = "zero" if mantissa == 0 else "subnormal"
    else:
        kind = "normal"
    return BitFields(
        fmt.name,
        value,
        stored,
        sign,
        exponent,
        mantissa,
        fmt.exponent_bits,
        fmt.mantissa_bits,
        kind,
        _next_up(pattern, fmt),
        _outcome(value, stored, fmt),
    )


def _outcome(value: float, stored: float, fmt: FloatFormat) -> str:
    """Overflow, saturation or underflow in words; "" where the value landed on a neighbour."""
    if math.isnan(value) or value == 0 or (math.isinf(value) and value == stored):
        return ""
    beyond = math.isinf(value) or abs(_nearest(value, fmt)) > fmt.max
    top = f"the largest finite {fmt.name} value is {fmt.max:g}"
    if beyond and math.isinf(stored):
        return f"overflow: rounds to {stored:+g} ({top})"
    if beyond and math.isnan(stored):
        return f"overflow: {fmt.name} has no inf, this torch gives NaN ({top})"
    if beyond:
        return f"saturated: clamped to {stored:g}, {fmt.name} has no inf"
    if stored == 0:
        half = fmt.smallest_subnormal / 2
        return f"underflow: rounds to 0 (at or below {half:.3g}, half the smallest subnormal)"
    return ""


def representable_values(fmt: str | FloatFormat, positive_only: bool = True) -> torch.Tensor:
    """Every finite value of an 8- or 16-bit format, sorted (float64), by enumerating bit
    patterns."""
    fmt = _format(fmt)
    if fmt.dtype is None or fmt.bits > 16:
        raise ValueError(
            f"{fmt.name} has 2^{fmt.bits} patterns: too many to enumerate; use fp16, bf16 or fp8."
        )
    patterns = torch.arange(2**fmt.bits, dtype=torch.int32)
    if fmt.bits == 16:
        patterns = torch.where(patterns >= 2**15, patterns - 2**16, patterns)
    values = patterns.to(_INT_VIEW[fmt.bits]).view(fmt.dtype).to(torch.float64)
    values = values[torch.isfinite(values)]
    if positive_only:
        values = values[values > 0]
    return torch.unique(values)  # sorted; drops the duplicate +0/-0


def inspect(value: float, formats=INSPECTED_FORMATS) -> list[BitFields]:
    """``decompose`` in every format of ``formats``."""
    return [decompose(value, name) for name in formats]
