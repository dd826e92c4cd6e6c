"""Lesson 05 exercises: a timer that synchronises the device, the largest batch that fits, and
MFU estimated from a model's shape."""

from __future__ import annotations

import contextlib
import inspect
import math

import torch

from ...display import shown
from ...timing import REAL_CLOCKS, SimulatedQueue
from .. import Answer, ExerciseFailed, call_answer, fail_on_error, register
from ..answers import as_number, as_whole
from ..memory_cases import GIB, USABLE, exactly_full
from .mfu import compare_estimate, compare_mfu, observe_estimate, observe_mfu

register("05.mfu", observe_mfu, compare_mfu)
register("05.mfu_estimate", observe_estimate, compare_estimate)


# ---- A synchronising timer -----------------------------------------------------------------------
def timer_case(seed: int) -> dict:
    """Seed 0: 4 ms steps, an 80 ms first call, warmup=4, iters=12 (not the signature's defaults,
    3 and 10, so that a timer that ignores its arguments fails in the notebook too). Other seeds:
    nearby values, always more than 3 warm-up calls and 10 timed ones, so that a timer that makes
    the defaults' calls whatever it is asked makes too few at every seed (warmup=3 was drawn at a
    third of them, where a timer ignoring ``warmup`` passed).

    At least 3 warm-up calls: torch.utils.benchmark's ``timeit`` makes 2 of its own, which must
    not pass for the ``warmup`` asked for at one seed and fail at another.
    """
    if seed == 0:
        return {"step_s": 0.004, "first_extra_s": 0.08, "warmup": 4, "iters": 12}
    generator = torch.Generator().manual_seed(seed)
    step, extra, warm, iters = torch.rand(4, generator=generator, dtype=torch.float64).tolist()
    return {
        "step_s": round(0.003 + 0.003 * step, 4),
        "first_extra_s": round(0.05 + 0.05 * extra, 3),
        "warmup": 4 + int(3 * warm),
        "iters": 11 + int(6 * iters),
    }


@contextlib.contextmanager
def _clocks_rebound(answer, clocks: dict):
    """While inside, the names the answer holds for a real clock (its module's globals, its
    closure, its defaults) read ``clocks[name]`` instead."""
    while isinstance(answer, Answer):  # the check's wrapper around the learner's function
        answer = answer.fn
    answer = inspect.unwrap(answer)

    def fake(value):
        return next((clocks[n] for n, real in REAL_CLOCKS.items() if value is real), None)

    namespace = getattr(answer, "__globals__", {})
    found = {k: v for k, v in list(namespace.items()) if fake(v)}
    closure = getattr(answer, "__closure__", None) or ()
    cells = [(c, c.cell_contents) for c in closure if _filled(c) and fake(c.cell_contents)]
    defaults = getattr(answer, "__defaults__", None)
    try:
        namespace.update({k: fake(v) for k, v in found.items()})
        for cell, value in cells:
            cell.cell_contents = fake(value)
        if defaults:
            answer.__defaults__ = tuple(fake(d) or d for d in defaults)
        yield
    finally:
        namespace.update(found)
        for cell, value in cells:
            cell.cell_contents = value
        if defaults:
            answer.__defaults__ = defaults


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - raises ValueError for a cell not yet filled
    except ValueError:
        return False
    return True


class _ReadingsQueue(SimulatedQueue):
    """A virtual queue that notes, at each wall-clock reading, how many steps had been called and
    how much of their work was still queued."""

    def __init__(self, calls: list):
        super().__init__(virtual=True)
        self.calls, self.readings = calls, []

    def _read_clock(self) -> float:
        self.readings.append([len(self.calls), max(0.0, self.busy_until - self.now())])
        return super()._read_clock()


