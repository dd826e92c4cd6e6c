"""Lesson 04 exercise: one accumulated, clipped step under a GradScaler over micro-batches of any
size, equal to one step on all their examples as a single batch."""

from __future__ import annotations

import math

import torch

from ..display import shown
from ..labs.bug_hunts import DEVICE, lab_batches, lab_setup, poisoned_for
from . import ExerciseFailed, call_answer, fail_on_error, register
from .answers import compare_params, telling_digits


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


# Each case's step is taken twice with one model, optimizer and scaler: the second call starts
# where the first left the gradients, as in a training loop (zeroed before or after the step,
# either passes). The scaler starts low: every unscale_ divides what gradients the first call
# left by the scale, and at GradScaler's 2**16 they would barely move the second step.
CALLS = ("", " on a second call with the same model, optimizer and scaler")
INIT_SCALE = 8.0


def _after(norm, error, model, scaler, accumulations: int, kept: int) -> dict:
    """The call's result: ``accumulations`` backwards into the weights, ``kept`` micro-batches
    left in the caller's list."""
    # A tensor norm in a dtype other than clip_grad_norm_'s float32 is named in a message.
    tensor = isinstance(norm, torch.Tensor) and norm.dtype != torch.float32
    kind = f"a {norm.dtype} tensor" if tensor else None
    try:
        norm = None if norm is None else float(norm)
    except (TypeError, ValueError, RuntimeError):
        norm = shown(norm)
    params = [p.detach().clone() for p in model.parameters()]
    return {
        "error": error,
        "norm": norm,
        "kind": kind,
        "scale": scaler.get_scale(),
        "params": params,
        "accumulations": accumulations,
        "kept": kept,
    }


class _Accumulations:
    """How often a backward adds into one weight's .grad: once per backward that reaches it (a
    backward of the micro-batches' summed losses, or of one concatenated batch, adds once)."""

    def __init__(self, param: torch.Tensor):
        self.count = 0
        self.handle = param.register_post_accumulate_grad_hook(self._add)

    def _add(self, _param) -> None:
        self.count += 1


def observe(accumulate_and_clip, seed: int) -> list[dict]:
    """For each case and each of two calls: the returned norm, the scale and the parameters."""
    results = []
    for what, micro_batches, max_norm in cases(seed):
        model, optimizer, _ = lab_setup(seed)
        scaler = torch.amp.GradScaler(DEVICE.type, init_scale=INIT_SCALE)
        counted = _Accumulations(next(model.parameters()))
        calls = []
        for _ in CALLS:
            given = [(images.clone(), labels.clone()) for images, labels in micro_batches]
            counted.count = 0
            norm, error = call_answer(
                accumulate_and_clip, model, optimizer, scaler, given, max_norm
            )
            calls.append(_after(norm, error, model, scaler, counted.count, len(given)))
            if error is not None:
                break
        counted.handle.remove()
        results.append({"what": what, "max_norm": max_norm, "calls": calls})
    return results


def compare(mine, reference, seed: int) -> None:
    for got_case, want_case in zip(mine, reference, strict=True):
        what, max_norm = want_case["what"], want_case["max_norm"]
        # The equal micro-batches come first: a failure on unequal ones follows their passing.
        unequal = what.startswith("micro-batches of")
        passed = " With the equal micro-batches before them, it matched." if unequal else ""
        # An answer that raised made one call; its error is the first thing reported.
        for when, got, want in zip(CALLS, got_case["calls"], want_case["calls"], strict=False):
            fail_on_error(got["error"], f"with {what}{when} your step")
            if got["accumulations"] != want["accumulations"]:
                raise ExerciseFailed(
                    f"with {what}{when}, backward added into the weights' gradients "
                    f"{got['accumulations']} time(s) during your step; during the reference's, "
                    f"{want['accumulations']} (a scaled backward per micro-batch, as the exercise "
                    f"asks).{passed}"
                )
            if got["kept"] != want["kept"]:
                raise ExerciseFailed(
                    f"with {what}{when}, the list of micro-batches your step was given holds "
                    f"{got['kept']} after the call; the reference leaves the caller's "
                    f"{want['kept']} in it."
                )
            if got["norm"] is None:
                raise ExerciseFailed("return the gradient norm that clip_grad_norm_ gives you.")
            if not isinstance(got["norm"], float):
                raise ExerciseFailed(f"return the norm as a number or tensor; got {got['norm']}.")
            returned = f"the returned norm{f' ({k})' if (k := got.get('kind')) else ''}"
            if math.isfinite(want["norm"]) and not math.isclose(
                got["norm"], want["norm"], rel_tol=1e-4
            ):
                ratio = got["norm"] / want["norm"] if want["norm"] else math.inf
                digits = telling_digits(ratio, 1.0, 4, 9)  # 1.00047 printed as 1 said nothing
                raise ExerciseFailed(
                    f"with {what}{when}, {returned} is {got['norm']:.6g}; the true "
                    f"(unscaled) gradient norm of the mean loss over all their digits, under the "
                    f"exercise's fp16 autocast, is {want['norm']:.6g}; yours is "
                    f"{ratio:.{digits}g} times that (the check allows a relative 1e-4; its "
                    f"GradScaler starts at init_scale={INIT_SCALE:g}).{passed}"
                )
            if not math.isfinite(want["norm"]) and math.isfinite(got["norm"]):
                raise ExerciseFailed(
                    f"with {what}{when}, {returned} is {got['norm']:.6g}; the unscaled gradients "
                    f"hold inf or NaN, and clip_grad_norm_ returns {want['norm']} for them."
                )
            if got["scale"] != want["scale"]:
                raise ExerciseFailed(
                    f"with {what}{when}, the scale after your step is {got['scale']:g}; after "
                    f"the reference's, {want['scale']:g} (the check's GradScaler starts at "
                    f"init_scale={INIT_SCALE:g})."
                )
            try:  # a clip computed another way rounds otherwise: up to 1e-6 apart after 2 steps
                compare_params(
                    got["params"],
                    want["params"],
                    f"with {what} and max_norm={max_norm:g}{when}, the weights after your step "
                    f"differ from the reference's (one step on the mean loss over all their "
                    f"digits, a scaled backward under fp16 autocast per micro-batch)",
                    atol=1e-5,
                )
            except ExerciseFailed as failure:
                raise ExerciseFailed(f"{failure}{passed}") from None


register("04.accumulate_and_clip", observe, compare)
