"""Reference solution of lesson 08's exercise (hidden from the grading sandbox)."""

from __future__ import annotations

import math
import statistics

from ...stats import t_interval, t_quantile

# The interval the lesson reports: mean +- t(0.5 + confidence / 2, n - 1) x s / sqrt(n).
accuracy_interval = t_interval


def seeds_needed(reference, candidate, margin, confidence=0.95):
    """The fewest seeds whose paired interval's half-width is at most ``margin``."""
    spread = statistics.stdev(c - r for r, c in zip(reference, candidate, strict=True))
    n = 2
    while t_quantile(0.5 + confidence / 2, n - 1) * spread / math.sqrt(n) > margin:
        n += 1
    return n


SOLUTIONS = {"08.accuracy_interval": accuracy_interval, "08.seeds_needed": seeds_needed}
