"""Bug-hunt labs: the checks of the learner's fixed loops (their setup: ``labs.bug_hunts``).

Each lab's observation is the kit's ``Outcome`` of the learner's loop (or of the reference fix,
``solutions/labs_bug_hunts.py``) on the seed's batches; ``compare`` names the first difference.
"""

from __future__ import annotations

import math

from ...labs.bug_hunts import (
    MAX_NORM,
    NUM_BATCHES,
    SCALER_KWARGS,
    poisoned_for,
    resume_point,
    resumed_run,
    run,
)
from .. import ExerciseFailed, ExerciseNotDone, call_answer, register
from ..answers import compare_params
from ..calling import is_blank_text
from .accumulation import compare_accumulation, observe_accumulation
from .runs import CLIP_ATOL, CLIP_RTOL, compare_run, observe_run
from .scaler import compare_prepare, compare_scaler, observe_prepare, observe_scaler

# ---- Lab 1: clipping before unscaling ------------------------------------------------------------
# A second run at a threshold that some steps' gradient norms stay below (without clipping they
# run 2 to 4.5 over the seeds, and all stay above MAX_NORM): clipping leaves those gradients as
# they are, and a loop that scales every gradient to max_norm passed while every step clipped.
# At 3.0 every step of seed 19 (3.06 to 4.22) still clipped; over 120 seeds no step's smallest
# norm is above 3.1.
LOOSE_MAX_NORM = 4.0


def observe_clipped(fn, seed: int) -> dict:
    return {"runs": [observe_run(fn, seed, (norm,)) for norm in (MAX_NORM, LOOSE_MAX_NORM)]}


def compare_clipped(mine, ref, seed: int) -> None:
    compare_run(mine["runs"][0], ref["runs"][0], seed, CLIP_RTOL, CLIP_ATOL)
    got, want = mine["runs"][1], ref["runs"][1]
    where = f"With max_norm={LOOSE_MAX_NORM:g}"
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

# ---- Lab 2: accumulation with one unscale_ and one update() per optimizer step (accumulation.py)
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
    if is_blank_text(mine["error"]):
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
