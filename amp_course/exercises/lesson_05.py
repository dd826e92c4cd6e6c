"""Lesson 05 exercises: model FLOP utilisation, and a timer that synchronises the device."""

from __future__ import annotations

import math
import time

from ..bench.flops import mfu
from ..timing import SimulatedQueue, synchronize
from . import ExerciseFailed, exercise


# Reference: ac.bench.mfu, the function the benchmark itself uses.
@exercise("05.mfu", solution=mfu)
def check_mfu(fn):
    cases = [(106.6e9 * 64, 0.1, 989.4), (371e9 * 32, 0.25, 312.0), (1e12, 1.0, 1.0)]
    for flops, seconds, peak in cases:
        expected, got = mfu(flops, seconds, peak), fn(flops, seconds, peak)
        if not isinstance(got, (int, float)) or not math.isfinite(got):
            raise ExerciseFailed(f"mfu{(flops, seconds, peak)} should be a number, got {got!r}.")
        if math.isclose(got, 100 * expected, rel_tol=1e-6):
            raise ExerciseFailed("Return a fraction (0.07), not a percentage (7.0).")
        if math.isclose(got, expected * 1e12, rel_tol=1e-6):
            raise ExerciseFailed("The peak is in TFLOP/s: multiply it by 1e12 to get FLOP/s.")
        if not math.isclose(got, expected, rel_tol=1e-6):
            raise ExerciseFailed(
                f"mfu({flops:.4g}, {seconds}, {peak}) returned {got:.4g}, "
                f"expected {expected:.4g} (achieved FLOP/s over peak FLOP/s)."
            )


def _time_steps(fn, device, warmup=3, iters=10):
    for _ in range(warmup):
        fn()
    synchronize(device)  # queued warm-up work must not leak into the timed region
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    synchronize(device)  # wait for the last kernel before reading the clock
    return (time.perf_counter() - start) / iters


@exercise("05.timer", solution=_time_steps)
def check_timer(fn):
    # A simulated queue stands in for the GPU (CI has none), so only torch.cuda.synchronize (which
    # ac.timing.synchronize calls) waits for it; the exercise text says so.
    step_s, first_extra_s = 0.004, 0.08
    queue = SimulatedQueue()
    calls = []

    def step():
        # Like a GPU step: returns at once, the work runs later; the first call is slow.
        calls.append(1)
        queue.launch(step_s + (first_extra_s if len(calls) == 1 else 0.0))

    with queue.as_cuda():
        got = fn(step, "cuda", warmup=2, iters=10)
        queue.synchronize()
    if len(calls) != 12:
        raise ExerciseFailed(
            f"With warmup=2 and iters=10 the step should run 12 times, it ran {len(calls)}."
        )
    if not isinstance(got, (int, float)):
        raise ExerciseFailed(f"Return seconds per step as a number, got {got!r}.")
    if got < 0.5 * step_s:
        raise ExerciseFailed(
            f"Your timer says {got * 1e3:.2f} ms per step, but each step queues "
            f"{step_s * 1e3:.0f} ms of GPU work: it read the clock before the "
            "work finished. Synchronise before each clock reading. The check "
            "simulates the GPU queue and only sees torch.cuda.synchronize(device) "
            'or ac.timing.synchronize(device), called whenever device is "cuda" '
            "(not behind torch.cuda.is_available(), which is False here); CUDA "
            "events or stream.synchronize() work on a real GPU but not here."
        )
    if got > 2 * step_s:
        raise ExerciseFailed(
            f"Your timer says {got * 1e3:.2f} ms per step, expected about "
            f"{step_s * 1e3:.0f} ms: the slow first call (or queued warm-up "
            "work) leaked into the timed region. Warm up, then synchronise, "
            "then start the clock; divide by iters."
        )
