"""Lesson 08 exercises: a one-sided Student-t bound of test accuracy over seeds (the lesson shows
two-sided intervals only), and the number of seeds a paired comparison needs."""

from __future__ import annotations

import math
import statistics

import torch

from ..stats import t_quantile
from . import ExerciseFailed, register

# The cases a learner's check cell (seed 0) runs: (accuracies over seeds, confidence).
SEED0_CASES = [
    ([0.971, 0.975, 0.969, 0.978, 0.973], 0.95),
    ([0.90, 0.93], 0.95),  # two seeds: t(0.95, 1) = 6.31, a bound far below the mean
    ([0.981, 0.979, 0.984, 0.977], 0.99),
    ([0.962, 0.958, 0.965, 0.960, 0.963, 0.959], 0.9),
    ([0.96, 0.96, 0.96], 0.95),  # no spread: the bound is the mean
]
ABS_TOL = 1e-7  # accuracies are fractions near 1; the mistakes below differ by 1e-5 or more


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


def observe(fn, seed: int) -> dict:
    """Call ``fn(values, confidence)`` on the cases of ``seed``; record inputs and results."""
    rows = []
    for values, confidence in _cases(seed):
        row = {"values": list(values), "confidence": confidence, "result": None, "error": None}
        try:
            result = fn(list(values), confidence)
            if isinstance(result, (int, float)) and not isinstance(result, bool):
                row["result"] = float(result)
            else:
                row["error"] = f"returned {result!r}, not one number"
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            row["error"] = f"raised {type(error).__name__}: {error}"
        rows.append(row)
    return {"rows": rows}


def _mistakes(values: list[float], confidence: float) -> dict[str, float]:
    """The bounds the usual mistakes give, each with what to say about it."""
    n, mean, s = len(values), statistics.mean(values), statistics.stdev(values)
    t = t_quantile(confidence, n - 1)
    two_sided = 0.5 + confidence / 2
    z = statistics.NormalDist().inv_cdf(confidence)
    return {
        f"is the lower end of the two-sided {confidence:.0%} interval, which leaves "
        f"{(1 - confidence) / 2:g} below it; a one-sided bound leaves all {1 - confidence:g} "
        f"below it, so its t is taken at {confidence:g}, not at {two_sided:g}": (
            mean - t_quantile(two_sided, n - 1) * s / math.sqrt(n)
        ),
        f"uses the normal quantile ({z:.3g}) instead of Student's t with n - 1 = {n - 1} "
        f"degrees of freedom ({t:.3g})": mean - z * s / math.sqrt(n),
        f"uses n = {n} degrees of freedom; the sample standard deviation leaves n - 1": (
            mean - t_quantile(confidence, n) * s / math.sqrt(n)
        ),
        "uses the population standard deviation (divided by n); the sample one divides by "
        "n - 1 (statistics.stdev)": mean - t * statistics.pstdev(values) / math.sqrt(n),
        "divides by n: the standard error of a mean is s / sqrt(n)": mean - t * s / n,
        "does not divide by sqrt(n): that is the spread of one run, not of the mean": mean - t * s,
        "is above the mean: that is an upper bound": mean + t * s / math.sqrt(n),
        "is the distance below the mean, not the bound itself": t * s / math.sqrt(n),
    }


def compare(mine: dict, reference: dict, seed: int) -> None:
    """Raise ExerciseFailed, in plain words, at the first case where ``mine`` differs."""
    for got, want in zip(mine["rows"], reference["rows"], strict=True):
        values, confidence = got["values"], got["confidence"]
        where = f"accuracy_lower_bound({values}, {confidence})"
        if got["error"]:
            raise ExerciseFailed(f"{where} {got['error']}; return the bound as one number.")
        bound, want_bound = got["result"], want["result"]
        if math.isclose(bound, want_bound, rel_tol=0, abs_tol=ABS_TOL):
            continue
        said = f"{where} gave {bound:.6g}, expected {want_bound:.6g}"
        for mistake, value in _mistakes(values, confidence).items():
            if math.isclose(bound, value, rel_tol=0, abs_tol=ABS_TOL):
                raise ExerciseFailed(f"{said}: your bound {mistake}.")
        mean = statistics.mean(values)
        raise ExerciseFailed(
            f"{said}: yours is {mean - bound:.4g} below the mean of the values ({mean:.6g}), the "
            f"expected bound {mean - want_bound:.4g} below it."
        )


