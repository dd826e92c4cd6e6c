"""Lesson 04 exercise: one accumulated optimizer step with clipping, under a GradScaler."""

from __future__ import annotations

import math

import torch

from . import ExerciseFailed, call_answer, fail_on_error, register
from .labkit import compare_params, lab_batches, lab_setup, poisoned_for


def cases(seed: int) -> list[tuple[str, list, float]]:
    """(what, micro-batches, max_norm): clean and overflowing micro-batches, clipping or not."""
    if seed == 0:
        clean, poisoned = lab_batches()[1], lab_batches()[0]
        chunks, norms = 4, (0.5, 100.0)
    else:
        generator = torch.Generator().manual_seed(seed)
        batches = lab_batches(poisoned_for(seed), seed)
        clean = next(b for i, b in enumerate(batches) if i not in poisoned_for(seed))
        poisoned = batches[poisoned_for(seed)[0]]
        chunks = (2, 4)[int(torch.randint(0, 2, (1,), generator=generator))]  # equal chunks
        norms = (float(torch.empty(1).uniform_(0.2, 1.0, generator=generator)), 100.0)
    micro = [
        (
            f"{chunks} clean micro-batches",
            list(zip(clean[0].chunk(chunks), clean[1].chunk(chunks), strict=True)),
        ),
        ("micro-batches whose gradients overflow", [clean, poisoned]),
    ]
    return [(what, batches, norm) for what, batches in micro for norm in norms]


def observe(accumulate_and_clip, seed: int) -> list[dict]:
    """For each case: the returned norm, the scale after the step and the parameters."""
    results = []
    for what, micro_batches, max_norm in cases(seed):
        model, optimizer, scaler = lab_setup(seed)
        norm, error = call_answer(
            accumulate_and_clip, model, optimizer, scaler, micro_batches, max_norm
        )
        try:
            norm = None if norm is None else float(norm)
        except (TypeError, ValueError):
            norm = repr(norm)[:80]
        results.append(
            {
                "what": what,
                "max_norm": max_norm,
                "error": error,
                "norm": norm,
                "scale": scaler.get_scale(),
                "params": [p.detach().clone() for p in model.parameters()],
            }
        )
    return results


def compare(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        what, max_norm = want["what"], want["max_norm"]
        fail_on_error(got["error"], f"with {what} your step")
        if got["norm"] is None:
            raise ExerciseFailed("return the gradient norm that clip_grad_norm_ gives you.")
        if not isinstance(got["norm"], float):
            raise ExerciseFailed(f"return the norm as a number or tensor; got {got['norm']}.")
        if math.isfinite(want["norm"]) and not math.isclose(
            got["norm"], want["norm"], rel_tol=1e-4
        ):
            raise ExerciseFailed(
                f"with {what} the returned norm is {got['norm']:.4g}; the true (unscaled) "
                f"gradient norm of the mean loss is {want['norm']:.4g}."
            )
        if got["scale"] != want["scale"]:
            raise ExerciseFailed(
                f"with {what} the scale after your step is {got['scale']:g}, "
                f"expected {want['scale']:g}: one scaler.step and one update() per call."
            )
        compare_params(
            got["params"],
            want["params"],
            f"with {what} and max_norm={max_norm:g} your step differs from the reference step",
        )


register("04.accumulate_and_clip", observe, compare)
