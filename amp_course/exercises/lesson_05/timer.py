"""Lesson 05's timer check (the package's ``__init__`` registers it): a timer that synchronises the
device, run on a simulated GPU queue whose virtual clock says what the timer read."""

from __future__ import annotations

import contextlib
import inspect
import math

import torch

from ...display import shown
from ...simulated_queue import REAL_CLOCKS, SimulatedQueue
from .. import Answer, ExerciseFailed, call_answer, fail_on_error
from ..answers import as_number, paired


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


# What torch.cuda and torch.accelerator synchronize with, kept when this module loads (before a
# queue's as_cuda() replaces them): an answer may hold one under a name of its own.
REAL_SYNCHRONIZES = (torch.cuda.synchronize, torch.accelerator.synchronize)


@contextlib.contextmanager
def _clocks_rebound(answer, queue: SimulatedQueue):
    """While inside, the names the answer holds for a real clock or a real synchronize (its
    module's globals, its closure, its defaults: ``from time import perf_counter``,
    ``from torch.cuda import synchronize``) read the queue's clock or wait for the queue."""
    while isinstance(answer, Answer):  # the check's wrapper around the learner's function
        answer = answer.fn
    answer = inspect.unwrap(answer)
    clocks = queue.clocks()
    stand_ins = [(real, clocks[name]) for name, real in REAL_CLOCKS.items()]
    stand_ins += [(real, queue.synchronize) for real in REAL_SYNCHRONIZES]

    def fake(value):
        return next((stand_in for real, stand_in in stand_ins if value is real), None)

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


# The device as the check's text names it, then as the lesson's cells hold it: a timer that
# compared the device with "cuda" never synchronised the lesson's torch.device and passed.
DEVICES = ("cuda", torch.device("cuda"))


def observe_timer(time_steps, seed: int) -> dict:
    """The timer's run with each of DEVICES."""
    case = timer_case(seed)
    return {**case, "runs": [_observe_run(time_steps, case, d) for d in DEVICES]}


def _observe_run(time_steps, case: dict, device) -> dict:
    # A simulated queue stands in for the GPU (CI has none): only a synchronise call waits for it,
    # and every wall clock reads its own time, however the answer named the clock, so the result
    # is exact however loaded the machine is.
    calls = []
    queue = _ReadingsQueue(calls)

    def step():
        # Like a GPU step: returns at once, the work runs later; the first call is slow.
        calls.append(1)
        queue.launch(case["step_s"] + (case["first_extra_s"] if len(calls) == 1 else 0.0))

    with _clocks_rebound(time_steps, queue), queue.as_cuda():
        got, error = call_answer(
            time_steps, step, device, warmup=case["warmup"], iters=case["iters"]
        )
    number = as_number(got)
    return {
        "device": repr(device),
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
    for run, _ in paired(mine["runs"], reference["runs"], "device", "timer"):
        try:
            _compare_run(run, reference)
        except ExerciseFailed as failure:
            if run["device"] == repr(DEVICES[0]) or str(failure).startswith("time_steps("):
                raise
            raise ExerciseFailed(
                f"Given device={run['device']} (a torch.device, as the lesson's cells hold it): "
                f"{failure}"
            ) from None


def _compare_run(mine, reference) -> None:
    error = mine["error"]
    if error and "NVIDIA driver" in error:  # torch.cuda's own, past what the check stands in for
        error += (
            " (the check's simulated GPU stands in for torch.cuda.is_available and synchronize, "
            "not for CUDA events or streams: 'What the check runs' above the exercise)"
        )
    fail_on_error(error, f"time_steps(step, {mine['device']}, ...)")
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
    if _close(got, step_s) and mine["clock_reads"] == 0:
        raise ExerciseFailed(
            f"Your timer returned {got!r} s, the step time, without reading a clock: the "
            "reference reads the clock after the warm-up calls and again after the timed ones, "
            "and divides the time between by their count."
        )
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
            f"keeps ({', '.join(REAL_CLOCKS)} of time, timeit.default_timer) where the check "
            "reaches them: through time or timeit, or by a name in your function's module, "
            "closure or defaults (a clock held elsewhere, as a class's attribute or a helper's "
            "default, reads the machine's time, which the simulated queue does not move)."
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
