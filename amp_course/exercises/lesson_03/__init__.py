"""Lesson 03's exercises: the core of a dynamic loss scaler (``03.scaler_core``, in ``core``), and
reading a loss scaler's log (the scale after every update()) back into the steps that overflowed and
the growth tracker at the end; logs come from real GradScalers."""

from __future__ import annotations

import math

import torch

from ...display import shown
from .. import ExerciseFailed, call_answer, fail_on_error, register
from .core import compare_core, observe_core

# (init_scale, growth_factor, backoff_factor, growth_interval, overflow steps, steps, what)
CASES = [
    (2.0**16, 2.0, 0.5, 3, (2, 7), 12, "the defaults' factors"),
    (1000.0, 1.5, 0.3, 3, (2, 7), 12, "factors that are not powers of two"),
    (2.0**16, 1.1, 0.9, 2, (2, 7), 12, "factors float32 cannot hold exactly"),
    (2.0**126, 2.0, 0.5, 2, (3,), 8, "a scale that reaches float32's largest power of two"),
    (2.0**16, 2.0, 0.5, 1, (0, 1, 4), 7, "growth_interval=1"),
    (8.0, 4.0, 0.25, 4, (), 9, "no overflow at all"),
]


FACTORS = [(2.0, 0.5), (1.5, 0.3), (3.0, 0.7), (4.0, 0.25), (1.1, 0.9)]  # growth, backoff


def cases(seed: int) -> list[tuple]:
    """Seed 0: CASES. Other seeds: six random runs, as CASES are: one starting near float32's max,
    one ending soon after an overflow that cut a count short, and one in factors float32 cannot
    hold (1.1, 0.9) with an overflow at step 0 and at another step (an answer that multiplies in
    Python's float64, or compares each scale with the one before it only, passed up to half the
    seeds that drew no such run)."""
    if seed == 0:
        return list(CASES)
    generator = torch.Generator().manual_seed(seed)

    def pick(n):
        return int(torch.randint(0, n, (1,), generator=generator))

    drawn = []
    for index in range(6):
        steps = 8 + pick(8)
        interval = [1, 2, 3, 4][pick(4)]
        # (1.1, 0.9) grows too slowly to reach float32's max within the near-max run's steps.
        growth, backoff = FACTORS[pick(len(FACTORS) - (index == 0))]
        init = 2.0 ** (126 - pick(2)) if index == 0 else [2.0**16, 1000.0, 3.0][pick(3)]
        # The near-max run overflows once at most, so that it climbs back to the cap in time.
        overflows = tuple(sorted({pick(steps) for _ in range(pick(2 if index == 0 else 4))}))
        if index == 1:  # ends soon after an overflow that cut a count short
            interval = max(interval, 2)
            overflows = _overflow_mid_count(init, growth, backoff, interval, overflows, steps)
        if index == 2:  # not from 1000, where float32's products of 0.9 and 1.1 are float64's
            growth, backoff, interval = 1.1, 0.9, min(interval, 3)
            init = [2.0**16, 3.0][pick(2)]
            later = interval + 1 + pick(steps - interval - 1)
            overflows = (0, _float32_backoff_differs(init, growth, backoff, interval, steps, later))
        # The run near float32's max goes on until the tracker last restarted at a growth the
        # cap refused, so that the count at the end depends on that rule.
        while (
            index == 0
            and steps < 64
            and not _restarted_at_cap(init, growth, backoff, interval, overflows, steps)
        ):
            steps += 1
        drawn.append((init, growth, backoff, interval, overflows, steps, "a random run"))
    return drawn


def _float32_backoff_differs(init, growth, backoff, interval, steps, later) -> int:
    """The first step from ``later`` on (then from the interval's end) where an overflow's scale,
    GradScaler's float64 product rounded once to float32, differs from the product taken in
    float32: an answer that recomputes the backoff in float32 misreads the log there. From 2^16 or
    3 the first backoff agrees either way, and an answer that did so passed 21 seeds of 200 whose
    second overflow agreed too (a test learner's)."""
    for step in [*range(later, steps), *range(interval + 1, later)]:
        log = run_scaler(init, growth, backoff, interval, (0, step), steps)[0]
        in_float32 = torch.tensor(log[step - 1]) * torch.tensor(backoff, dtype=torch.float32)
        if log[step] != in_float32.item():
            return step
    return later


def _overflow_mid_count(init, growth, backoff, interval, overflows, steps) -> tuple[int, ...]:
    """One overflow in the last ``interval`` steps, where the tracker stood above 0 (and none
    before it, so that nothing earlier has restarted the count already)."""
    trackers = run_scaler(init, growth, backoff, interval, (), steps)[2]
    for last in range(steps - 1, max(steps - 1 - interval, 0), -1):
        if trackers[last - 1] != 0:
            return (last,)
    return overflows