def observe_timer(time_steps, seed: int) -> dict:
    # A simulated queue stands in for the GPU (CI has none): only a synchronise call waits for it,
    # and every wall clock reads its own time, however the answer named the clock, so the result
    # is exact however loaded the machine is.
    case = timer_case(seed)
    calls = []
    queue = _ReadingsQueue(calls)

    def step():
        # Like a GPU step: returns at once, the work runs later; the first call is slow.
        calls.append(1)
        queue.launch(case["step_s"] + (case["first_extra_s"] if len(calls) == 1 else 0.0))

    with queue.as_cuda(), _clocks_rebound(time_steps, queue.clocks()):
        got, error = call_answer(
            time_steps, step, "cuda", warmup=case["warmup"], iters=case["iters"]
        )
    number = as_number(got)
    return {
        **case,
        "calls": len(calls),
        "clock_reads": queue.clock_reads,
        "readings": queue.readings[:1] + queue.readings[-1:],  # the first and the last
        "error": error,
        "seconds": number,
        "returned": None if number is not None else shown(got, 160),  # a Measurement, with its time
    }


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


def _reading(reading: list) -> str:
    calls, queued = reading
    return (
        f"after {calls} call{'s' if calls != 1 else ''}, with {queued * 1e3:.4g} ms of work queued"
    )


def compare_timer(mine, reference, seed: int) -> None:
    error = mine["error"]
    if error and "NVIDIA driver" in error:  # torch.cuda's own, past what the check stands in for
        error += (
            " (the check's simulated GPU stands in for torch.cuda.is_available and synchronize, "
            "not for CUDA events or streams: 'What the check runs' above the exercise)"
        )
    fail_on_error(error, "time_steps(step, 'cuda', ...)")
    step_s, warmup, iters = reference["step_s"], reference["warmup"], reference["iters"]
    # More calls pass: torch.utils.benchmark's Timer.timeit makes 2 of its own, and a timer may
    # repeat its measurement. iters is above the default 10 at every seed, so a timer that times
    # 10 calls whatever it is asked makes too few.
    if mine["calls"] < warmup + iters:
        raise ExerciseFailed(
            f"With warmup={warmup} and iters={iters} your timer called the step {mine['calls']} "
            f"times; the reference calls it {warmup + iters} times ({warmup} untimed, {iters} "
            "timed)."
        )
    got = mine["seconds"]
    if got is None:
        raise ExerciseFailed(
            f"Your timer returned {mine['returned']}; the reference returns seconds per step, a "
            "number."
        )
    readings = mine["readings"]
    if _close(got, step_s):
        # Right on this simulated GPU, where only the first call is slow; a timer that reads the
        # clock during the warm-up calls times them, and its median or minimum hides them here.
        if readings and readings[0][0] < warmup:
            raise ExerciseFailed(
                f"Your timer read the clock first {_reading(readings[0])}: during the {warmup} "
                f"warm-up calls, which the reference runs untimed (it reads the clock first "
                f"after them, then times {iters} calls)."
            )
        # Its first reading came with the warm-up's work still queued, timed with the first call:
        # a median or minimum hides that here, where no other call is slow.
        if readings and readings[0][1] > 0:
            raise ExerciseFailed(
                f"Your timer read the clock first {_reading(readings[0])} (the {warmup} warm-up "
                "calls' work); the reference reads it first with none queued, so that no timed "
                "call waits for the warm-up."
            )
        return
    ms = f"Your timer says {got * 1e3:.4g} ms per step, but each step queues {step_s * 1e3:.4g} ms"
    if mine["clock_reads"] == 0:
        raise ExerciseFailed(
            f"{ms} of GPU work, and it read none of the wall clocks the check's simulated GPU "
            f"keeps ({', '.join(REAL_CLOCKS)} of time, timeit.default_timer)."
        )
    for factor, unit in ((1e3, "milliseconds"), (1e9, "nanoseconds")):
        if _close(got, factor * step_s):
            raise ExerciseFailed(
                f"{ms}: exactly the step time in {unit}; the reference returns seconds."
            )
    if _close(got, iters * step_s):
        raise ExerciseFailed(f"{ms}: exactly iters = {iters} times the step time.")
    first, last = readings
    raise ExerciseFailed(
        f"{ms} of GPU work (the first call {reference['first_extra_s'] * 1e3:.4g} ms more), and "
        f"the check's simulated GPU adds no other delay. Your timer read the clock first "
        f"{_reading(first)}, last {_reading(last)}."
    )


