"""Lesson 09 exercises: selective activation checkpointing, per-tensor and row-wise FP8 scaling.

Each exercise is three pieces: ``observe`` runs a function (the learner's or the reference) on
inputs derived from a seed and returns plain data; ``compare`` raises ExerciseFailed on the first
difference that matters; the reference solution. The check is
``compare(observe(answer, 0), observe(solution, 0), 0)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..checkpointing import encoder_blocks
from ..memory import saved_tensor_bytes
from ..models import build_vit
from . import ExerciseFailed, register
from .answers import error_text

AMAX_EPS = 1e-12  # torchao's floor for amax, so an all-zero tensor gets a finite FP8 scale

# ---- 09.checkpoint_every: checkpoint every k-th encoder block ------------------------------------


def observe_checkpoint_every(fn, seed: int) -> dict:
    """Tiny ViT (depth and k from ``seed``) under bf16 autocast on the CPU: what fn recomputes."""
    generator = torch.Generator().manual_seed(seed)
    depth = 3 if seed == 0 else int(torch.randint(3, 6, (), generator=generator))
    k = 2 if seed == 0 else int(torch.randint(1, 4, (), generator=generator))
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = build_vit("tiny", num_layers=depth)
    images = torch.randn(4, 1, 28, 28, generator=generator)
    labels = torch.randint(0, 10, (4,), generator=generator)
    blocks = list(encoder_blocks(model))
    params = list(model.parameters())
    calls = [[] for _ in blocks]  # per forward of each block: its first MLP layer's output dtype
    for index, block in enumerate(blocks):
        block.mlp[0].register_forward_hook(
            lambda module, args, out, i=index: calls[i].append(str(out.dtype))
        )
    observed = {"depth": depth, "k": k, "error": None}
    try:
        returned = fn(model, k)
        model = model if returned is None else returned
        activations = saved_tensor_bytes(model, images, device="cpu", autocast_dtype=torch.bfloat16)
        for block_calls in calls:
            block_calls.clear()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
        return observed
    observed["activation_bytes"] = activations.activations
    observed["calls"] = calls
    observed["grads"] = [None if p.grad is None else p.grad.clone() for p in params]
    return observed


def compare_checkpoint_every(mine: dict, reference: dict, seed: int) -> None:
    k, depth = reference["k"], reference["depth"]
    if mine["error"]:
        raise ExerciseFailed(f"with k={k} on a {depth}-block ViT your code raised {mine['error']}")
    wanted = [i for i, c in enumerate(reference["calls"]) if len(c) > 1]
    got = [i for i, c in enumerate(mine["calls"]) if len(c) > 1]
    if got != wanted:
        raise ExerciseFailed(
            f"with k={k} on a {depth}-block ViT, blocks {got} were recomputed in backward; "
            f"checkpoint blocks {wanted} (every k-th block, starting with block 0)."
        )
    for index in wanted:
        forward, recompute = mine["calls"][index][0], mine["calls"][index][1]
        if recompute != forward:
            raise ExerciseFailed(
                f"block {index} ran in {forward} in the forward but was recomputed in {recompute}: "
                "the recompute lost the forward's autocast state; use "
                "torch.utils.checkpoint.checkpoint(..., use_reentrant=False)."
            )
    if mine["activation_bytes"] != reference["activation_bytes"]:
        raise ExerciseFailed(
            f"the forward kept {mine['activation_bytes']} bytes for backward, the reference "
            f"{reference['activation_bytes']}: wrap each chosen block whole, nothing else."
        )
    for index, (a, b) in enumerate(zip(mine["grads"], reference["grads"], strict=True)):
        if a is None:
            raise ExerciseFailed(
                f"parameter {index} of the model you were given got no gradient: modify and "
                "return that model, do not copy it."
            )
        if not torch.allclose(a, b, rtol=1e-3, atol=1e-5):
            raise ExerciseFailed(f"the gradient of parameter {index} differs from the reference.")


register("09.checkpoint_every", observe_checkpoint_every, compare_checkpoint_every)


# ---- 09.to_float8: per-tensor amax scaling -------------------------------------------------------


FP8_CASES = {  # name: (magnitude of the tensor, fp8 dtype)
    "activations near 1 (e4m3)": (1.0, torch.float8_e4m3fn),
    "gradients near 1e-6 (e5m2)": (1e-6, torch.float8_e5m2),
    "weights near 1e-2 (e4m3)": (1e-2, torch.float8_e4m3fn),
    "large values near 1e4 (e4m3)": (1e4, torch.float8_e4m3fn),
    "an all-zero tensor (e4m3)": (0.0, torch.float8_e4m3fn),
}


def observe_to_float8(fn, seed: int) -> dict:
    """Run fn on tensors of several magnitudes (values from ``seed``); record its round trip."""
    generator = torch.Generator().manual_seed(seed)
    observed = {}
    for name, (magnitude, fp8_dtype) in FP8_CASES.items():
        x = torch.randn(64, 32, generator=generator) * magnitude
        try:
            quantized, scale = fn(x.clone(), fp8_dtype)
            scale = torch.as_tensor(scale, dtype=torch.float32)
            observed[name] = {
                "dtype": str(quantized.dtype),
                "scale": float(scale),
                "roundtrip": quantized.float() / scale,
                "x": x,
            }
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            observed[name] = {"error": error_text(error)}
    return observed


def _relative_error(x: torch.Tensor, y: torch.Tensor) -> float:
    return float((x - y).norm() / x.norm().clamp(min=AMAX_EPS))


def compare_to_float8(mine: dict, reference: dict, seed: int) -> None:
    for name, ref in reference.items():
        got = mine[name]
        if "error" in got:
            raise ExerciseFailed(f"for {name} your code raised {got['error']}")
        if got["dtype"] != ref["dtype"]:
            raise ExerciseFailed(
                f"for {name} you returned {got['dtype']}; cast to the requested {ref['dtype']}."
            )
        roundtrip = got["roundtrip"]
        if not torch.isfinite(roundtrip).all() or not torch.isfinite(torch.tensor(got["scale"])):
            raise ExerciseFailed(
                f"for {name} the scale is {got['scale']:g} and x_fp8 / scale holds inf or NaN: "
                "an amax of 0 gives an infinite scale; clamp amax to a tiny minimum first."
            )
        mine_error = _relative_error(ref["x"], roundtrip) if ref["x"].any() else 0.0
        ref_error = _relative_error(ref["x"], ref["roundtrip"]) if ref["x"].any() else 0.0
        if mine_error > 1.05 * ref_error + 1e-6:
            raise ExerciseFailed(
                f"for {name} x_fp8.float() / scale is off from x by {mine_error:.3g} (relative), "
                f"the reference by {ref_error:.3g}; your scale is {got['scale']:.4g}, the "
                f"reference's {ref['scale']:.4g} (the format's max over the tensor's amax)."
            )


register("09.to_float8", observe_to_float8, compare_to_float8)


# ---- 09.to_float8_rowwise: one scale per row (transfer) ------------------------------------------


ROWWISE_CASES = {  # name: (magnitude of the smallest row, of the largest, rows, fp8 dtype)
    "rows from 1e-4 to 1e2 (e4m3)": (1e-4, 1e2, 16, torch.float8_e4m3fn),
    "gradient rows from 1e-9 to 1e-3 (e5m2)": (1e-9, 1e-3, 12, torch.float8_e5m2),
    "rows near 1 with one all-zero row (e4m3)": (1.0, 1.0, 8, torch.float8_e4m3fn),
    "a single row (e4m3)": (1e-2, 1e-2, 1, torch.float8_e4m3fn),
}


def rowwise_inputs(seed: int) -> dict[str, tuple[torch.Tensor, torch.dtype]]:
    """The check's tensors: rows spanning orders of magnitude, in a random order."""
    generator = torch.Generator().manual_seed(seed)
    cases = {}
    for name, (low, high, rows, fp8_dtype) in ROWWISE_CASES.items():
        magnitudes = torch.logspace(torch.tensor(low).log10(), torch.tensor(high).log10(), rows)
        magnitudes = magnitudes[torch.randperm(rows, generator=generator)]
        x = torch.randn(rows, 32, generator=generator) * magnitudes[:, None]
        if "all-zero" in name:
            x[int(torch.randint(rows, (), generator=generator))] = 0.0
        cases[name] = (x, fp8_dtype)
    return cases


