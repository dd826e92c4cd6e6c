"""Reference solutions of lesson 08's exercises (hidden from the grading sandbox)."""

from __future__ import annotations

import math
import statistics

from ...stats import t_quantile


def accuracy_lower_bound(accuracies, confidence=0.95):
    """The one-sided Student-t lower bound of the mean: all of 1 - confidence lies below it."""
    n = len(accuracies)
    spread = statistics.stdev(accuracies)
    return statistics.mean(accuracies) - t_quantile(confidence, n - 1) * spread / math.sqrt(n)


def seeds_needed(reference, candidate, margin, confidence=0.95):
    """The fewest seeds whose paired interval's half-width is at most ``margin``."""
    spread = statistics.stdev(c - r for r, c in zip(reference, candidate, strict=True))
    n = 2
    while t_quantile(0.5 + confidence / 2, n - 1) * spread / math.sqrt(n) > margin:
        n += 1
    return n


SOLUTIONS = {"08.accuracy_interval": accuracy_lower_bound, "08.seeds_needed": seeds_needed}