register("05.timer", observe_timer, compare_timer)


# ---- Will it fit? (the memory account of section 6, applied to other models) ---------------------
# (parameters, fp32 activation bytes saved per sample, AMP/fp32 activation ratio, memory bytes)
FIT_CASES = [
    (86_600_000, 0.25 * GIB, 0.55, 15 * GIB),  # a ViT-B/16-sized model on a T4's 15 GiB
    (1_300_000_000, 0.5 * GIB, 0.6, 24 * GIB),  # a 1.3B model on 24 GiB: weights dominate
    (7_000_000_000, 1.0 * GIB, 0.55, 80 * GIB),  # 7B parameters on 80 GiB
    # fp32's state and 100 samples fill the 36 usable GiB of 40 to the byte: the step may.
    (738_197_504, 0.25 * GIB, 0.55, 40 * GIB),
]
STATE_BYTES, COPY_BYTES = 16, 2  # per parameter: fp32 weights, grads, two Adam moments; 16-bit copy


def fit_cases(seed: int) -> list[tuple]:
    """Seed 0: FIT_CASES. Other seeds: five random models and GPUs, then, as in FIT_CASES, one
    whose state alone overflows the GPU (batch 0), one where AMP's 16-bit weight copies leave
    less room than its smaller activations save (AMP fits fewer samples, here none), one each
    slip gets wrong, and one that fp32's state and a whole batch fill to the byte (< for "fits"
    passed every seed without it)."""
    if seed == 0:
        return list(FIT_CASES)
    generator = torch.Generator().manual_seed(seed)
    draws = torch.rand(25, generator=generator, dtype=torch.float64).tolist()
    cases = []
    for n, a, r, m in zip(*[iter(draws[:20])] * 4, strict=True):
        memory = [15, 24, 40, 80][int(4 * m)] * GIB
        cases.append((int(10 ** (7 + 2.7 * n)), (0.01 + 2 * a) * GIB, 0.45 + 0.35 * r, memory))
    m, over, t, a, r = draws[20:]
    memory = [15, 24, 40, 80][int(4 * m)] * GIB
    usable = USABLE * memory
    too_big = int(usable / STATE_BYTES * (1.1 + 0.5 * over))
    cases.append((too_big, (0.01 + 2 * a) * GIB, 0.45 + 0.35 * r, memory))
    # 16 + 2t bytes per parameter fill the usable memory: fp32 leaves 2t of them per parameter
    # for activations, AMP's 2-byte copies leave 2t - 2 < 0.
    copies_win = int(usable / (STATE_BYTES + 2 * (0.5 + 0.45 * t)))
    room = usable - STATE_BYTES * copies_win
    cases.append((copies_win, room * (0.2 + 0.7 * a), 0.45 + 0.35 * r, memory))
    # fp32's state and a whole batch filling the usable memory to the byte, as in FIT_CASES
    pick = lambda low, high: int(torch.randint(low, high + 1, (1,), generator=generator))  # noqa: E731
    num_params, activation, _, gpu_gib = exactly_full(pick, STATE_BYTES, False, 400)
    return [*cases, _slips_decide(generator), (num_params, float(activation), 0.55, gpu_gib * GIB)]


