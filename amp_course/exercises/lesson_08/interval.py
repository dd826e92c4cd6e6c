"""08.accuracy_interval: a one-sided Student-t lower bound of test accuracy over seeds, at any
number of seeds and confidence (the lesson shows two-sided intervals only)."""

from __future__ import annotations

import math
import statistics

import torch

from ...display import shown
from .. import ExerciseFailed
from ..answers import apart, as_number
from .calls import call_case

# The cases a learner's check cell (seed 0) runs: (accuracies over seeds, confidence).
SEED0_CASES = [
    ([0.971, 0.975, 0.969, 0.978, 0.973], 0.95),
    ([0.90, 0.93], 0.95),  # two seeds: t(0.95, 1) = 6.31, a bound far below the mean
    ([0.981, 0.979, 0.984, 0.977], 0.99),
    ([0.962, 0.958, 0.965, 0.960, 0.963, 0.959], 0.9),
    ([0.96, 0.96, 0.96], 0.95),  # no spread: the bound is the mean
    # Thirty seeds, where a rule that takes the normal quantile from 30 seeds on gives another
    # bound: the exercise asks for Student-t at every size.
    ([round(0.95 + 0.03 * math.sin(3 * i), 4) for i in range(30)], 0.99),
]
# A rule of thumb swaps Student-t for the normal distribution from this many seeds on.
LARGE_SAMPLE = 30
# Accuracies are fractions near 1, where float32 (torch.tensor's default) steps by 6e-8 and a
# right bound computed in it is a few steps off; the mistakes below differ by 1e-5 or more.
ABS_TOL = 1e-6


def _cases(seed: int) -> list[tuple[list[float], float]]:
    if seed == 0:
        return SEED0_CASES
    generator = torch.Generator().manual_seed(seed)
    cases = []
    for _ in range(5):
        n = int(torch.randint(2, 9, (1,), generator=generator))
        values = (0.9 + 0.08 * torch.rand(n, generator=generator, dtype=torch.float64)).tolist()
        confidence = [0.9, 0.95, 0.99][int(torch.randint(0, 3, (1,), generator=generator))]
        cases.append(([round(v, 4) for v in values], confidence))
    # And one set of LARGE_SAMPLE seeds, where the normal quantile's bound differs from Student-t's
    # (an answer that switched to it there passed every seed when no set had 9 seeds or more), at
    # 0.99, where n degrees of freedom in place of n - 1 still move the bound by 1e-5 or more.
    values = 0.9 + 0.08 * torch.rand(LARGE_SAMPLE, generator=generator, dtype=torch.float64)
    return [*cases, ([round(v, 4) for v in values.tolist()], 0.99)]


def observe_interval(fn, seed: int) -> dict:
    """Call ``fn(values, confidence)`` on the cases of ``seed``, then ``fn(values)`` on the first
    case's values (confidence None: the text's default, 0.95, which a default of 0.9 or 0.99
    passed while every call named its confidence); record inputs and results."""
    rows = []
    cases = _cases(seed)
    for values, confidence in [*cases, (cases[0][0], None)]:
        given = (list(values),) if confidence is None else (list(values), confidence)
        result, error = call_case(fn, given, rows)
        number = None if error else as_number(result)
        if error is None and number is None:
            error = f"returned {shown(result)}; the reference returns one number."
        rows.append(dict(values=list(values), confidence=confidence, result=number, error=error))
    return {"rows": rows}


def compare_interval(mine: dict, reference: dict, seed: int) -> None:
    """Raise ExerciseFailed at the first case where ``mine`` differs: how far below the mean the
    bound is, in units of the standard error s / sqrt(n) too."""
    for got, want in zip(mine["rows"], reference["rows"], strict=True):
        values, confidence = got["values"], got["confidence"]
        where = f"accuracy_lower_bound({values}, {confidence})"
        if confidence is None:
            where = f"accuracy_lower_bound({values}), its confidence left at the default, 0.95,"
        if got["error"]:
            raise ExerciseFailed(f"{where} {got['error']}")
        bound, want_bound = got["result"], want["result"]
        if not math.isfinite(bound):
            raise ExerciseFailed(
                f"{where} returned {bound}; the reference returns a finite bound below the values' "
                "mean."
            )
        if math.isclose(bound, want_bound, rel_tol=0, abs_tol=ABS_TOL):
            continue
        n, mean, s = len(values), statistics.mean(values), statistics.stdev(values)
        raise ExerciseFailed(
            f"{where} gave {apart(bound, want_bound)}: the values' mean is "
            f"{mean:.6g} and their sample standard deviation s {s:.4g}, with n = {n}; yours is "
            f"{_below(bound, mean, s / math.sqrt(n))}, the expected bound "
            f"{_below(want_bound, mean, s / math.sqrt(n))}."
        )


def _below(value: float, mean: float, error: float) -> str:
    """How far ``value`` lies below ``mean``, in units of the standard error too."""
    units = f", {abs(mean - value) / error:.4g} x s / sqrt(n)" if error else ""
    return f"{abs(mean - value):.4g} {'above' if value > mean else 'below'} the mean{units}"
