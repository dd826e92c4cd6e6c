"""Lesson 05 exercises: a timer that synchronises the device (``timer``), the largest batch that
fits (``fit``), and MFU from a step's FLOPs and estimated from a model's shape (``mfu``)."""

from __future__ import annotations

from .. import register
from .fit import compare_fit, observe_fit
from .mfu import compare_estimate, compare_mfu, observe_estimate, observe_mfu
from .timer import compare_timer, observe_timer

register("05.mfu", observe_mfu, compare_mfu)
register("05.mfu_estimate", observe_estimate, compare_estimate)
register("05.timer", observe_timer, compare_timer)
register("05.largest_batch", observe_fit, compare_fit)
