"""The bug hunts' lab 2 check (the package's ``__init__`` registers it): gradient accumulation with
one unscale_ and one update() per optimizer step, each group's gradient the mean of its
micro-batches', at two splits of the batches, clipped at two bounds."""

from __future__ import annotations

import math

from ...labs.bug_hunts import (
    ACCUMULATION_MAX_NORM,
    ACCUMULATION_STEPS,
    MAX_NORM,
    NUM_BATCHES,
    poisoned_for,
    run,
)
from .. import ExerciseFailed
from .runs import CLIP_ATOL, CLIP_RTOL, compare_run, times_text

# ---- Lab 2: accumulation with one unscale_ and one update() per optimizer step -------------------


def _last_group_clean(seed: int, steps: int) -> tuple[int, ...]:
    """The seed's corrupt batches, those in the last group of ``steps`` moved to the first clean
    batches before it: the last group, whose division the lab is about, takes its step at every
    seed."""
    first = (NUM_BATCHES - 1) // steps * steps  # the last group's first batch
    poisoned = set(poisoned_for(seed))
    for batch in sorted(b for b in poisoned if b >= first):
        poisoned.remove(batch)
        poisoned.add(min(set(range(first)) - poisoned))
    return tuple(sorted(poisoned))


# A second split, 3 micro-batches a group: the 9 batches split evenly there, so a divisor fitted
# to the first split's short last group (1 for the last batch, len(batches) % steps, or the
# batches left) passed while every run split 9 batches by 2.
EVEN_ACCUMULATION_STEPS = 3
SPLITS = (ACCUMULATION_STEPS, EVEN_ACCUMULATION_STEPS)
# A second clipped run, at lab 1's max_norm: at ACCUMULATION_MAX_NORM a group's first micro-batch
# alone rarely reaches the bound, so a loop that clipped after every backward (in the scale's
# units) passed 149 seeds of 150; here the partial sums clip and its weights part.
TIGHT_MAX_NORM = MAX_NORM


def observe_accumulation(fn, seed: int) -> dict:
    """The loop's Outcome, plus, for each split, the gradient norm of each step it took with
    clipping off and the optimizer steps taken by each update()."""
    poisoned = {steps: _last_group_clean(seed, steps) for steps in SPLITS}
    clipped = (ACCUMULATION_STEPS, ACCUMULATION_MAX_NORM)
    observed = run(fn, clipped, poisoned[ACCUMULATION_STEPS], False, seed).plain()
    tight = (ACCUMULATION_STEPS, TIGHT_MAX_NORM)
    observed["tight"] = run(fn, tight, poisoned[ACCUMULATION_STEPS], False, seed).plain()
    observed["unclipped"] = []
    for steps in SPLITS:
        unclipped = run(fn, (steps, math.inf), poisoned[steps], False, seed)
        observed["unclipped"].append(
            {
                "norms": unclipped.step_norms,
                "totals": unclipped.steps_at_update,
                "error": unclipped.error,
            }
        )
    return observed


def _compare_unclipped(got: dict, want: dict, steps: int) -> None:
    """Name the first step, with clipping off and ``steps`` micro-batches a group, whose gradient
    norm differs from the reference's (or a count of steps that differs)."""
    groups = -(-NUM_BATCHES // steps)
    last = NUM_BATCHES - (groups - 1) * steps  # batches in the last group
    split = f"the {NUM_BATCHES} batches make {groups} groups of "
    split += f"{steps}" if last == steps else f"up to {steps}, the last one of {last}"
    where = f"with accumulation_steps={steps} and clipping off (max_norm=math.inf), "
    if got["error"]:
        raise ExerciseFailed(f"{where}your loop crashed: {got['error']}")
    if len(got["norms"]) != len(want["norms"]):
        raise ExerciseFailed(
            f"{where}your loop ran optimizer.step() {times_text(len(got['norms']))}, the "
            f"reference {times_text(len(want['norms']))}: {split}, and the scaler skips a step "
            "whose gradients hold inf or NaN (the groups holding a corrupt batch)."
        )
    # The groups whose step ran in the reference: one update() per group, a step unless skipped.
    totals = want["totals"]
    ran = [g for g, n in enumerate(totals) if n > (totals[g - 1] if g else 0)]
    for step, (g, w) in enumerate(zip(got["norms"], want["norms"], strict=True)):
        ratio = g / w if w else math.inf
        if math.isclose(ratio, 1, rel_tol=1e-2):
            continue
        group = ran[step]
        size = last if group == groups - 1 else steps
        raise ExerciseFailed(
            f"{where}at the optimizer step {step + 1} that ran (group {group + 1} of {groups}, "
            f"{size} batch{'es' if size > 1 else ''}), your gradient norm is {g:.4g}, "
            f"{ratio:.3g}x the reference's {w:.4g}, the norm of the mean of the group's "
            "micro-batch gradients."
        )


def compare_accumulation(mine, reference, seed: int) -> None:
    """Name the first difference in the steps the loop took and the size of their gradients."""
    if mine["error"]:
        compare_run(mine, reference, seed)  # says it crashed, or is not done
    for got, want, steps in zip(mine["unclipped"], reference["unclipped"], SPLITS, strict=True):
        _compare_unclipped(got, want, steps)
    # Clipping written another way rounds differently, as in lab 1.
    compare_run(mine, reference, seed, CLIP_RTOL, CLIP_ATOL)
    try:
        compare_run(mine["tight"], reference["tight"], seed, CLIP_RTOL, CLIP_ATOL)
    except ExerciseFailed as failure:
        raise ExerciseFailed(f"With max_norm={TIGHT_MAX_NORM}: {failure}") from None