def _slips_decide(generator) -> tuple:
    """A model and GPU, drawn until found, where each slip gives another batch: 4-byte copies
    under AMP, the headroom read as need x 1.1 <= memory, rounding to nearest (each passed a few
    grader seeds of 200, up to 7, among the cases drawn above)."""
    while True:
        n, a, r, m = torch.rand(4, generator=generator, dtype=torch.float64).tolist()
        case = (int(10 ** (7 + 2.7 * n)), (0.01 + 2 * a) * GIB, 0.45 + 0.35 * r)
        case += ([15, 24, 40, 80][int(4 * m)] * GIB,)
        fixed, per_sample, usable = _parts(*case, amp=False)
        amp_fixed, amp_sample, _ = _parts(*case, amp=True)
        right, amp_right = (usable - fixed) / per_sample, (usable - amp_fixed) / amp_sample
        slipped = (usable - amp_fixed - COPY_BYTES * case[0]) / amp_sample  # 4-byte copies
        headroom = (case[3] / 1.1 - fixed) / per_sample
        if (
            min(right, amp_right) >= 1  # where the reference's clamp at 0 hides none of them
            and math.floor(slipped) != math.floor(amp_right)
            and math.floor(headroom) != math.floor(right)
            and round(right) != math.floor(right)
        ):
            return case


def _parts(num_params, fp32_bytes, ratio, memory, amp) -> tuple[float, float, float]:
    """(fixed bytes, bytes per sample, usable bytes) of a case."""
    fixed = num_params * (STATE_BYTES + (COPY_BYTES if amp else 0))
    return fixed, fp32_bytes * (ratio if amp else 1.0), USABLE * memory


def observe_fit(largest_batch, seed: int) -> list[dict]:
    results = []
    for case in fit_cases(seed):
        for amp in (False, True):
            got, error = call_answer(largest_batch, *case, amp)
            whole = as_whole(got)  # numpy integers and 0-dim integer tensors are whole too
            number = whole if whole is not None else as_number(got)
            if whole is None and number is not None and number.is_integer():
                whole = number = int(number)  # 48.0, from a float's // or math.floor of one
            results.append(
                {
                    "case": [*case, amp],
                    "error": error,
                    "result": number,
                    "whole": whole is not None,
                    "returned": None if number is not None else shown(got),
                }
            )
    return results


def _fit_account(case, batch: int) -> str:
    """What the step holds at ``batch`` in this case, against the usable memory, in words."""
    num_params, fp32_bytes, ratio, memory, amp = case
    (fixed, per_sample, usable), per_param = _parts(*case), STATE_BYTES + COPY_BYTES * amp
    used = fixed + batch * per_sample
    scaled = f" ({fp32_bytes / GIB:.4g} GiB x {ratio:.3g})" if amp else ""
    return (
        f"at batch {batch} the step holds {per_param} bytes x {num_params:_} parameters = "
        f"{fixed / GIB:.3f} GiB and {batch} x {per_sample / GIB:.4g} GiB{scaled} of activations, "
        f"{used / GIB:.3f} GiB in all: {'within' if used <= usable else 'more than'} the "
        f"{usable / GIB:.3f} GiB usable ({USABLE:.0%} of {memory / GIB:.4g} GiB)"
    )


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
            raise ExerciseFailed(f"{call} returned {got['returned']}; expected the int {expected}.")
        if not got["whole"]:
            raise ExerciseFailed(
                f"{call} returned the float {result!r}; expected the int {expected}."
            )
        fixed, per_sample, usable = _parts(*case)
        quotient = (usable - fixed) / per_sample  # the exact value the batch rounds down
        on_an_edge = abs(quotient - round(quotient)) < 1e-9 * max(1.0, abs(quotient))
        if result == expected or (on_an_edge and result in (round(quotient), expected)):
            continue  # a float rounding on the very edge of a whole batch goes either way
        if result < 0:
            raise ExerciseFailed(
                f"{call} returned {result}, expected {expected}: a batch is never negative (where "
                "not even one sample fits, the reference returns 0)."
            )
        bigger = "a larger batch fits, " if result < expected and expected > 0 else ""
        account = _fit_account(case, max(result, expected))
        raise ExerciseFailed(f"{call} returned {result}, expected {expected}: {bigger}{account}.")


register("05.largest_batch", observe_fit, compare_fit)
