"""References for lesson 05's exercises: the timer, the largest batch, MFU from a shape."""

from __future__ import annotations

import math
import time

from ...flops import mfu  # the function the benchmark itself uses
from ...memory import training_memory
from ...timing import synchronize
from ..memory_cases import USABLE


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
    """The course's memory account (lesson 05, section 6): fixed state, then activations, in the
    memory that lesson 00's headroom rule leaves usable (90%)."""
    fixed = training_memory(num_params, 0, "adamw", weight_copy_bytes=2 * num_params * amp).total
    per_sample = fp32_activation_bytes * (amp_ratio if amp else 1.0)
    return max(0, math.floor((USABLE * memory_bytes - fixed) / per_sample))


def mfu_estimate(num_params, num_layers, width, tokens, batch_size, step_ms, peak_tflops, training):
    """MFU of a step from the model's shape: 6·N·T + 12·L·d·T² FLOPs per sample for a training
    step; a forward pass alone is a third of it (the backward pass costs twice the forward)."""
    per_sample = 6 * num_params * tokens + 12 * num_layers * width * tokens**2
    flops = batch_size * (per_sample if training else per_sample / 3)
    return flops / (step_ms / 1e3) / (peak_tflops * 1e12)


SOLUTIONS = {
    "05.mfu": mfu,
    "05.mfu_estimate": mfu_estimate,
    "05.timer": time_steps,
    "05.largest_batch": largest_batch,
}
