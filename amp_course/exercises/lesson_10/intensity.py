"""Lesson 10's checks' common parts (the package's ``__init__`` registers the checks): cases drawn
from a seed, a number observed per case, the first case that differs, and readings of a wrong count
(parts of the reference's byte count left out, fewer bytes per element, a whole ratio, and
the FLOPs reading of the same value when it is one too)."""

from __future__ import annotations

import math

import torch

from ...display import shown
from .. import ExerciseFailed, call_answer, fail_on_error
from ..answers import apart, as_number


def draw(seed: int, count: int, low: int, high: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, (count,), generator=generator).tolist()


def observe(fn, cases: list[tuple]) -> list[dict]:
    results = []
    for case in cases:
        got, error = call_answer(fn, *case)
        number = as_number(got)
        results.append(
            {
                "case": list(case),
                "error": error,
                "result": number,
                "returned": None if number is not None else shown(got),
            }
        )
    return results


def compare(mine, reference, name: str, diagnose) -> None:
    """Case by case: errors, non-numbers, then ``diagnose(case, got, expected)``'s hint."""
    for got, want in zip(mine, reference, strict=True):
        call = f"{name}{tuple(want['case'])}"
        fail_on_error(got["error"], call)
        result, expected = got["result"], want["result"]
        if result is None or not math.isfinite(result):
            raise ExerciseFailed(
                f"{call} returned {got['returned'] or result}; the reference returns a number."
            )
        if not close(result, expected):
            hint = diagnose(want["case"], result, expected)
            raise ExerciseFailed(f"{call} returned {apart(result, expected)}. {hint}")


def close(a: float, b: float) -> bool:
    """Equal up to float32 arithmetic (torch's default dtype): a misreading is off by far more."""
    return math.isclose(a, b, rel_tol=1e-6)


def missing_parts(parts: dict[str, int], deficit: float) -> str | None:
    """The parts (one, or all but one) whose bytes add up to ``deficit``, in words."""
    names = list(parts)
    groups = [[name] for name in names] + [[a, b] for a in names for b in names if a < b]
    found = [group for group in groups if close(sum(parts[g] for g in group), deficit)]
    if not found:
        return None
    return " or ".join(" and ".join(group) for group in found)


def known_byte_count(parts: dict[str, int], implied_bytes: float, itemsize: int) -> str | None:
    """The learner's byte count in words, where it is the reference's without some of ``parts``
    or with every element at fewer than ``itemsize`` bytes; None otherwise."""
    total = sum(parts.values())
    missing = missing_parts(parts, total - implied_bytes)
    if missing:
        return f"the reference's count without {missing}"
    for per_element in range(1, itemsize):
        if close(implied_bytes, total / itemsize * per_element):
            return f"every element at {per_element} byte{'s' if per_element > 1 else ''}"
    return None


HALF = "half the reference's"


def ratio_words(value: float, reference: float) -> str | None:
    """``value`` against ``reference`` in words, where one is a whole multiple of the other."""
    larger, smaller = max(value, reference), min(value, reference)
    whole = round(larger / smaller)
    if whole < 2 or not close(larger, whole * smaller):
        return None
    if value > reference:
        return "twice the reference's" if whole == 2 else f"{whole} times the reference's"
    return HALF if whole == 2 else f"1/{whole} of the reference's"


def or_flops(implied_flops: float, flops: int) -> str:
    """The other reading of a value that a byte count explains, when it is also a whole multiple
    or fraction of the reference's FLOPs over the same bytes ("" else): both readings are said."""
    ratio = ratio_words(implied_flops, flops)
    return f"; or, over its bytes, {implied_flops:,.0f} FLOPs: {ratio}" if ratio else ""
