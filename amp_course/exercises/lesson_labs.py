"""Bug-hunt labs: observations and checks for broken AMP training loops (setup in ``labkit``).

The notebook imports this module as ``lab``; the reference fixes live in
``solutions/lesson_labs.py``.
"""

from __future__ import annotations

import io

import torch

from . import ExerciseFailed, ExerciseNotDone, call_answer, fail_on_error, register
from .labkit import (  # noqa: F401  (the notebook reaches the labs' setup through this module)
    AMP_DTYPE,
    DEVICE,
    LR,
    NUM_BATCHES,
    POISONED,
    SCALER_KWARGS,
    SCHEDULER_WARNING,
    Outcome,
    RecordingScaler,
    compare_outcomes,
    forward_loss,
    lab_batches,
    lab_model,
    lab_setup,
    observe_run,
    params_close,
    poisoned_for,
    symptom,
    train_steps,
)


def compare_run(mine, reference, seed: int) -> None:
    compare_outcomes(mine, reference)


# ---- Lab 1: clipping before unscaling ------------------------------------------------------------
MAX_NORM = 0.5
register(
    "labs.clip_after_unscale", lambda fn, seed: observe_run(fn, seed, (MAX_NORM,)), compare_run
)

# ---- Lab 2: accumulation with one unscale_ and one update() per optimizer step -------------------
ACCUMULATION_STEPS = 3
ACCUMULATION_MAX_NORM = 4.0  # above the averaged gradient's norm: clips only a loss left undivided
register(
    "labs.accumulation",
    lambda fn, seed: observe_run(fn, seed, (ACCUMULATION_STEPS, ACCUMULATION_MAX_NORM)),
    compare_run,
)

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
RESUME_AT = 7


def resume_point(seed: int) -> int:
    """How many steps run before the checkpoint: RESUME_AT for seed 0."""
    return RESUME_AT if seed == 0 else 3 + seed % 5


def load_checkpoint(checkpoint, model, optimizer, scaler):
    """Restore whatever the checkpoint holds into fresh objects."""
    model.load_state_dict(checkpoint["model"])
    if "optimizer" in checkpoint:
        optimizer.load_state_dict(checkpoint["optimizer"])
    if "scaler" in checkpoint:
        scaler.load_state_dict(checkpoint["scaler"])


def resumed_run(save, seed: int = 0):
    """Train, checkpoint with ``save`` through torch.save, resume in fresh objects, train on.

    Seed 0 resumes after RESUME_AT of the notebook's batches; other seeds elsewhere, on other
    batches. Returns the resumed (model, scaler) and which states came back intact.
    """
    batches = lab_batches(poisoned_for(seed), seed)
    resume_at = resume_point(seed)
    model, optimizer, scaler = lab_setup(seed)
    train_steps(model, optimizer, scaler, batches[:resume_at])
    saved = {"optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}
    buffer = io.BytesIO()
    torch.save(save(model, optimizer, scaler), buffer)
    buffer.seek(0)
    model, optimizer, scaler = lab_setup(seed + 1)  # a new process: fresh objects, other weights
    load_checkpoint(torch.load(buffer, weights_only=True), model, optimizer, scaler)
    intact = {
        "scaler": scaler.state_dict() == saved["scaler"],
        "optimizer": _same_state(optimizer.state_dict(), saved["optimizer"]),
    }
    train_steps(model, optimizer, scaler, batches[resume_at:])
    return model, scaler, intact


def _same_state(a, b):
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
        )
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same_state, a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b


def observe_resume(save, seed: int) -> dict:
    try:
        model, scaler, intact = resumed_run(save, seed)
    except Exception as error:  # the learner's checkpoint could not be saved or loaded
        return {"error": f"{type(error).__name__}: {error}"[:500]}
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
    if mine["train_error"] is not None or not params_close(mine["params"], reference["params"]):
        raise ExerciseFailed(
            "training with your (model, optimizer, scaler) gives different weights from "
            f"the reference: use SGD(lr={LR}, momentum=0.9) over model.parameters() and "
            f"GradScaler({SCALER_KWARGS})."
        )


register("labs.half_model", observe_prepare, compare_prepare)