def observe_to_float8_rowwise(fn, seed: int) -> dict:
    """Run fn on each case; record the dtype, the scales and the round trip x_fp8 / scales."""
    observed = {}
    for name, (x, fp8_dtype) in rowwise_inputs(seed).items():
        try:
            quantized, scales = fn(x.clone(), fp8_dtype)
            scales = torch.as_tensor(scales, dtype=torch.float32).detach()
            entry = {
                "dtype": str(quantized.dtype),
                "scales_shape": list(scales.shape),
                "scales": scales.flatten(),
                "x": x,
            }
            if tuple(scales.shape) == (x.shape[0], 1) and quantized.shape == x.shape:
                entry["roundtrip"] = quantized.float() / scales
            observed[name] = entry
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            observed[name] = {"error": error_text(error)}
    return observed


def _row_errors(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x - y).norm(dim=1) / x.norm(dim=1).clamp(min=AMAX_EPS)


def compare_to_float8_rowwise(mine: dict, reference: dict, seed: int) -> None:
    for name, ref in reference.items():
        got, x = mine[name], ref["x"]
        rows, cols = x.shape
        if "error" in got:
            raise ExerciseFailed(f"for {name} your code raised {got['error']}")
        if got["dtype"] != ref["dtype"]:
            raise ExerciseFailed(
                f"for {name} you returned {got['dtype']}; cast to the requested {ref['dtype']}."
            )
        shape = tuple(got["scales_shape"])
        if "roundtrip" not in got:
            if got["scales"].numel() == 1:
                why = "one scale for the whole tensor (exercise 2's per-tensor scaling)"
            elif shape == (1, cols) and rows != 1:
                why = "one scale per column; take each row's amax, over the last dimension"
            elif shape == (rows,):
                why = "one per row, but without the row's dimension, so it cannot divide row by row"
            else:
                why = f"scales of shape {shape}, or x_fp8 of another shape than x"
            raise ExerciseFailed(
                f"for {name} (x of shape {tuple(x.shape)}) you returned {why}; return x_fp8 "
                f"shaped like x and scales of shape ({rows}, 1)."
            )
        roundtrip = got["roundtrip"]
        if not torch.isfinite(roundtrip).all() or not torch.isfinite(got["scales"]).all():
            raise ExerciseFailed(
                f"for {name} a scale or x_fp8 / scales is inf or NaN: an all-zero row has amax 0 "
                "and an infinite scale; clamp each row's amax to a tiny minimum first."
            )
        if rows > 1 and bool((got["scales"] == got["scales"][0]).all()):
            raise ExerciseFailed(
                f"for {name} every row got the same scale, {got['scales'][0]:.4g}: that is "
                "per-tensor scaling in a (rows, 1) shape; give each row the scale of its own amax."
            )
        mine_errors = _row_errors(x, roundtrip)
        ref_errors = _row_errors(x, ref["roundtrip"])
        worse = (mine_errors > 1.05 * ref_errors + 1e-6).nonzero().flatten().tolist()
        if worse:
            row = worse[0]
            raise ExerciseFailed(
                f"for {name}, row {row} (amax {x[row].abs().max():.3g}) comes back off by "
                f"{mine_errors[row]:.3g} (relative), the reference's by {ref_errors[row]:.3g}; "
                f"your scale for that row is {got['scales'][row]:.4g}, the reference's "
                f"{ref['scales'][row]:.4g} (the format's max over that row's amax)."
            )


register("09.to_float8_rowwise", observe_to_float8_rowwise, compare_to_float8_rowwise)
