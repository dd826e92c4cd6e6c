"""Bug-hunt labs: the checks of the learner's fixed loops (their setup: ``labs.bug_hunts``).

Each lab's observation is the kit's ``Outcome`` of the learner's loop (or of the reference fix,
``solutions/labs_bug_hunts.py``) on the seed's batches; ``compare`` names the first difference.
"""

from __future__ import annotations

import math

import torch

from ...labs.bug_hunts import (
    ACCUMULATION_MAX_NORM,
    ACCUMULATION_STEPS,
    LR,
    MAX_NORM,
    NUM_BATCHES,
    SCALER_KWARGS,
    SCHEDULER_GAMMA,
    SCHEDULER_WARNING,
    lab_model,
    poisoned_for,
    resume_point,
    resumed_run,
    run,
)
from .. import ExerciseFailed, ExerciseNotDone, call_answer, register
from ..answers import compare_params
from .scaler import compare_prepare, compare_scaler, observe_prepare, observe_scaler


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
                f"had run {_times(steps)} in all and the scale was {scale:g}; in the reference "
                f"{_times(ref_steps)}, scale {ref_scale:g}{why}"
            )
    if len(got) != len(want):
        return f"your loop called scaler.update() {_times(len(got))}, the reference {len(want)}"
    return None


def _learning_rate_differs(mine, ref) -> str:
    """The final learning rates, each as the number of the schedule's steps that reach it: the
    check's batches are not the notebook's, so the notebook's figure is not the check's."""
    said = f"the final learning rate is {mine['lrs'][0]:.6g}, expected {ref['lrs'][0]:.6g}"
    updates = ref["steps_at_update"][-1] if ref["steps_at_update"] else 0
    said += (
        f": on the check's batches the optimizer stepped {_times(updates)}, and "
        f"{LR} x {SCHEDULER_GAMMA}^{updates} = {LR * SCHEDULER_GAMMA**updates:.6g}"
    )
    taken = math.log(mine["lrs"][0] / LR) / math.log(SCHEDULER_GAMMA) if mine["lrs"][0] > 0 else -1
    if taken >= 0 and abs(taken - round(taken)) < 1e-6:
        steps = round(taken)
        said += f"; yours is where {steps} step{'s' if steps != 1 else ''} of the schedule lead"
    return said + "."


def _times(count: int) -> str:
    return f"{count} time" if count == 1 else f"{count} times"


def compare_run(mine, ref, seed: int, rtol: float = 1e-5, atol: float = 1e-7) -> None:
    """Raise ExerciseFailed naming the first thing in ``mine`` that differs from the reference
    (the weights within ``rtol`` and ``atol``)."""
    if mine["error"]:
        if mine["error"].startswith("NotImplementedError"):
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


# ---- Lab 1: clipping before unscaling ------------------------------------------------------------
# Clipping written another way (by hand after unscale_, or clip_grad_norm_ at max_norm times the
# scale before it) rounds differently, and nine fp16 steps carry that up to 6e-4 of a weight
# (it failed 29 seeds of 100 at 1e-5); the clipping the lab is about moves the weights 3.5 to
# 50 times as far as they should.
CLIP_RTOL, CLIP_ATOL = 1e-2, 1e-4
# A second run at a threshold that some steps' gradient norms stay below (without clipping they
# run 2 to 4.5 over the seeds, and all stay above MAX_NORM): clipping leaves those gradients as
# they are, and a loop that scales every gradient to max_norm passed while every step clipped.
LOOSE_MAX_NORM = 3.0


def observe_clipped(fn, seed: int) -> dict:
    return {"runs": [observe_run(fn, seed, (norm,)) for norm in (MAX_NORM, LOOSE_MAX_NORM)]}


def compare_clipped(mine, ref, seed: int) -> None:
    compare_run(mine["runs"][0], ref["runs"][0], seed, CLIP_RTOL, CLIP_ATOL)
    (got, want), where = (r["runs"][1] for r in (mine, ref)), f"With max_norm={LOOSE_MAX_NORM:g}"
    try:
        compare_run(got, want, seed, CLIP_RTOL, CLIP_ATOL)
    except ExerciseFailed as failure:
        norms = zip(got["step_norms"], want["step_norms"], strict=False)
        for step, (g, w) in enumerate(norms):  # the first step whose gradients differ, if any
            if not math.isclose(g, w, rel_tol=1e-2):
                raise ExerciseFailed(
                    f"{where}, at the optimizer step {step + 1} that ran, the gradients' norm was "
                    f"{g:.4g} when optimizer.step() ran, the reference's {w:.4g}."
                ) from None
        raise ExerciseFailed(f"{where}, {failure}") from None


register("labs.clip_after_unscale", observe_clipped, compare_clipped)

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


