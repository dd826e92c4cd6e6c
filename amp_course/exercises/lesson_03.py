"""Lesson 03 exercise: read a dynamic loss scaler's log (the scale after every update()) back into
the steps that overflowed and the clean-step count at the end; logs come from real GradScalers."""

from __future__ import annotations

import math

import torch

from . import ExerciseFailed, call_answer, fail_on_error, register

# (init_scale, growth_factor, backoff_factor, growth_interval, overflow steps, steps, what)
CASES = [
    (2.0**16, 2.0, 0.5, 3, (2, 7), 12, "the defaults' factors, growth_interval=3"),
    (1000.0, 1.5, 0.3, 3, (2, 7), 12, "factors that are not powers of two"),
    (2.0**126, 2.0, 0.5, 2, (3,), 8, "a scale near float32's largest value"),
    (2.0**16, 2.0, 0.5, 1, (0, 1, 4), 7, "growth_interval=1"),
    (8.0, 4.0, 0.25, 4, (), 9, "no overflow at all"),
]


def cases(seed: int) -> list[tuple]:
    """Seed 0: CASES. Other seeds: six random runs, one of them starting near float32's max."""
    if seed == 0:
        return list(CASES)
    generator = torch.Generator().manual_seed(seed)

    def pick(n):
        return int(torch.randint(0, n, (1,), generator=generator))

    drawn = []
    for index in range(6):
        steps = 8 + pick(8)
        interval = [1, 2, 3, 4][pick(4)]
        growth, backoff = [(2.0, 0.5), (1.5, 0.3), (3.0, 0.7), (4.0, 0.25)][pick(4)]
        init = 2.0 ** (126 - pick(2)) if index == 0 else [2.0**16, 1000.0, 3.0][pick(3)]
        overflows = tuple(sorted({pick(steps) for _ in range(pick(4))}))
        drawn.append((init, growth, backoff, interval, overflows, steps, "a random run"))
    return drawn


def run_scaler(init_scale, growth_factor, backoff_factor, growth_interval, overflows, steps):
    """Run a real torch.amp.GradScaler for ``steps`` steps, with an inf in the gradients at the
    steps in ``overflows``; returns (its scale after every update(), the scaler)."""
    scaler = torch.amp.GradScaler(
        "cpu",
        init_scale=init_scale,
        growth_factor=growth_factor,
        backoff_factor=backoff_factor,
        growth_interval=growth_interval,
    )
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=0.0)
    log = []
    for step in range(steps):
        optimizer.zero_grad()
        scaler.scale(weight.sum()).backward()
        if step in overflows:
            weight.grad.fill_(math.inf)
        scaler.step(optimizer)
        scaler.update()
        log.append(scaler.get_scale())
    return log, scaler


def scaler_log(*case) -> list[float]:
    """The log of ``run_scaler(*case)``: what a training run would have recorded."""
    return run_scaler(*case)[0]


def observe(read_scale_log, seed: int) -> list[dict]:
    """``read_scale_log`` on each case's log: the pair it returns, or what went wrong."""
    results = []
    for init, growth, backoff, interval, overflows, steps, what in cases(seed):
        log = scaler_log(init, growth, backoff, interval, overflows, steps)
        got, error = call_answer(read_scale_log, list(log), init, growth, backoff, interval)
        record = {
            "config": [init, growth, backoff, interval],
            "log": log,
            "what": what,
            "error": error,
        }
        if error is None:
            try:
                found, good = got
                record["result"] = [sorted(int(s) for s in found), int(good)]
            except (TypeError, ValueError):
                record["result"], record["returned"] = None, repr(got)[:80]
        results.append(record)
    return results


def _count(log, init, interval, reset_at_cap=True, reset_on_overflow=True) -> int:
    """The clean-step count at the end of ``log`` under rules that may skip a detail."""
    good, before = 0, init
    for after in log:
        if after < before:
            good = 0 if reset_on_overflow else good
        else:
            good += 1
            grew = after > before
            if good == interval and (grew or reset_at_cap):
                good = 0
        before = after
    return good


def compare(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        init, growth, backoff, interval = want["config"]
        log, what = want["log"], want["what"]
        call = f"read_scale_log(log, {init:g}, {growth:g}, {backoff:g}, {interval})"
        fail_on_error(got["error"], call)
        if got.get("result") is None:
            raise ExerciseFailed(
                f"{call} returned {got.get('returned')}; return a pair "
                "(overflow_steps, good_steps): a list of step numbers and an int."
            )
        (found, good), (overflows, want_good) = got["result"], want["result"]
        shown = ", ".join(f"{s:g}" for s in log)
        if found != overflows:
            step = min(set(found) ^ set(overflows))
            before = init if step == 0 else log[step - 1]
            verb = "dropped" if step in overflows else "did not drop"
            raise ExerciseFailed(
                f"for {what} (log: {shown}) you name overflow steps {found}, but at step {step} "
                f"the scale {verb} ({before:g} -> {log[step]:g}): update() lowers the scale "
                "exactly when an optimizer's gradients held an inf or NaN."
            )
        if good != want_good:
            hints = [
                (
                    _count(log, init, interval, reset_at_cap=False),
                    "at float32's largest scale a growth is skipped (the grown scale would be "
                    "inf), but the count restarts at 0 all the same",
                ),
                (
                    _count(log, init, interval, reset_on_overflow=False),
                    "an overflow restarts the count at 0",
                ),
            ]
            hint = next((why for value, why in hints if value == good), None)
            raise ExerciseFailed(
                f"for {what} (growth_interval={interval}; log: {shown}) you end with "
                f"good_steps={good}, GradScaler with {want_good}"
                + (f": {hint}." if hint else ": count the clean updates since the last change.")
            )


register("03.read_scale_log", observe, compare)
