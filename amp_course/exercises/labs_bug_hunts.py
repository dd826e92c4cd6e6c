"""Bug-hunt labs: the checks of the learner's fixed loops (their setup: ``labs.bug_hunts``).

Each lab's observation is the kit's ``Outcome`` of the learner's loop (or of the reference fix,
``solutions/labs_bug_hunts.py``) on the seed's batches; ``compare`` names the first difference.
"""

from __future__ import annotations

import math

import torch

from ..labs.bug_hunts import (
    ACCUMULATION_MAX_NORM,
    ACCUMULATION_STEPS,
    DEVICE,
    LR,
    MAX_NORM,
    NUM_BATCHES,
    SCALER_KWARGS,
    SCHEDULER_WARNING,
    lab_batches,
    lab_model,
    poisoned_for,
    resumed_run,
    run,
    train_steps,
)
from . import ExerciseFailed, ExerciseNotDone, call_answer, fail_on_error, register
from .answers import compare_params, params_close


def observe_run(train, seed, extra=(), scheduler=False) -> dict:
    """The plain Outcome of ``train`` on the seed's batches (an observe for loop labs)."""
    return run(train, extra, poisoned_for(seed), scheduler, seed).plain()


def compare_outcomes(mine, ref, rtol=1e-5, atol=1e-7) -> None:
    """Raise ExerciseFailed describing the first way ``mine`` differs from the reference."""
    if mine["error"]:
        if mine["error"].startswith("NotImplementedError"):
            raise ExerciseNotDone("your loop still raises NotImplementedError.")
        raise ExerciseFailed(f"your loop crashed: {mine['error']}")
    if any(SCHEDULER_WARNING in w for w in mine["warnings"]):
        raise ExerciseFailed(
            "PyTorch warned that lr_scheduler.step() ran before optimizer.step(): "
            "your scheduler stepped on a step the scaler skipped."
        )
    if mine["scales"] != ref["scales"]:
        raise ExerciseFailed(
            f"the loss-scale trajectory differs: after each scaler.update() yours was "
            f"{[f'{s:g}' for s in mine['scales']]}, the reference "
            f"{[f'{s:g}' for s in ref['scales']]} (one update() per optimizer step)."
        )
    if mine["lrs"] != ref["lrs"]:
        raise ExerciseFailed(
            f"the final learning rate is {mine['lrs'][0]:.6g}, expected {ref['lrs'][0]:.6g}."
        )
    compare_params(
        mine["params"], ref["params"], "parameters differ from the reference fix", rtol, atol
    )


def compare_run(mine, reference, seed: int) -> None:
    compare_outcomes(mine, reference)


# ---- Lab 1: clipping before unscaling ------------------------------------------------------------
register(
    "labs.clip_after_unscale", lambda fn, seed: observe_run(fn, seed, (MAX_NORM,)), compare_run
)

# ---- Lab 2: accumulation with one unscale_ and one update() per optimizer step -------------------


def observe_accumulation(fn, seed: int) -> dict:
    """The loop's Outcome, plus the gradient norm of each step it took with clipping off."""
    observed = observe_run(fn, seed, (ACCUMULATION_STEPS, ACCUMULATION_MAX_NORM))
    unclipped = observe_run(fn, seed, (ACCUMULATION_STEPS, math.inf))
    observed["unclipped_norms"] = unclipped["step_norms"]
    return observed


