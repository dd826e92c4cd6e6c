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
    # ac.timing.synchronize calls) waits for it; the exercise text says so. It runs on its own
    # clock, which time.perf_counter reads: the result is exact however loaded the machine is.
    case = timer_case(seed)
    queue = SimulatedQueue(virtual=True)
    calls = []

    def step():
        # Like a GPU step: returns at once, the work runs later; the first call is slow.
        calls.append(1)
        queue.launch(case["step_s"] + (case["first_extra_s"] if len(calls) == 1 else 0.0))

    with queue.as_cuda():
        got, error = call_answer(
            time_steps, step, "cuda", warmup=case["warmup"], iters=case["iters"]
        )
    number = isinstance(got, (int, float)) and not isinstance(got, bool)
    return {
        **case,
        "calls": len(calls),
        "clock_reads": queue.clock_reads,
        "error": error,
        "seconds": float(got) if number else None,
        "returned": None if number else repr(got)[:80],
    }


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


def compare_timer(mine, reference, seed: int) -> None:
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
    if _close(got, step_s):
        return
    ms = f"Your timer says {got * 1e3:.4g} ms per step, but each step queues {step_s * 1e3:.4g} ms"
    if mine["clock_reads"] == 0:
        raise ExerciseFailed(
            f"{ms} of GPU work, and it never called time.perf_counter(): the check's simulated "
            "GPU keeps its own time, which only time.perf_counter() reads (call it as "
            "time.perf_counter(), after import time). Read the clock with it, as the exercise says."
        )
    if _close(got, iters * step_s):
        raise ExerciseFailed(
            f"{ms}: exactly iters = {iters} times too much. That is the total of the {iters} "
            "timed calls: divide by iters."
        )
    if got < 0.5 * step_s:
        raise ExerciseFailed(
            f"{ms} of GPU work: it read the clock before the work finished. Synchronise before "
            "each clock reading. The check simulates the GPU queue and only sees "
            "torch.cuda.synchronize(device) or ac.timing.synchronize(device), called whenever "
            'device is "cuda" (not behind torch.cuda.is_available(), which is False here); CUDA '
            "events or stream.synchronize() work on a real GPU but not here."
        )
    leaked = got * iters - iters * step_s
    if got > step_s and leaked > 0.5 * step_s:
        raise ExerciseFailed(
            f"{ms}: {leaked * 1e3:.4g} ms of work queued before the clock started (the slow "
            "first call, the warm-up calls) finished inside your timed region. Synchronise after "
            "the warm-up, then start the clock."
        )
    raise ExerciseFailed(
        f"{ms} of GPU work, and the check's simulated GPU adds no other delay: time iters calls "
        "between two synchronised clock readings and divide by iters."
    )


register("05.timer", observe_timer, compare_timer)


# ---- Will it fit? (the memory account of section 6, applied to other models) ---------------------
GIB = 2**30
# (parameters, fp32 activation bytes saved per sample, AMP/fp32 activation ratio, memory bytes)
FIT_CASES = [
    (86_600_000, 0.25 * GIB, 0.55, 15 * GIB),  # a ViT-B/16-sized model on a T4's 15 GiB
    (1_300_000_000, 0.5 * GIB, 0.6, 24 * GIB),  # a 1.3B model on 24 GiB: weights dominate
    (7_000_000_000, 1.0 * GIB, 0.55, 80 * GIB),  # 7B parameters on 80 GiB
]
STATE_BYTES, COPY_BYTES = 16, 2  # per parameter: fp32 weights, grads, two Adam moments; 16-bit copy


def fit_cases(seed: int) -> list[tuple]:
    """Seed 0: FIT_CASES. Other seeds: five random models and GPUs."""
    if seed == 0:
        return list(FIT_CASES)
    generator = torch.Generator().manual_seed(seed)
    cases = []
    for _ in range(5):
        n, a, r, m = torch.rand(4, generator=generator, dtype=torch.float64).tolist()
        memory = [15, 24, 40, 80][int(4 * m)] * GIB
        cases.append((int(10 ** (7 + 2.7 * n)), (0.01 + 2 * a) * GIB, 0.45 + 0.35 * r, memory))
    return cases


