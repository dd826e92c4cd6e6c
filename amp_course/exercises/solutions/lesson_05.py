"""References for lesson 05's MFU and timer exercises."""

from __future__ import annotations

import time

from ...bench.flops import mfu  # the function the benchmark itself uses
from ...timing import synchronize


def time_steps(fn, device, warmup=3, iters=10):
    for _ in range(warmup):
        fn()
    synchronize(device)  # queued warm-up work must not leak into the timed region
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    synchronize(device)  # wait for the last kernel before reading the clock
    return (time.perf_counter() - start) / iters


SOLUTIONS = {"05.mfu": mfu, "05.timer": time_steps}