def compare_accumulation(mine, reference, seed: int) -> None:
    """Name the mistake from the steps the loop took and the size of its gradients."""
    if mine["error"]:
        compare_outcomes(mine, reference)  # says it crashed, or is not done
    got, want = mine["unclipped_norms"], reference["unclipped_norms"]
    groups = -(-NUM_BATCHES // ACCUMULATION_STEPS)
    last = NUM_BATCHES - (groups - 1) * ACCUMULATION_STEPS  # batches in the last group
    if len(got) != len(want):
        hint = (
            f"the last, shorter group ({last} batch) never reached the weights: step after it too"
            if len(got) == len(want) - 1
            else f"one step per group of {ACCUMULATION_STEPS} micro-batches, not per micro-batch"
        )
        raise ExerciseFailed(
            f"your loop ran optimizer.step() {len(got)} times, the reference {len(want)} (the "
            f"{NUM_BATCHES} batches make {groups} groups; the scaler skips those holding a "
            f"corrupt batch): {hint}."
        )
    for step, (g, w) in enumerate(zip(got, want, strict=True)):
        ratio = g / w if w else math.inf
        if math.isclose(ratio, 1, rel_tol=1e-2):
            continue
        if math.isclose(ratio, ACCUMULATION_STEPS, rel_tol=2e-2):
            why = "divide each micro-batch's loss by the number of micro-batches in its group"
        elif step == len(want) - 1 and math.isclose(ratio, last / ACCUMULATION_STEPS, rel_tol=2e-2):
            why = (
                f"the last group holds {last} batch, so its loss is divided by {last}, not by "
                f"accumulation_steps: otherwise that step gets {ratio:.2g}x the gradient of a "
                "full group"
            )
        else:
            why = "a group's gradient is the mean of its micro-batches' gradients"
        raise ExerciseFailed(
            f"at the optimizer step {step + 1} that ran, your (unclipped) gradients are "
            f"{ratio:.3g}x the reference's: {why}."
        )
    compare_outcomes(mine, reference)


register("labs.accumulation", observe_accumulation, compare_accumulation)

# ---- Lab 4: an LR scheduler stepped on a skipped step --------------------------------------------
register("labs.scheduler_skip", lambda fn, seed: observe_run(fn, seed, scheduler=True), compare_run)

# ---- Lab 7: an extra optimizer.step() ------------------------------------------------------------
register("labs.extra_step", observe_run, compare_run)


# ---- Lab 3: a GradScaler with bf16 ---------------------------------------------------------------
SCALER_CASES = [
    (torch.float16, True),
    (torch.bfloat16, False),
    (torch.float32, False),
    (None, False),
]


def observe_scaler(make_scaler, seed: int) -> dict:
    """What ``make_scaler(device, dtype)`` returns for each autocast dtype (order set by seed)."""
    order = list(range(len(SCALER_CASES)))
    if seed:
        order = torch.randperm(len(order), generator=torch.Generator().manual_seed(seed)).tolist()
    device = DEVICE if seed % 2 == 0 else DEVICE.type  # a torch.device or its name
    cases = []
    for index in order:
        dtype = SCALER_CASES[index][0]
        scaler, error = call_answer(make_scaler, device, dtype)
        record = {"dtype": str(dtype), "error": error, "type": type(scaler).__name__}
        if isinstance(scaler, torch.amp.GradScaler):
            record.update(enabled=scaler.is_enabled(), scale=scaler.get_scale())
        cases.append(record)
    loss = torch.tensor(1.5)
    scaler, error = call_answer(make_scaler, device, torch.bfloat16)
    unchanged = error is None and call_answer(lambda: scaler.scale(loss) is loss)[0] is True
    return {"cases": cases, "bf16_scale_returns_loss": unchanged}


def compare_scaler(mine, reference, seed: int) -> None:
    for got, want in zip(mine["cases"], reference["cases"], strict=True):
        dtype = want["dtype"]
        fail_on_error(got["error"], f"make_scaler(device, {dtype})")
        if "enabled" not in got:
            raise ExerciseFailed(
                f"for autocast dtype {dtype} return a torch.amp.GradScaler (enabled or not), "
                f"so the loop keeps one code path; got {got['type']}."
            )
        if got["enabled"] != want["enabled"]:
            state, wanted = (
                "enabled" if got["enabled"] else "disabled",
                "enabled" if want["enabled"] else "disabled",
            )
            why = "" if want["enabled"] else " (only fp16 needs loss scaling)"
            raise ExerciseFailed(
                f"for autocast dtype {dtype} your scaler is {state}; it should be {wanted}{why}."
            )
        if got["enabled"] and got["scale"] != want["scale"]:
            raise ExerciseFailed("keep GradScaler's default init_scale (65536) for fp16.")
    if mine["bf16_scale_returns_loss"] is not True:
        raise ExerciseFailed("with bf16, scaler.scale(loss) should return the loss unchanged.")


register("labs.bf16_scaler", observe_scaler, compare_scaler)


# ---- Lab 5: scaler state lost at resume ----------------------------------------------------------
def observe_resume(save, seed: int) -> dict:
    result, error = call_answer(resumed_run, save, seed)  # saving or loading may fail
    if error is not None:
        return {"error": error}
    model, scaler, intact = result
    params = [p.detach().clone() for p in model.parameters()]
    return {"error": None, "intact": intact, "scales": scaler.history, "params": params}


def compare_resume(mine, reference, seed: int) -> None:
    if mine["error"] and mine["error"].startswith("NotImplementedError"):
        raise ExerciseNotDone("save_checkpoint still raises NotImplementedError.")
    if mine["error"]:
        raise ExerciseFailed(f"saving or loading your checkpoint failed: {mine['error']}")
    if not mine["intact"]["scaler"]:
        raise ExerciseFailed(
            "after loading your checkpoint the GradScaler is back at its initial state; "
            "its scale and growth tracker (scaler.state_dict()) must be saved and restored."
        )
    if not mine["intact"]["optimizer"]:
        raise ExerciseFailed(
            "after loading your checkpoint the optimizer lost its state (SGD's momentum); "
            "save optimizer.state_dict() too."
        )
    if mine["scales"] != reference["scales"] or not params_close(
        mine["params"], reference["params"]
    ):
        raise ExerciseFailed(
            "the resumed run does not continue exactly like the uninterrupted one: "
            f"loss scale {[f'{s:g}' for s in mine['scales']]} vs "
            f"{[f'{s:g}' for s in reference['scales']]}; save the model's weights too."
        )


register("labs.resume", observe_resume, compare_resume)


# ---- Lab 6: a .half() model ----------------------------------------------------------------------
SCALER_SETTINGS = ("scale", "growth_factor", "backoff_factor", "growth_interval")


def observe_prepare(prepare, seed: int) -> dict:
    result, error = call_answer(prepare, lab_model(seed), DEVICE if seed % 2 == 0 else "cpu")
    if error is not None or not (isinstance(result, tuple) and len(result) == 3):
        return {"error": error, "triple": False}
    model, optimizer, scaler = result
    record = {
        "error": None,
        "triple": True,
        "dtypes": sorted({str(p.dtype) for p in model.parameters()}),
        "scaler": isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled(),
    }
    if record["scaler"]:  # its settings before training: the lab's SCALER_KWARGS, or others
        state = scaler.state_dict()
        record["scaler_settings"] = {key: float(state[key]) for key in SCALER_SETTINGS}
    _, record["train_error"] = call_answer(
        train_steps, model, optimizer, scaler, lab_batches(poisoned_for(seed), seed)
    )
    record["params"] = [p.detach().float().clone() for p in model.parameters()]
    return record


def compare_prepare(mine, reference, seed: int) -> None:
    fail_on_error(mine["error"], "prepare(model, device)")
    if not mine["triple"]:
        raise ExerciseFailed("prepare should return (model, optimizer, scaler).")
    if mine["dtypes"] != reference["dtypes"]:
        raise ExerciseFailed(
            f"the model's weights are {mine['dtypes']}; keep them float32 and let "
            "autocast make the 16-bit copies (a .half() model cannot be unscaled)."
        )
    if not mine["scaler"]:
        raise ExerciseFailed("fp16 autocast needs an enabled torch.amp.GradScaler.")
    for key, value in reference["scaler_settings"].items():
        if mine["scaler_settings"][key] != value:
            raise ExerciseFailed(
                f"your GradScaler has {key}={mine['scaler_settings'][key]:g}, the lab's setup "
                f"{value:g}: build it as torch.amp.GradScaler(device.type, **lab.SCALER_KWARGS) "
                f"({SCALER_KWARGS}), as the broken prepare() did."
            )
    if mine["train_error"] is not None or not params_close(mine["params"], reference["params"]):
        raise ExerciseFailed(
            "training with your (model, optimizer, scaler) gives different weights from "
            f"the reference: use SGD(lr={LR}, momentum=0.9) over model.parameters() and "
            f"GradScaler({SCALER_KWARGS})."
        )


register("labs.half_model", observe_prepare, compare_prepare)
