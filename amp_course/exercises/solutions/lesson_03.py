"""Reference for lesson 03's exercise: reading a scaler's log (tests check it against the real
GradScaler's growth tracker)."""

from __future__ import annotations


def read_scale_log(scales, init_scale, growth_factor, backoff_factor, growth_interval):
    """Reference: (overflow steps, growth tracker at the end) from the scale after each update().

    The scale drops exactly at an overflow (backoff_factor < 1), and the tracker restarts at 0; a
    clean update counts one more, and the growth_interval-th one restarts it too, whether the
    scale could grow or, at float32's largest value, could not. So it is not the number of clean
    steps in a row.
    """
    overflows, good, before = [], 0, init_scale
    for step, after in enumerate(scales):
        if after < before:
            overflows.append(step)
            good = 0
        else:
            good += 1
            if good == growth_interval:
                good = 0
        before = after
    return overflows, good


SOLUTIONS = {"03.read_scale_log": read_scale_log}
