"""Lesson 04 exercise: one accumulated optimizer step with clipping, under a GradScaler."""

from __future__ import annotations

import math

import torch

from . import ExerciseFailed, exercise
from .lesson_labs import forward_loss, lab_batches, lab_setup


def accumulate_and_clip(model, optimizer, scaler, micro_batches, max_norm):
    """Reference: one zero_grad, a scaled backward per micro-batch, then one unscale_, clip,
    step and update."""
    optimizer.zero_grad(set_to_none=True)
    for images, labels in micro_batches:
        scaler.scale(forward_loss(model, images, labels) / len(micro_batches)).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return norm


def _one_step(fn, micro_batches, max_norm):
    model, optimizer, scaler = lab_setup()
    norm = fn(model, optimizer, scaler, micro_batches, max_norm)
    return model, scaler, norm


@exercise("04.accumulate_and_clip", solution=accumulate_and_clip)
def check_accumulate_and_clip(fn):
    clean, poisoned = lab_batches()[1], lab_batches()[0]
    cases = [
        ("4 clean micro-batches", list(zip(clean[0].chunk(4), clean[1].chunk(4), strict=True))),
        ("micro-batches whose gradients overflow", [clean, poisoned]),
    ]
    for what, micro in cases:
        for max_norm in (0.5, 100.0):
            mine = _one_step(fn, micro, max_norm)
            ref = _one_step(accumulate_and_clip, micro, max_norm)
            if mine[2] is None:
                raise ExerciseFailed("return the gradient norm that clip_grad_norm_ gives you.")
            norm, ref_norm = float(mine[2]), float(ref[2])
            if math.isfinite(ref_norm) and not math.isclose(norm, ref_norm, rel_tol=1e-4):
                raise ExerciseFailed(
                    f"with {what} the returned norm is {norm:.4g}; the true (unscaled) "
                    f"gradient norm of the mean loss is {ref_norm:.4g}."
                )
            if mine[1].get_scale() != ref[1].get_scale():
                raise ExerciseFailed(
                    f"with {what} the scale after your step is {mine[1].get_scale():g}, "
                    f"expected {ref[1].get_scale():g}: one scaler.step and one update() per call."
                )
            for index, (a, b) in enumerate(
                zip(mine[0].parameters(), ref[0].parameters(), strict=True)
            ):
                if not torch.allclose(a, b, rtol=1e-5, atol=1e-7):
                    raise ExerciseFailed(
                        f"with {what} and max_norm={max_norm} parameter tensor {index} is off by "
                        f"{(a - b).abs().max().item():.3g} from the reference step."
                    )
