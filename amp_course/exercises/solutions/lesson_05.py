"""References for lesson 05's MFU and timer exercises."""

from __future__ import annotations

import math
import time

from ...bench.flops import mfu  # the function the benchmark itself uses
from ...memory import training_memory
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


def largest_batch(num_params, fp32_activation_bytes, amp_ratio, memory_bytes, amp):
    """The course's memory account (lesson 05, section 6): fixed state, then activations."""
    fixed = training_memory(num_params, 0, "adamw", weight_copy_bytes=2 * num_params * amp).total
    per_sample = fp32_activation_bytes * (amp_ratio if amp else 1.0)
    return max(0, math.floor((memory_bytes - fixed) / per_sample))


SOLUTIONS = {"05.mfu": mfu, "05.timer": time_steps, "05.largest_batch": largest_batch}