def observe_accumulation(fn, seed: int) -> dict:
    """The loop's Outcome, plus, for each split, the gradient norm of each step it took with
    clipping off and the optimizer steps taken by each update()."""
    poisoned = _last_group_clean(seed, ACCUMULATION_STEPS)
    observed = run(fn, (ACCUMULATION_STEPS, ACCUMULATION_MAX_NORM), poisoned, False, seed).plain()
    observed["unclipped"] = []
    for steps in (ACCUMULATION_STEPS, EVEN_ACCUMULATION_STEPS):
        poisoned = _last_group_clean(seed, steps)
        unclipped = run(fn, (steps, math.inf), poisoned, False, seed)
        totals = unclipped.steps_at_update
        observed["unclipped"].append(
            {"norms": unclipped.step_norms, "totals": totals, "error": unclipped.error}
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
            f"{where}your loop ran optimizer.step() {_times(len(got['norms']))}, the reference "
            f"{_times(len(want['norms']))}: {split}, and the scaler skips a step whose gradients "
            "hold inf or NaN (the groups holding a corrupt batch)."
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
    splits = (ACCUMULATION_STEPS, EVEN_ACCUMULATION_STEPS)
    for got, want, steps in zip(mine["unclipped"], reference["unclipped"], splits, strict=True):
        _compare_unclipped(got, want, steps)
    # Clipping written another way rounds differently, as in lab 1.
    compare_run(mine, reference, seed, CLIP_RTOL, CLIP_ATOL)


register("labs.accumulation", observe_accumulation, compare_accumulation)


# ---- Lab 4: an LR scheduler stepped on a skipped step --------------------------------------------
def observe_scheduled(fn, seed: int) -> dict:
    """The loop's Outcome, with one clean batch brightened besides the corrupt ones: its loss is
    finite and its step skipped, so a loop that reads the loss to tell a skip is seen."""
    poisoned = poisoned_for(seed)
    return run(fn, (), poisoned, True, seed, bright=(_bright_batch(seed, poisoned),)).plain()


def _bright_batch(seed: int, poisoned: tuple[int, ...]) -> int:
    """The first clean batch from the third on that leaves three clean steps in a row somewhere,
    so that the scale grows once (growth_interval is 3): a loop that takes an unchanged scale for
    a skip passed the seeds where it never grew (72 of 300)."""
    candidates = sorted(set(range(2, NUM_BATCHES)) - set(poisoned))
    interval = SCALER_KWARGS["growth_interval"]
    for bright in candidates:
        skipped = {*poisoned, bright}
        clean = "".join("x" if index in skipped else "." for index in range(NUM_BATCHES))
        if "." * interval in clean:
            return bright
    return candidates[0]


register("labs.scheduler_skip", observe_scheduled, compare_run)

# ---- Lab 7: an extra optimizer.step() ------------------------------------------------------------
register("labs.extra_step", observe_run, compare_run)


# ---- Labs 3 and 6: a GradScaler with bf16, a .half() model (their checks: scaler.py) -----------
register("labs.bf16_scaler", observe_scaler, compare_scaler)
register("labs.half_model", observe_prepare, compare_prepare)


# ---- Lab 5: scaler state lost at resume ----------------------------------------------------------
def observe_resume(save, seed: int) -> dict:
    result, error = call_answer(resumed_run, save, seed)  # saving or loading may fail
    if error is not None:
        return {"error": error}
    model, scaler, differs = result
    params = [p.detach().clone() for p in model.parameters()]
    return {"error": None, "differs": differs, "scales": scaler.history, "params": params}


def compare_resume(mine, reference, seed: int) -> None:
    """Name what the loaded checkpoint restored differently, or how the resumed run differs."""
    if mine["error"] and mine["error"].startswith("NotImplementedError"):
        raise ExerciseNotDone("save_checkpoint still raises NotImplementedError.")
    if mine["error"]:
        how = (
            " (lab.load_checkpoint passes checkpoint['model'], and checkpoint['optimizer'] and "
            "checkpoint['scaler'] where they are present, to each object's load_state_dict, which "
            "reads the keys that object's state_dict() returns)."
            if mine["error"].startswith("KeyError")
            else ""
        )
        raise ExerciseFailed(f"saving or loading your checkpoint failed: {mine['error']}{how}")
    at = f"after loading your checkpoint (saved after {resume_point(seed)} steps)"
    if mine["differs"]["scaler"]:
        fields = ", ".join(
            f"{key} {_shown(got)} (saved: {_shown(saved)})"
            for key, (got, saved) in mine["differs"]["scaler"].items()
        )
        raise ExerciseFailed(
            f"{at} the GradScaler's state_dict() differs from the saved one: {fields}."
        )
    if mine["differs"]["optimizer"]:
        raise ExerciseFailed(
            f"{at} the optimizer's state_dict() differs from the saved one: it holds "
            f"{mine['differs']['optimizer']}."
        )
    if mine["scales"] != reference["scales"]:
        raise ExerciseFailed(
            "after resuming, the scale after each update() was "
            f"{[f'{s:g}' for s in mine['scales']]}; the uninterrupted run's "
            f"{[f'{s:g}' for s in reference['scales']]}."
        )
    compare_params(
        mine["params"],
        reference["params"],
        "the resumed run's weights differ from the uninterrupted run's",
    )


def _shown(value) -> str:
    return "missing" if value is None else f"{value:g}"


register("labs.resume", observe_resume, compare_resume)
