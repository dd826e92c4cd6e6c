"""Bug-hunt lab 5, a checkpoint that forgets the scaler: the run that resumes, its observation
and its check (``lesson_labs`` registers them; the reference is ``save_checkpoint`` in
``solutions/lesson_labs.py``)."""

from __future__ import annotations

import io

import torch

from . import ExerciseFailed, ExerciseNotDone
from .labkit import lab_batches, lab_setup, params_close, poisoned_for, train_steps

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