register("08.accuracy_interval", observe, compare)


# ---- 08.seeds_needed: plan the seeds of a paired comparison from a pilot ----------------------

# (reference accuracies, candidate accuracies, margin, confidence) of the learner's check cell.
SEEDS_CASES = [
    # Seeds move both modes together (0.979 to 0.990); the differences are tight.
    (
        [0.9871, 0.9902, 0.9794, 0.9855, 0.9833],
        [0.9866, 0.9905, 0.9785, 0.9852, 0.9829],
        0.001,
        0.95,
    ),
    # Three pilot seeds, looser differences, a 99% interval.
    ([0.9812, 0.9846, 0.9790], [0.9830, 0.9819, 0.9801], 0.0025, 0.99),
    # The same difference at every seed: no spread, so the fewest seeds an interval allows.
    ([0.9720, 0.9810, 0.9765, 0.9788], [0.9700, 0.9790, 0.9745, 0.9768], 0.001, 0.95),
    # A small margin against a noisy pilot: many seeds.
    (
        [0.9650, 0.9702, 0.9688, 0.9671, 0.9695, 0.9660],
        [0.9668, 0.9680, 0.9701, 0.9644, 0.9712, 0.9655],
        0.0015,
        0.90,
    ),
]
MAX_SEEDS = 10_000  # a search that goes this far has a bug (or a margin of zero)


def _fewest(spread: float, margin: float, quantile, divisor=math.sqrt) -> int:
    """The first n >= 2 with quantile(n) x spread / divisor(n) <= margin (it falls with n)."""

    def narrow(n: int) -> bool:
        return quantile(n) * spread / divisor(n) <= margin

    low, high = 1, 2  # narrow(low) is False (no interval from one seed); find a high that fits
    while not narrow(high):
        if high >= MAX_SEEDS:
            return MAX_SEEDS
        low, high = high, 2 * high
    while high - low > 1:  # bisect: narrow(high) holds, narrow(low) does not
        middle = (low + high) // 2
        low, high = (low, middle) if narrow(middle) else (middle, high)
    return high


def _seeds_mistakes(reference, candidate, margin, confidence, right: int) -> dict[str, tuple]:
    """{mistake: (the answer it gives, what to say about it)} for the usual mistakes."""
    differences = [c - r for r, c in zip(reference, candidate, strict=True)]
    s = statistics.stdev(differences)
    two_sided = 0.5 + confidence / 2
    z = statistics.NormalDist().inv_cdf(two_sided)
    apart = math.hypot(statistics.stdev(reference), statistics.stdev(candidate))

    def t(df_offset=-1, probability=two_sided):
        return lambda n: t_quantile(probability, n + df_offset)

    return {
        "unpaired": (
            _fewest(apart, margin, t()),
            "used the spread of the accuracies, as if the two modes' runs were independent; a "
            "paired interval needs the standard deviation of the per-seed differences, which "
            "leaves out what a seed does to both modes",
        ),
        "normal": (
            _fewest(s, margin, lambda n: z),
            f"used the normal quantile ({z:.3g}) instead of Student's t with n - 1 degrees of "
            "freedom, which is larger at small n",
        ),
        "df": (
            _fewest(s, margin, t(df_offset=0)),
            "took t with n degrees of freedom; n seeds leave n - 1",
        ),
        "one-sided": (
            _fewest(s, margin, t(probability=confidence)),
            f"took t at {confidence:g}: a two-sided interval leaves {(1 - confidence) / 2:g} in "
            f"each tail, so take it at {two_sided:g}",
        ),
        "pstdev": (
            _fewest(statistics.pstdev(differences), margin, t()),
            "used the population standard deviation of the differences (divided by their count); "
            "use the sample one (n - 1, statistics.stdev)",
        ),
        "over-n": (
            _fewest(s, margin, t(), divisor=float),
            "divided by n: the standard error of a mean is s / sqrt(n)",
        ),
        "one-less": (
            right - 1,
            "returned the last number of seeds whose interval is still too wide; return the "
            "first one that is narrow enough",
        ),
        "one-more": (right + 1, "returned one seed more than needed: check n before increasing it"),
    }


