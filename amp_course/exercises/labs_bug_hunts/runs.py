"""What the bug-hunt labs' loop checks share: a loop's Outcome on the seed's batches, and the first
thing in it that differs from the reference's (scales, steps, learning rate, weights)."""

from __future__ import annotations

import math

import torch

from ...labs.bug_hunts import (
    LR,
    SCHEDULER_GAMMA,
    SCHEDULER_WARNING,
    lab_model,
    poisoned_for,
    run,
)
from .. import ExerciseFailed, ExerciseNotDone
from ..answers import compare_params
from ..calling import is_blank_text

# The weights of the loops that clip (labs 1 and 2). Clipping written another way (by hand after
# unscale_, or clip_grad_norm_ at max_norm times the scale before it) rounds differently, and
# nine fp16 steps carry that up to 6e-4 of a weight (it failed 29 seeds of 100 at 1e-5); the
# clipping lab 1 is about moves the weights 3.5 to 50 times as far as they should.
CLIP_RTOL, CLIP_ATOL = 1e-2, 1e-4


def observe_run(train, seed, extra=(), scheduler=False) -> dict:
    """The plain Outcome of ``train`` on the seed's batches (an observe for loop labs)."""
    return run(train, extra, poisoned_for(seed), scheduler, seed).plain()


def _first_update_that_differs(mine, ref) -> str | None:
    """The first scaler.update() after which the scale or the optimizer steps taken differ."""
    got = list(zip(mine["scales"], mine["steps_at_update"], strict=True))
    want = list(zip(ref["scales"], ref["steps_at_update"], strict=True))
    pairs = zip(got, want, strict=False)  # a count of updates that differs is named below
    for index, ((scale, steps), (ref_scale, ref_steps)) in enumerate(pairs):
        if (scale, steps) != (ref_scale, ref_steps):
            # What the scale follows, where it is the scale that differs.
            why = (
                " (update() lowers the scale after inf/NaN gradients)" if scale != ref_scale else ""
            )
            return (
                f"after update() number {index + 1} (the first that differs) your optimizer.step() "
                f"had run {times_text(steps)} in all and the scale was {scale:g}; in the reference "
                f"{times_text(ref_steps)}, scale {ref_scale:g}{why}"
            )
    if len(got) != len(want):
        return f"your loop called scaler.update() {times_text(len(got))}, the reference {len(want)}"
    return None


def _learning_rate_differs(mine, ref) -> str:
    """The final learning rates, each as the number of the schedule's steps that reach it: the
    check's batches are not the notebook's, so the notebook's figure is not the check's."""
    said = f"the final learning rate is {mine['lrs'][0]:.6g}, expected {ref['lrs'][0]:.6g}"
    updates = ref["steps_at_update"][-1] if ref["steps_at_update"] else 0
    if not math.isclose(ref["lrs"][0], LR * SCHEDULER_GAMMA**updates):  # a lab with no schedule
        return f"{said}: the learning rate the loop was given, which the reference leaves as it is."
    said += (
        f": on the check's batches the optimizer stepped {times_text(updates)}, and "
        f"{LR} x {SCHEDULER_GAMMA}^{updates} = {LR * SCHEDULER_GAMMA**updates:.6g}"
    )
    taken = math.log(mine["lrs"][0] / LR) / math.log(SCHEDULER_GAMMA) if mine["lrs"][0] > 0 else -1
    if taken >= 0 and abs(taken - round(taken)) < 1e-6:
        steps = round(taken)
        said += f"; yours is where {steps} step{'s' if steps != 1 else ''} of the schedule lead"
    return said + "."


def times_text(count: int) -> str:
    return f"{count} time" if count == 1 else f"{count} times"


def compare_run(mine, ref, seed: int, rtol: float = 1e-5, atol: float = 1e-7) -> None:
    """Raise ExerciseFailed naming the first thing in ``mine`` that differs from the reference
    (the weights within ``rtol`` and ``atol``)."""
    if mine["error"]:
        if is_blank_text(mine["error"]):
            raise ExerciseNotDone("your loop still raises NotImplementedError.")
        raise ExerciseFailed(f"your loop crashed: {mine['error']}")
    if any(SCHEDULER_WARNING in w for w in mine["warnings"]):
        raise ExerciseFailed(
            "PyTorch warned 'Detected call of lr_scheduler.step() before optimizer.step()': "
            "your scheduler.step() ran before the first optimizer.step() had run."
        )
    differs = _first_update_that_differs(mine, ref)
    if differs:
        raise ExerciseFailed(f"{differs}.")
    if mine["lrs"] != ref["lrs"]:
        raise ExerciseFailed(_learning_rate_differs(mine, ref))
    if mine["scheduler_steps"] != ref["scheduler_steps"]:  # a rate set by hand, say
        raise ExerciseFailed(
            f"the learning rate ends where the reference's does, but your loop called "
            f"scheduler.step() {mine['scheduler_steps']} time(s) (its last_epoch); the "
            f"reference's, {ref['scheduler_steps']}."
        )
    try:
        what = "parameters differ from the reference fix"
        compare_params(mine["params"], ref["params"], what, rtol, atol)
    except ExerciseFailed as failure:  # how far each run moved: too little, or too far
        start = [p.detach() for p in lab_model(seed).parameters()]
        raise ExerciseFailed(
            f"{failure} Your weights moved {_moved(mine['params'], start):.4g} from where they "
            f"started (the norm of the change over every tensor), the reference's "
            f"{_moved(ref['params'], start):.4g}."
        ) from None


def _moved(params, start) -> float:
    """The norm of the change from ``start`` over every tensor together."""
    changes = [(a.float() - b.float()).flatten() for a, b in zip(params, start, strict=True)]
    return float(torch.cat(changes).norm())
