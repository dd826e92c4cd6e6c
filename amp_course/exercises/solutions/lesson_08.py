"""Reference solution of lesson 08's exercise (hidden from the grading sandbox)."""

from __future__ import annotations

from ...stats import t_interval

# The interval the lesson reports: mean +- t(0.5 + confidence / 2, n - 1) x s / sqrt(n).
accuracy_interval = t_interval

SOLUTIONS = {"08.accuracy_interval": accuracy_interval}
