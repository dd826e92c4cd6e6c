"""Lesson 04 exercise: one accumulated, clipped step under a GradScaler over micro-batches of any
size, equal to one step on all their examples as a single batch."""

from __future__ import annotations

import math

import torch

from ..labs.bug_hunts import lab_batches, lab_setup, poisoned_for
from . import ExerciseFailed, call_answer, fail_on_error, register
from .answers import compare_params


def _split(batch, sizes):
    images, labels = batch
    return list(zip(images.split(sizes), labels.split(sizes), strict=True))


def cases(seed: int) -> list[tuple[str, list, float]]:
    """(what, micro-batches, max_norm): equal and unequal micro-batches, clean and overflowing,
    clipping or not; the equal ones first, so a failure on unequal ones says what it is about."""
    if seed == 0:
        clean, poisoned = lab_batches()[1], lab_batches()[0]
        equal, unequal, norms = [4, 4, 4, 4], [7, 5, 4], (0.5, 100.0)
    else:
        generator = torch.Generator().manual_seed(seed)
        batches = lab_batches(poisoned_for(seed), seed)
        clean = next(b for i, b in enumerate(batches) if i not in poisoned_for(seed))
        poisoned = batches[poisoned_for(seed)[0]]
        equal = [8, 8] if int(torch.randint(0, 2, (1,), generator=generator)) else [4, 4, 4, 4]
        unequal = [[9, 7], [6, 6, 3, 1], [10, 4, 2]][
            int(torch.randint(0, 3, (1,), generator=generator))
        ]
        norms = (float(torch.empty(1).uniform_(0.2, 1.0, generator=generator)), 100.0)
    micro = [
        (f"{len(equal)} equal micro-batches of {equal[0]} digits", _split(clean, equal)),
        (f"micro-batches of {', '.join(map(str, unequal))} digits", _split(clean, unequal)),
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
        unequal = what.startswith("micro-batches of")
        weighting = (
            " With micro-batches of different sizes, a micro-batch's mean loss counts by its "
            "share of the digits, not by one over the number of micro-batches."
            if unequal
            else ""
        )
        if math.isfinite(want["norm"]) and not math.isclose(
            got["norm"], want["norm"], rel_tol=1e-4
        ):
            raise ExerciseFailed(
                f"with {what} the returned norm is {got['norm']:.4g}; the true (unscaled) "
                f"gradient norm of the mean loss over all their digits is {want['norm']:.4g}."
                + weighting
            )
        if got["scale"] != want["scale"]:
            raise ExerciseFailed(
                f"with {what} the scale after your step is {got['scale']:g}, "
                f"expected {want['scale']:g}: one scaler.step and one update() per call."
            )
        compare_params(
            got["params"],
            want["params"],
            f"with {what} and max_norm={max_norm:g} your step differs from one step on all "
            f"their digits as one batch{weighting}",
        )


register("04.accumulate_and_clip", observe, compare)
