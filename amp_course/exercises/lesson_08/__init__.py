"""Lesson 08 exercises: a one-sided Student-t bound of test accuracy over seeds (the lesson shows
two-sided intervals only; ``interval``), and the number of seeds a paired comparison needs
(``seeds``). Each calls the learner's function on several cases under one time limit (``calls``).
"""

from __future__ import annotations

from .. import register
from .interval import compare_interval, observe_interval
from .seeds import compare_seeds, observe_seeds

register("08.accuracy_interval", observe_interval, compare_interval)
register("08.seeds_needed", observe_seeds, compare_seeds)
