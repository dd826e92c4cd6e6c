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
    MAX_NORM,
    NUM_BATCHES,
    SCALER_KWARGS,
    SCHEDULER_WARNING,
    lab_batches,
    lab_model,
    poisoned_for,
    resume_point,
    resumed_run,
    run,
    train_steps,
)
from . import ExerciseFailed, ExerciseNotDone, call_answer, fail_on_error, register
from .answers import call_noting_warnings, compare_params, scaler_built, scaler_record


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
            return (
                f"after update() number {index + 1} (the first that differs) your optimizer.step() "
                f"had run {_times(steps)} in all and the scale was {scale:g}; in the reference "
                f"{_times(ref_steps)}, scale {ref_scale:g}"
            )
    if len(got) != len(want):
        return f"your loop called scaler.update() {_times(len(got))}, the reference {len(want)}"
    return None


def _times(count: int) -> str:
    return f"{count} time" if count == 1 else f"{count} times"


def compare_run(mine, ref, seed: int = 0) -> None:
    """Raise ExerciseFailed naming the first thing in ``mine`` that differs from the reference."""
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
        raise ExerciseFailed(f"{differs}. (update() lowers the scale after inf/NaN gradients.)")
    if mine["lrs"] != ref["lrs"]:
        raise ExerciseFailed(
            f"the final learning rate is {mine['lrs'][0]:.6g}, expected {ref['lrs'][0]:.6g}."
        )
    compare_params(mine["params"], ref["params"], "parameters differ from the reference fix")


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
    """Name the first difference in the steps the loop took and the size of their gradients."""
    if mine["error"]:
        compare_run(mine, reference)  # says it crashed, or is not done
    got, want = mine["unclipped_norms"], reference["unclipped_norms"]
    groups = -(-NUM_BATCHES // ACCUMULATION_STEPS)
    last = NUM_BATCHES - (groups - 1) * ACCUMULATION_STEPS  # batches in the last group
    if len(got) != len(want):
        raise ExerciseFailed(
            f"your loop ran optimizer.step() {_times(len(got))}, the reference "
            f"{_times(len(want))}: the {NUM_BATCHES} batches make {groups} groups of up to "
            f"{ACCUMULATION_STEPS}, the last one of {last}, and the scaler skips the groups "
            "holding a corrupt batch."
        )
    # The groups whose step ran in the reference: one update() per group, a step unless skipped.
    totals = reference["steps_at_update"]
    ran = [g for g, n in enumerate(totals) if n > (totals[g - 1] if g else 0)]
    for step, (g, w) in enumerate(zip(got, want, strict=True)):
        ratio = g / w if w else math.inf
        if math.isclose(ratio, 1, rel_tol=1e-2):
            continue
        group = ran[step]
        size = last if group == groups - 1 else ACCUMULATION_STEPS
        raise ExerciseFailed(
            f"at the optimizer step {step + 1} that ran (group {group + 1} of {groups}, "
            f"{size} batch{'es' if size > 1 else ''}), your (unclipped) gradient norm is {g:.4g}, "
            f"{ratio:.3g}x the reference's {w:.4g}, the norm of the mean of the group's "
            "micro-batch gradients."
        )
    compare_run(mine, reference)


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
        scaler, error, warned = call_noting_warnings(make_scaler, device, dtype)
        record = {"dtype": str(dtype), "error": error, "type": type(scaler).__name__}
        if isinstance(scaler, torch.amp.GradScaler):
            record.update(scaler_record(scaler, warned), scale=scaler.get_scale())
        cases.append(record)
    loss = torch.tensor(1.5)
    scaler, error = call_answer(make_scaler, device, torch.bfloat16)
    scaled, error = (None, error) if error else call_answer(lambda: scaler.scale(loss))
    returned = f"raised {error}" if error else "the loss itself" if scaled is loss else None
    returned = returned or f"another object, {repr(scaled)[:80]}"
    return {"cases": cases, "device": repr(device), "loss": repr(loss), "bf16_scale": returned}


def _scaler_state(record: dict) -> str:
    if "enabled" not in record:
        return "None" if record["type"] == "NoneType" else f"a {record['type']}"
    state = "an enabled" if record["enabled"] else "a disabled"
    return f"{state} GradScaler (get_scale() {record['scale']:g})"


def compare_scaler(mine, reference, seed: int) -> None:
    """Name the first dtype whose scaler differs from the reference's, and how."""
    for got, want in zip(mine["cases"], reference["cases"], strict=True):
        call = f"make_scaler({reference['device']}, {want['dtype']})"
        fail_on_error(got["error"], call)
        if "device" in got and got["device"] != want["device"]:
            raise ExerciseFailed(f"{call}: {scaler_built(got, want)}")
        state, wanted = _scaler_state(got), _scaler_state(want)
        if state != wanted:
            raise ExerciseFailed(f"{call} returned {state}; the reference returns {wanted}.")
    if mine["bf16_scale"] != reference["bf16_scale"]:
        raise ExerciseFailed(
            f"with make_scaler({reference['device']}, torch.bfloat16), scaler.scale(loss) for "
            f"loss = {reference['loss']} returned {mine['bf16_scale']}; the reference's returns "
            f"{reference['bf16_scale']}."
        )


register("labs.bf16_scaler", observe_scaler, compare_scaler)


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
        raise ExerciseFailed(f"saving or loading your checkpoint failed: {mine['error']}")
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
            f"after prepare() the model's parameters are {mine['dtypes']}, the reference's "
            f"{reference['dtypes']}."
        )
    if not mine["scaler"]:
        raise ExerciseFailed(
            "the scaler prepare() returned is not an enabled torch.amp.GradScaler; the "
            "reference's is (fp16 autocast)."
        )
    for key, value in reference["scaler_settings"].items():
        if mine["scaler_settings"][key] != value:
            raise ExerciseFailed(
                f"your GradScaler has {key}={mine['scaler_settings'][key]:g}, the lab's setup "
                f"{value:g}: build it as torch.amp.GradScaler(device.type, **lab.SCALER_KWARGS) "
                f"({SCALER_KWARGS}), as the broken prepare() did."
            )
    if mine["train_error"] is not None:
        raise ExerciseFailed(
            f"training with your (model, optimizer, scaler) raised {mine['train_error']}."
        )
    compare_params(
        mine["params"],
        reference["params"],
        "after training with your (model, optimizer, scaler) on the lab's batches, the weights "
        "differ from the reference's",
    )


register("labs.half_model", observe_prepare, compare_prepare)