def _seeds_cases(seed: int):
    if seed == 0:
        return SEEDS_CASES
    generator = torch.Generator().manual_seed(seed)

    def uniform(low, high):
        return low + (high - low) * float(torch.rand(1, generator=generator, dtype=torch.float64))

    cases = []
    while len(cases) < 5:
        n = int(torch.randint(3, 9, (1,), generator=generator))
        base = [uniform(0.95, 0.99) for _ in range(n)]
        shift, spread = uniform(-0.002, 0.002), uniform(0.0003, 0.003)
        noise = torch.randn(n, generator=generator, dtype=torch.float64).tolist()
        reference = [round(b, 4) for b in base]
        candidate = [round(b + shift + spread * e, 4) for b, e in zip(base, noise, strict=True)]
        margin = [0.001, 0.002, 0.003, 0.005][int(torch.randint(0, 4, (1,), generator=generator))]
        confidence = [0.9, 0.95, 0.99][int(torch.randint(0, 3, (1,), generator=generator))]
        if _unambiguous(reference, candidate, margin, confidence):
            cases.append((reference, candidate, margin, confidence))
    return cases


def _unambiguous(reference, candidate, margin, confidence) -> bool:
    """False when the answer is large, or a half-width lies within rounding of the margin."""
    spread = statistics.stdev(c - r for r, c in zip(reference, candidate, strict=True))
    for n in range(2, 200):
        half = t_quantile(0.5 + confidence / 2, n - 1) * spread / math.sqrt(n)
        if math.isclose(half, margin, rel_tol=1e-6):
            return False
        if half < margin:
            return True
    return False


def observe_seeds(fn, seed: int) -> dict:
    """Call ``fn(reference, candidate, margin, confidence)`` on the cases of ``seed``."""
    rows = []
    for reference, candidate, margin, confidence in _seeds_cases(seed):
        row = {
            "reference": list(reference),
            "candidate": list(candidate),
            "margin": margin,
            "confidence": confidence,
            "result": None,
            "type": None,
            "error": None,
        }
        try:
            result = fn(list(reference), list(candidate), margin, confidence)
            row["type"] = type(result).__name__
            if isinstance(result, (int, float)) and not isinstance(result, bool):
                row["result"] = result if math.isfinite(result) else None
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            row["error"] = f"raised {type(error).__name__}: {error}"
        rows.append(row)
    return {"rows": rows}


def compare_seeds(mine: dict, reference: dict, seed: int) -> None:
    """Raise ExerciseFailed at the first case where ``mine`` differs, naming the mistake that
    gives the answers of every case when one does."""
    rows = list(zip(mine["rows"], reference["rows"], strict=True))
    for got, _ in rows:
        where = _call(got)
        if got["error"]:
            raise ExerciseFailed(f"{where} {got['error']}; return the number of seeds.")
        if got["type"] != "int":
            raise ExerciseFailed(
                f"{where} returned a {got['type']} ({got['result']!r}); return a number of seeds "
                "as an int, such as int(n)."
            )
    wrong = [(got, want) for got, want in rows if got["result"] != want["result"]]
    if not wrong:
        return
    mistakes = [_seeds_mistakes(*_args(got), want["result"]) for got, want in rows]
    got, want = wrong[0]
    said = f"{_call(got)} returned {got['result']}, expected {want['result']}"
    for name in mistakes[0]:
        if all(m[name][0] == g["result"] for m, (g, _) in zip(mistakes, rows, strict=True)):
            raise ExerciseFailed(f"{said}: you {mistakes[rows.index((got, want))][name][1]}.")
    for got, want in wrong:
        if got["result"] < 2:
            raise ExerciseFailed(
                f"{_call(got)} returned {got['result']}: a t interval needs at least 2 seeds "
                f"(n - 1 >= 1 degree of freedom); the answer here is {want['result']}."
            )
    raise ExerciseFailed(
        f"{said}: the fewest n >= 2 whose paired interval, at this confidence and the pilot's "
        "spread of the per-seed differences, is no wider than +-margin."
    )


def _call(row: dict) -> str:
    return "seeds_needed({}, {}, {}, {})".format(*_args(row))


def _args(row: dict) -> tuple:
    return row["reference"], row["candidate"], row["margin"], row["confidence"]


register("08.seeds_needed", observe_seeds, compare_seeds)