def fits(num_params, fp32_bytes, ratio, memory, amp, state=STATE_BYTES, copies=COPY_BYTES):
    """The exact quotient (memory - fixed) / per-sample bytes the largest batch rounds down."""
    fixed = num_params * (state + (copies if amp else 0))
    return (memory - fixed) / (fp32_bytes * (ratio if amp else 1.0))


def observe_fit(largest_batch, seed: int) -> list[dict]:
    results = []
    for case in fit_cases(seed):
        for amp in (False, True):
            got, error = call_answer(largest_batch, *case, amp)
            whole = isinstance(got, int) and not isinstance(got, bool)
            number = whole or isinstance(got, float)
            results.append(
                {
                    "case": [*case, amp],
                    "error": error,
                    "result": got if number else None,
                    "whole": whole,
                    "returned": None if number else repr(got)[:80],
                }
            )
    return results


def _fit_message(case, got) -> str | None:
    """What a wrong largest batch most likely forgot (None: nothing recognised)."""
    num_params, fp32_bytes, ratio, memory, amp = case
    variants = [
        (
            fits(*case[:4], amp, copies=0),
            "autocast's 16-bit weight copies (2 bytes per "
            "parameter) come on top of the 16 bytes of fp32 state",
        ),
        (
            fits(*case[:4], amp, state=8),
            "AdamW keeps 16 bytes per parameter: fp32 weights (4), "
            "gradients (4) and two moments (8)",
        ),
        (
            fits(*case[:4], amp, state=12),
            "AdamW keeps two moments of 4 bytes each: 16 bytes per "
            "parameter with the weights and gradients",
        ),
        (
            (memory - num_params * 18) / (fp32_bytes * 0.5) if amp else None,
            "the activations shrink by the measured ratio, not by half",
        ),
        (
            (memory - num_params * 16) / (fp32_bytes * ratio) if not amp else None,
            "without autocast the activations stay fp32: the ratio is for the AMP run only",
        ),
    ]
    for value, why in variants:
        if value is not None and got == max(0, math.floor(value)):
            return why
    return None


def compare_fit(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        case = want["case"]
        num_params, fp32_bytes, ratio, memory, amp = case
        call = (
            f"largest_batch({num_params:.3g}, {fp32_bytes / GIB:.3g} GiB, {ratio:.3g}, "
            f"{memory / GIB:.0f} GiB, amp={amp})"
        )
        fail_on_error(got["error"], call)
        result, expected = got["result"], want["result"]
        if result is None:
            raise ExerciseFailed(f"{call} should be a whole number, got {got['returned']}.")
        if not got["whole"]:
            if math.isclose(result, expected, abs_tol=1e-9):
                return_type = "an int (a batch is a whole number of samples)"
                raise ExerciseFailed(f"{call} returned {result!r}: return {return_type}.")
            raise ExerciseFailed(
                f"{call} returned {result!r}: round down to a whole batch (math.floor)."
            )
        quotient = fits(*case)
        on_an_edge = abs(quotient - round(quotient)) < 1e-9 * max(1.0, abs(quotient))
        if result == expected or (on_an_edge and result in (round(quotient), expected)):
            continue  # a float rounding on the very edge of a whole batch goes either way
        if expected == 0 and result < 0:
            raise ExerciseFailed(f"{call} returned {result}: when nothing fits, return 0.")
        why = _fit_message(case, result)
        raise ExerciseFailed(
            f"{call} returned {result}, expected {expected}"
            + (f": {why}." if why else ": fixed bytes per parameter, then activations per sample.")
        )


register("05.largest_batch", observe_fit, compare_fit)
