"""Lesson 05 exercises: model FLOP utilisation, and a timer that synchronises the device."""

from __future__ import annotations

import math

import torch

from ..timing import SimulatedQueue
from . import ExerciseFailed, call_answer, fail_on_error, register

# ---- MFU -----------------------------------------------------------------------------------------
MFU_CASES = [(106.6e9 * 64, 0.1, 989.4), (371e9 * 32, 0.25, 312.0), (1e12, 1.0, 1.0)]


def mfu_cases(seed: int) -> list[tuple[float, float, float]]:
    """Seed 0: MFU_CASES (ViT steps on an H100 and an A100). Other seeds: random steps."""
    if seed == 0:
        return list(MFU_CASES)
    generator = torch.Generator().manual_seed(seed)
    draws = torch.rand(6, 3, generator=generator, dtype=torch.float64).tolist()
    return [(10 ** (9 + 5 * f), 10 ** (2 * s - 2), 10 ** (3 * p)) for f, s, p in draws]


def observe_mfu(mfu, seed: int) -> list[dict]:
    results = []
    for flops, seconds, peak in mfu_cases(seed):
        got, error = call_answer(mfu, flops, seconds, peak)
        number = isinstance(got, (int, float)) and not isinstance(got, bool)
        results.append(
            {
                "case": [flops, seconds, peak],
                "error": error,
                "result": float(got) if number else None,
                "returned": None if number else repr(got)[:80],
            }
        )
    return results


def compare_mfu(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        flops, seconds, peak = want["case"]
        fail_on_error(got["error"], f"mfu({flops:.4g}, {seconds:.4g}, {peak:.4g})")
        expected, result = want["result"], got["result"]
        if result is None or not math.isfinite(result):
            shown = got["returned"] if result is None else result
            raise ExerciseFailed(f"mfu{(flops, seconds, peak)} should be a number, got {shown}.")
        if math.isclose(result, 100 * expected, rel_tol=1e-6):
            raise ExerciseFailed("Return a fraction (0.07), not a percentage (7.0).")
        if math.isclose(result, expected * 1e12, rel_tol=1e-6):
            raise ExerciseFailed("The peak is in TFLOP/s: multiply it by 1e12 to get FLOP/s.")
        if not math.isclose(result, expected, rel_tol=1e-6):
            raise ExerciseFailed(
                f"mfu({flops:.4g}, {seconds:.4g}, {peak:.4g}) returned {result:.4g}, "
                f"expected {expected:.4g} (achieved FLOP/s over peak FLOP/s)."
            )


register("05.mfu", observe_mfu, compare_mfu)


# ---- A synchronising timer -----------------------------------------------------------------------
def timer_case(seed: int) -> dict:
    """Seed 0: 4 ms steps, an 80 ms first call, warmup=2, iters=10. Other seeds: nearby values."""
    if seed == 0:
        return {"step_s": 0.004, "first_extra_s": 0.08, "warmup": 2, "iters": 10}
    generator = torch.Generator().manual_seed(seed)
    step, extra, warm, iters = torch.rand(4, generator=generator, dtype=torch.float64).tolist()
    return {
        "step_s": round(0.003 + 0.003 * step, 4),
        "first_extra_s": round(0.05 + 0.05 * extra, 3),
        "warmup": 1 + int(3 * warm),
        "iters": 6 + int(5 * iters),
    }


def observe_timer(time_steps, seed: int) -> dict:
    # A simulated queue stands in for the GPU (CI has none), so only torch.cuda.synchronize (which
    # ac.timing.synchronize calls) waits for it; the exercise text says so.
    case = timer_case(seed)
    queue = SimulatedQueue()
    calls = []

    def step():
        # Like a GPU step: returns at once, the work runs later; the first call is slow.
        calls.append(1)
        queue.launch(case["step_s"] + (case["first_extra_s"] if len(calls) == 1 else 0.0))

    with queue.as_cuda():
        got, error = call_answer(
            time_steps, step, "cuda", warmup=case["warmup"], iters=case["iters"]
        )
        queue.synchronize()
    number = isinstance(got, (int, float)) and not isinstance(got, bool)
    return {
        **case,
        "calls": len(calls),
        "error": error,
        "seconds": float(got) if number else None,
        "returned": None if number else repr(got)[:80],
    }


def compare_timer(mine, reference, seed: int) -> None:
    # The reference's own measurement varies from run to run; its case and call count do not.
    fail_on_error(mine["error"], "time_steps(step, 'cuda', ...)")
    step_s, warmup, iters = reference["step_s"], reference["warmup"], reference["iters"]
    if mine["calls"] != reference["calls"]:
        raise ExerciseFailed(
            f"With warmup={warmup} and iters={iters} the step should run {reference['calls']} "
            f"times, it ran {mine['calls']}."
        )
    got = mine["seconds"]
    if got is None:
        raise ExerciseFailed(f"Return seconds per step as a number, got {mine['returned']}.")
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


register("05.timer", observe_timer, compare_timer)
