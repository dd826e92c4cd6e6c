"""08.seeds_needed: plan the seeds of a paired comparison from a pilot: the fewest n whose paired
Student-t interval's half-width is within the margin."""

from __future__ import annotations

import math
import statistics

import torch

from ...display import shown
from ...stats import t_quantile
from .. import ExerciseFailed
from ..answers import as_number, as_whole
from .calls import call_case
from .interval import LARGE_SAMPLE

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
    # A small margin against a noisy pilot: one seed more than the pilot ran.
    (
        [0.9650, 0.9702, 0.9688, 0.9671, 0.9695, 0.9660],
        [0.9668, 0.9680, 0.9701, 0.9644, 0.9712, 0.9655],
        0.0015,
        0.90,
    ),
    # A tight margin against a noisy pilot: dozens of seeds, where a normal quantile from
    # LARGE_SAMPLE seeds on gives fewer.
    (
        [0.9761, 0.9803, 0.9779, 0.9822, 0.9790],
        [0.9790, 0.9781, 0.9818, 0.9799, 0.9812],
        0.001,
        0.95,
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


def _seeds_cases(seed: int):
    if seed == 0:
        return SEEDS_CASES
    generator = torch.Generator().manual_seed(seed)

    def uniform(low, high):
        return low + (high - low) * float(torch.rand(1, generator=generator, dtype=torch.float64))

    # And a case each that the usual slips get wrong (for many pilots they give the right count):
    # a population standard deviation with n degrees of freedom (these two tell apart in one
    # case), a standard error over sqrt(n - 1) (it passed 62 grader seeds of 1000 where no case
    # told it apart), and a search started at the pilot's size (33 of 1000), which a count below
    # the pilot's seeds tells.
    cases, telling = [], {"population and n": _slips_tell, "sqrt(n - 1)": _minus_one_tells}
    telling["the pilot's size"] = lambda *case: _fewest_seeds(*case) < len(case[0])
    telling["a normal quantile"] = _normal_tells
    found = {}
    while len(cases) < 4 or len(found) < len(telling):
        n = int(torch.randint(3, 9, (1,), generator=generator))
        base = [uniform(0.95, 0.99) for _ in range(n)]
        shift, spread = uniform(-0.002, 0.002), uniform(0.0003, 0.003)
        noise = torch.randn(n, generator=generator, dtype=torch.float64).tolist()
        reference = [round(b, 4) for b in base]
        candidate = [round(b + shift + spread * e, 4) for b, e in zip(base, noise, strict=True)]
        margin = [0.001, 0.002, 0.003, 0.005][int(torch.randint(0, 4, (1,), generator=generator))]
        confidence = [0.9, 0.95, 0.99][int(torch.randint(0, 3, (1,), generator=generator))]
        if not _unambiguous(reference, candidate, margin, confidence):
            continue
        case = (reference, candidate, margin, confidence)
        slip = next((s for s, tells in telling.items() if s not in found and tells(*case)), None)
        if slip is not None:
            found[slip] = case
        elif len(cases) < 4:
            cases.append(case)
    # And, as the notebook's third case, a pilot with no spread (the same difference at every
    # seed): an answer that returns 1 or the pilot's size there passed every seed without one.
    n = int(torch.randint(3, 9, (1,), generator=generator))
    reference = [round(uniform(0.95, 0.99), 4) for _ in range(n)]
    shift = round(uniform(-0.003, 0.003), 4)
    flat = (reference, [round(r + shift, 4) for r in reference], 0.001, 0.95)
    return [*cases, *(found[slip] for slip in telling), flat]


def _differences(reference, candidate) -> list[float]:
    return [c - r for r, c in zip(reference, candidate, strict=True)]


def _fewest_seeds(reference, candidate, margin, confidence, divisor=math.sqrt) -> int:
    """The right count (the reference's rule), or with another divisor of the spread."""
    t = lambda n: t_quantile(0.5 + confidence / 2, n - 1)  # noqa: E731
    return _fewest(statistics.stdev(_differences(reference, candidate)), margin, t, divisor)


def _slips_tell(reference, candidate, margin, confidence) -> bool:
    """Whether a population standard deviation, and n instead of n - 1 degrees of freedom, each
    give another count than the right rule for this pilot."""
    differences = _differences(reference, candidate)
    sample, population = statistics.stdev(differences), statistics.pstdev(differences)
    t = lambda df: t_quantile(0.5 + confidence / 2, df)  # noqa: E731
    right = _fewest_seeds(reference, candidate, margin, confidence)
    return (
        _fewest(population, margin, lambda n: t(n - 1)) != right
        and _fewest(sample, margin, t) != right
    )


def _minus_one_tells(*case) -> bool:
    """Whether a standard error over sqrt(n - 1) gives another count than the right rule."""
    return _fewest_seeds(*case, divisor=lambda n: math.sqrt(n - 1)) != _fewest_seeds(*case)


def _normal_tells(reference, candidate, margin, confidence) -> bool:
    """Whether the normal quantile in place of Student-t's from LARGE_SAMPLE seeds on (a rule of
    thumb; it passed 31 of 40 grader seeds where every count was under 25) gives another count."""
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    t = lambda n: z if n >= LARGE_SAMPLE else t_quantile(0.5 + confidence / 2, n - 1)  # noqa: E731
    spread = statistics.stdev(_differences(reference, candidate))
    return _fewest(spread, margin, t) != _fewest_seeds(reference, candidate, margin, confidence)


def _unambiguous(reference, candidate, margin, confidence) -> bool:
    """False when the answer is large, or a half-width lies within rounding of the margin."""
    spread = statistics.stdev(_differences(reference, candidate))
    for n in range(2, 200):
        half = t_quantile(0.5 + confidence / 2, n - 1) * spread / math.sqrt(n)
        if math.isclose(half, margin, rel_tol=1e-6):
            return False
        if half < margin:
            return True
    return False


DEFAULT_CONFIDENCE = 0.95  # the blank's default, which the text asks for


def _default_case(cases) -> tuple:
    """The first case whose count at the default confidence differs from its counts at 0.9 and
    0.99 (one does at each of seeds 0 to 1499; else the first case), with its confidence left out
    (None): a default of 0.9 or 0.99 passed every seed while every call named its confidence."""
    telling = (
        case
        for case in cases
        if len({_fewest_seeds(*case[:3], c) for c in (0.9, DEFAULT_CONFIDENCE, 0.99)}) == 3
    )
    reference, candidate, margin, _ = next(telling, cases[0])
    return reference, candidate, margin, None


def observe_seeds(fn, seed: int) -> dict:
    """Call ``fn(reference, candidate, margin, confidence)`` on the cases of ``seed``, then
    without the confidence on one of them (``_default_case``)."""
    rows = []
    cases = _seeds_cases(seed)
    for reference, candidate, margin, confidence in [*cases, _default_case(cases)]:
        args = (list(reference), list(candidate), margin, confidence)
        result, error = call_case(fn, args if confidence is not None else args[:3], rows)
        row = {"reference": args[0], "candidate": args[1], "margin": margin}
        row.update(confidence=confidence, result=None, type=None, error=error)
        if error is None:
            whole = as_whole(result)  # numpy integers and 0-dim integer tensors count as ints
            number = whole if whole is not None else as_number(result)
            row["type"] = "int" if whole is not None else shown(result)
            row["result"] = number if number is not None and math.isfinite(number) else None
        rows.append(row)
    return {"rows": rows}


def compare_seeds(mine: dict, reference: dict, seed: int) -> None:
    """Raise ExerciseFailed at the first case where ``mine`` differs, with the paired interval's
    half-width at the number of seeds returned and at the expected one."""
    rows = list(zip(mine["rows"], reference["rows"], strict=True))
    for got, _ in rows:
        where = _call(got)
        if got["error"]:
            raise ExerciseFailed(f"{where} {got['error']}")
        if got["type"] != "int":
            raise ExerciseFailed(f"{where} returned {got['type']}; the reference returns an int.")
    for got, want in rows:
        if got["result"] == want["result"]:
            continue
        reference_runs, candidate, margin, confidence = _args(got)
        confidence = DEFAULT_CONFIDENCE if confidence is None else confidence
        spread = statistics.stdev(_differences(reference_runs, candidate))
        widths = (
            _half_width(n, spread, confidence, margin) for n in (got["result"], want["result"])
        )
        fewer = f": n = {want['result']} already fits" if got["result"] > want["result"] else ""
        raise ExerciseFailed(
            f"{_call(got)} returned {got['result']}, expected {want['result']}: the per-seed "
            f"differences' sample standard deviation is {spread:.4g}, and a paired "
            f"{confidence:.0%} interval's half-width is {' and '.join(widths)}, for a margin of "
            f"{margin:g}{fewer}."
        )


def _half_width(n: int, spread: float, confidence: float, margin: float) -> str:
    """The paired interval's half-width at ``n`` seeds against the margin, in words."""
    if n < 2:
        return f"none at n = {n} (n - 1 = {n - 1} degrees of freedom)"
    if n > MAX_SEEDS:  # t_quantile's time grows with n; the half-width falls as n grows (every
        # case's expected count is under 200, so at MAX_SEEDS it is well within the margin)
        width = t_quantile(0.5 + confidence / 2, MAX_SEEDS - 1) * spread / math.sqrt(MAX_SEEDS)
        return f"below {width:.4g} at n = {n} (within the margin)"
    width = t_quantile(0.5 + confidence / 2, n - 1) * spread / math.sqrt(n)
    return f"{width:.4g} at n = {n} ({'within' if width <= margin else 'wider than'} the margin)"


def _call(row: dict) -> str:
    if row["confidence"] is None:
        return "seeds_needed({}, {}, {}), its confidence left at the default, 0.95,".format(
            *_args(row)[:3]
        )
    return "seeds_needed({}, {}, {}, {})".format(*_args(row))


def _args(row: dict) -> tuple:
    return row["reference"], row["candidate"], row["margin"], row["confidence"]
