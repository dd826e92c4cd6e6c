"""Statistics for comparing runs over seeds: Student-t quantiles, confidence intervals, and the
paired comparison of two modes trained from the same seeds; and the split of a step's time into a
fixed cost and a cost per item."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with an integer number ``df`` of degrees of freedom.

    Exact in finitely many terms (Abramowitz and Stegun 26.7.3 and 26.7.4): with
    theta = atan(t / sqrt(df)), P(|T| <= t) is a short sum of powers of cos(theta).
    """
    if int(df) != df or df < 1:
        raise ValueError(f"t needs a whole number >= 1 of degrees of freedom, got {df}.")
    df = int(df)
    theta = math.atan(abs(t) / math.sqrt(df))
    inside = _two_sided_mass(theta, df)
    return 0.5 + math.copysign(inside / 2, t)


def _two_sided_mass(theta: float, df: int) -> float:
    """P(|T| <= sqrt(df) tan(theta)): A(t | df) of Abramowitz and Stegun 26.7.3/26.7.4."""
    sin, cos = math.sin(theta), math.cos(theta)
    cos2 = cos * cos
    if df % 2 == 0:  # sin(theta) (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...), df/2 terms
        term = total = 1.0
        for j in range(1, df // 2):
            term *= cos2 * (2 * j - 1) / (2 * j)
            total += term
        return sin * total
    if df == 1:
        return 2 * theta / math.pi
    term = total = 1.0  # 2/pi (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
    for j in range(1, (df - 1) // 2):
        term *= cos2 * (2 * j) / (2 * j + 1)
        total += term
    return 2 / math.pi * (theta + sin * cos * total)


@functools.lru_cache(maxsize=4096)  # a pure function; searches over n ask for the same ones
def t_quantile(probability: float, df: int) -> float:
    """The ``probability`` quantile of Student's t with ``df`` (whole) degrees of freedom.

    Inverts the exact ``t_cdf`` by bisection on theta = atan(t / sqrt(df)) in [0, pi/2): the
    CDF is monotonic there and the interval is finite, so bisection reaches the closest double.
    (scipy.stats.t.ppf answers the same; scipy is not a dependency of the course.)
    """
    if not 0.5 <= probability < 1:
        raise ValueError(f"probability must be in [0.5, 1), got {probability}.")
    if int(df) != df or df < 1:
        raise ValueError(
            f"t needs a whole number >= 1 of degrees of freedom, got {df} (use >= 2 values)."
        )
    df = int(df)
    target = 2 * probability - 1  # P(|T| <= t)
    if target == 0:
        return 0.0
    low, high = 0.0, math.pi / 2
    while True:
        middle = (low + high) / 2
        if middle in (low, high):  # adjacent doubles: the bisection is done
            break
        if _two_sided_mass(middle, df) < target:
            low = middle
        else:
            high = middle
    return math.sqrt(df) * math.tan(high)


def t_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the two-sided Student-t confidence interval of ``values``."""
    values = [float(v) for v in values]
    if len(values) < 2:
        raise ValueError(f"A confidence interval needs at least 2 values, got {len(values)}.")
    n = len(values)
    std = math.sqrt(_squared_deviations(values) / (n - 1))
    return sum(values) / n, t_quantile(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)


def _squared_deviations(values: list[float]) -> float:
    """The sum of squared deviations of ``values`` from their mean."""
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values)


def two_sample_half_width(a, b, confidence: float = 0.95) -> float:
    """Half-width of the two-sided t interval of ``mean(b) - mean(a)`` taken as two independent
    samples (pooled variance, ``len(a) + len(b) - 2`` degrees of freedom): what the same runs
    would give if nothing paired them."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"A confidence interval needs at least 2 values, got {len(a)}, {len(b)}.")
    df = len(a) + len(b) - 2
    squares = _squared_deviations(a) + _squared_deviations(b)
    pooled = math.sqrt(squares / df * (1 / len(a) + 1 / len(b)))
    return t_quantile(0.5 + confidence / 2, df) * pooled


@dataclass(frozen=True)
class PairedDifference:
    """``candidate - reference`` per seed, their mean and its t interval."""

    differences: tuple[float, ...]
    mean: float
    half_width: float
    confidence: float

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    @property
    def includes_zero(self) -> bool:
        return self.low <= 0 <= self.high

    def within(self, margin: float) -> bool:
        """True when the whole interval lies inside (-margin, +margin)."""
        return -margin < self.low and self.high < margin


def paired_difference(reference, candidate, confidence: float = 0.95) -> PairedDifference:
    """The paired comparison of two modes run from the same seeds.

    ``reference[i]`` and ``candidate[i]`` come from the same seed (same initial weights, same
    batches), so their difference cancels what the seed does to both; the t interval is taken
    over the per-seed differences, with n - 1 degrees of freedom for n seeds.
    """
    reference, candidate = [float(v) for v in reference], [float(v) for v in candidate]
    if len(reference) != len(candidate):
        raise ValueError(
            f"A paired comparison needs one value per seed in each mode, got {len(reference)} "
            f"and {len(candidate)}."
        )
    differences = tuple(c - r for r, c in zip(reference, candidate, strict=True))
    mean, half = t_interval(differences, confidence)
    return PairedDifference(differences, mean, half, confidence)


def fixed_cost(small_s: float, large_s: float, factor: float) -> float:
    """The fixed part of a step timed at a batch (``small_s``) and at ``factor`` times it
    (``large_s``), read as time = fixed + per_item x batch: (factor x small - large) / (factor - 1),
    kept within [0, the shorter step] (two noisy timings can put the line's ends outside it)."""
    if factor <= 1:
        raise ValueError(f"the larger batch must be more than 1x the smaller, got {factor}x.")
    return min(max((factor * small_s - large_s) / (factor - 1), 0.0), small_s, large_s)
