"""Lesson 08 exercise: a Student-t confidence interval of test accuracy over seeds."""

from __future__ import annotations

import math
import statistics

import torch

from ..stats import t_quantile
from . import ExerciseFailed, exercise
from .solutions.lesson_08 import accuracy_interval

# The cases a learner's check cell (seed 0) runs: (accuracies over seeds, confidence).
SEED0_CASES = [
    ([0.971, 0.975, 0.969, 0.978, 0.973], 0.95),
    ([0.90, 0.93], 0.95),  # two seeds: t(0.975, 1) = 12.7, a very wide interval
    ([0.981, 0.979, 0.984, 0.977], 0.99),
    ([0.96, 0.96, 0.96], 0.95),  # no spread: a zero half-width
]
REL_TOL = 1e-4


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
    return cases


def _pair(result):
    """(mean, half-width) as two floats, or None when ``result`` is not such a pair."""
    try:
        mean, half = result
        return [float(mean), float(half)]
    except (TypeError, ValueError):
        return None


def observe(fn, seed: int) -> dict:
    """Call ``fn(values, confidence)`` on the cases of ``seed``; record inputs and results."""
    rows = []
    for values, confidence in _cases(seed):
        row = {"values": list(values), "confidence": confidence, "result": None, "error": None}
        try:
            result = fn(list(values), confidence)
            row["result"] = _pair(result)
            if row["result"] is None:
                row["error"] = f"returned {result!r}, not a pair of numbers"
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            row["error"] = f"raised {type(error).__name__}: {error}"
        rows.append(row)
    return {"rows": rows}


def _mistakes(values: list[float], confidence: float) -> dict[str, float]:
    """The half-widths the usual mistakes give, each with what to say about it."""
    n, s = len(values), statistics.stdev(values)
    two_sided = 0.5 + confidence / 2
    t = t_quantile(two_sided, n - 1)
    z = statistics.NormalDist().inv_cdf(two_sided)
    return {
        f"used the normal quantile ({z:.3g}) instead of Student's t with n - 1 = {n - 1} "
        f"degrees of freedom ({t:.3g})": z * s / math.sqrt(n),
        f"used n = {n} degrees of freedom; the sample standard deviation leaves n - 1": (
            t_quantile(two_sided, n) * s / math.sqrt(n)
        ),
        "used the population standard deviation (divided by n); use the sample one "
        "(divided by n - 1, statistics.stdev)": t * statistics.pstdev(values) / math.sqrt(n),
        f"took t at {confidence:g}: a two-sided {confidence:.0%} interval leaves "
        f"{(1 - confidence) / 2:g} in each tail, so take it at {two_sided:g}": (
            t_quantile(confidence, n - 1) * s / math.sqrt(n)
        ),
        "divided by n: the standard error of a mean is s / sqrt(n)": t * s / n,
        "did not divide by sqrt(n): that is the spread of one run, not of the mean": t * s,
    }


def compare(mine: dict, reference: dict, seed: int) -> None:
    """Raise ExerciseFailed, in plain words, at the first case where ``mine`` differs."""
    for got, want in zip(mine["rows"], reference["rows"], strict=True):
        values, confidence = got["values"], got["confidence"]
        where = f"accuracy_interval({values}, {confidence})"
        if got["error"]:
            raise ExerciseFailed(f"{where} {got['error']}; return (mean, half_width).")
        (mean, half), (want_mean, want_half) = got["result"], want["result"]
        if not math.isclose(mean, want_mean, rel_tol=REL_TOL):
            raise ExerciseFailed(
                f"{where} gave the mean {mean:.6g}; the mean of the values is {want_mean:.6g}."
            )
        if math.isclose(half, want_half, rel_tol=REL_TOL, abs_tol=1e-12):
            continue
        for mistake, value in _mistakes(values, confidence).items():
            if want_half > 0 and math.isclose(half, value, rel_tol=REL_TOL):
                raise ExerciseFailed(
                    f"{where} gave the half-width {half:.4g}, expected {want_half:.4g}: "
                    f"you {mistake}."
                )
        raise ExerciseFailed(
            f"{where} gave the half-width {half:.4g}, expected {want_half:.4g}: "
            "t(0.5 + confidence / 2, n - 1) x s / sqrt(n), with s the sample standard deviation."
        )


@exercise("08.accuracy_interval", solution=accuracy_interval)
def check_accuracy_interval(fn):
    compare(observe(fn, 0), observe(accuracy_interval, 0), 0)