def _restarted_at_cap(*case) -> bool:
    """Whether the tracker of ``run_scaler(*case)`` last went back to 0 with the scale unchanged."""
    log, _, trackers = run_scaler(*case)
    restarts = [step for step, tracker in enumerate(trackers) if tracker == 0]
    return bool(restarts) and log[restarts[-1]] == ([case[0], *log][restarts[-1]])


def run_scaler(init_scale, growth_factor, backoff_factor, growth_interval, overflows, steps):
    """Run a real torch.amp.GradScaler for ``steps`` steps, with an inf in the gradients at the
    steps in ``overflows``; returns (its scale after every update(), the scaler, its growth
    tracker after every update())."""
    scaler = torch.amp.GradScaler(
        "cpu",
        init_scale=init_scale,
        growth_factor=growth_factor,
        backoff_factor=backoff_factor,
        growth_interval=growth_interval,
    )
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=0.0)
    log, trackers = [], []
    for step in range(steps):
        optimizer.zero_grad()
        scaler.scale(weight.sum()).backward()
        if step in overflows:
            weight.grad.fill_(math.inf)
        scaler.step(optimizer)
        scaler.update()
        log.append(scaler.get_scale())
        trackers.append(int(scaler.state_dict()["_growth_tracker"]))
    return log, scaler, trackers


def scaler_log(*case) -> list[float]:
    """The log of ``run_scaler(*case)``: what a training run would have recorded."""
    return run_scaler(*case)[0]


def observe(read_scale_log, seed: int) -> list[dict]:
    """``read_scale_log`` on each case's log: the pair it returns, or what went wrong."""
    results = []
    for init, growth, backoff, interval, overflows, steps, what in cases(seed):
        log, _, trackers = run_scaler(init, growth, backoff, interval, overflows, steps)
        got, error = call_answer(read_scale_log, list(log), init, growth, backoff, interval)
        record = {
            "config": [init, growth, backoff, interval],
            "log": log,
            "trackers": trackers,
            "what": what,
            "error": error,
        }
        if error is None:
            try:
                found, good = got
                record["result"] = [sorted(int(s) for s in found), int(good)]
            except (TypeError, ValueError):
                record["result"], record["returned"] = None, shown(got)
        results.append(record)
    return results


def _last_restart(log, trackers, init, growth) -> str:
    """When and why the real growth tracker last went back to 0, in words."""
    restarts = [step for step, tracker in enumerate(trackers) if tracker == 0]
    if not restarts:
        return "it never went back to 0, so it counts every update() of the log"
    step = restarts[-1]
    before, after = (init if step == 0 else log[step - 1]), log[step]
    if after < before:
        why = f"the scale dropped, {before:g} -> {after:g}"
    elif after > before:
        why = f"the scale grew, {before:g} -> {after:g}"
    else:
        why = (
            f"the count reached growth_interval while the scale stayed at {before:g}, since "
            f"{before:g} x {growth:g} overflows float32"
        )
    return f"it last went back to 0 at step {step} ({why})"


def compare(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        init, growth, backoff, interval = want["config"]
        log, what = want["log"], want["what"]
        call = f"read_scale_log(log, {init:g}, {growth:g}, {backoff:g}, {interval})"
        fail_on_error(got["error"], call)
        if got.get("result") is None:
            raise ExerciseFailed(
                f"{call} returned {got.get('returned')}; the reference returns a pair "
                "(overflow_steps, good_steps): a list of step numbers and an int."
            )
        (found, good), (overflows, want_good) = got["result"], want["result"]
        # The call and its log exactly (each float32 scale's shortest repr), so it can be rerun.
        rerun = f"{call} with log = [{', '.join(repr(s) for s in log)}] ({what})"
        if found != overflows:
            step = min(set(found) ^ set(overflows))
            before = init if step == 0 else log[step - 1]
            verb = "dropped" if step in overflows else "did not drop"
            raise ExerciseFailed(
                f"{rerun} names overflow steps {found}, but at step {step} the scale {verb} "
                f"({before!r} -> {log[step]!r})."
            )
        if good != want_good:
            raise ExerciseFailed(
                f"{rerun} ends with good_steps={good}; GradScaler's _growth_tracker ends at "
                f"{want_good}: {_last_restart(log, want['trackers'], init, growth)}."
            )


register("03.read_scale_log", observe, compare)


register("03.scaler_core", observe_core, compare_core)
