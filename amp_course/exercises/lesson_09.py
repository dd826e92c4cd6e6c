"""Lesson 09 exercises: checkpointing every k-th block, FP8 with delayed and row-wise scaling."""

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

# (encoder blocks, k) of the learner's check cell: none is the lesson's "every second block".
CHECKPOINT_CASES = [(5, 3), (6, 4), (2, 3)]
REENTRANT_NODE = "CheckpointFunctionBackward"  # the reentrant checkpoint's autograd.Function


def observe_checkpoint_every(fn, seed: int) -> list[dict]:
    """Tiny ViTs (CHECKPOINT_CASES at seed 0): what fn's model recomputes, keeps and computes."""
    generator = torch.Generator().manual_seed(seed)
    drawn = torch.randint(1, 7, (3, 2), generator=generator).tolist()
    cases = CHECKPOINT_CASES if seed == 0 else drawn
    return [_observe_checkpointing(fn, d, k, seed + i) for i, (d, k) in enumerate(cases)]


def _observe_checkpointing(fn, depth: int, k: int, seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
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
        observed["reentrant"] = _count_nodes(loss.grad_fn, REENTRANT_NODE)
        loss.backward()
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
        return observed
    observed["activation_bytes"] = activations.activations
    observed["calls"] = calls
    observed["grads"] = [None if p.grad is None else p.grad.clone() for p in params]
    return observed


def _count_nodes(root, name: str) -> int:
    """How many nodes of the autograd graph under ``root`` are of the backward class ``name``."""
    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(next_node for next_node, _ in node.next_functions)
    return sum(type(node).__name__ == name for node in seen)


def compare_checkpoint_every(mine: list[dict], reference: list[dict], seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        _compare_checkpointing(got, want, f"with k={want['k']} on a {want['depth']}-block ViT")


def _compare_checkpointing(mine: dict, reference: dict, where: str) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"{where} your code raised {mine['error']}")
    wanted = [i for i, c in enumerate(reference["calls"]) if len(c) > 1]
    got = [i for i, c in enumerate(mine["calls"]) if len(c) > 1]
    if got != wanted:
        raise ExerciseFailed(
            f"{where}, blocks {got} were recomputed in backward; the reference recomputes blocks "
            f"{wanted} (every k-th block, starting with block 0)."
        )
    if mine["reentrant"]:
        raise ExerciseFailed(
            f"{where} the autograd graph holds {mine['reentrant']} {REENTRANT_NODE} node(s), the "
            "reentrant checkpoint's (torch.utils.checkpoint with use_reentrant=True, or without "
            "use_reentrant where torch defaults to it); the non-reentrant checkpoint leaves none."
        )
    for index in wanted:
        forward, recompute = mine["calls"][index][0], mine["calls"][index][1]
        if recompute != forward:
            raise ExerciseFailed(
                f"{where} block {index} ran in {forward} in the forward but was recomputed in "
                f"{recompute}: the recompute lost the forward's autocast state; use "
                "torch.utils.checkpoint.checkpoint(..., use_reentrant=False)."
            )
    if mine["activation_bytes"] != reference["activation_bytes"]:
        raise ExerciseFailed(
            f"{where} the forward kept {mine['activation_bytes']} bytes for backward, the "
            f"reference {reference['activation_bytes']}: wrap each chosen block whole, nothing "
            "else."
        )
    for index, (a, b) in enumerate(zip(mine["grads"], reference["grads"], strict=True)):
        if a is None:
            raise ExerciseFailed(
                f"{where} parameter {index} of the model you were given got no gradient: modify "
                "and return that model, do not copy it."
            )
        if not torch.allclose(a, b, rtol=1e-3, atol=1e-5):
            raise ExerciseFailed(
                f"{where} the gradient of parameter {index} differs from the reference."
            )


register("09.checkpoint_every", observe_checkpoint_every, compare_checkpoint_every)


# ---- 09.to_float8: delayed scaling, the scale from a history of amaxes (transfer) ---------------

# name: (magnitude of x, its amax history in multiples of x's own amax, fp8 dtype)
FP8_CASES = {
    "activations near 1, a history like them (e4m3)": (1.0, (0.9, 1.1, 1.0), torch.float8_e4m3fn),
    "gradients near 1e-6, grown past their history (e5m2)": (1e-6, (0.3, 0.5), torch.float8_e5m2),
    "weights near 1e-2, below their history (e4m3)": (1e-2, (2.0, 1.5), torch.float8_e4m3fn),
    "values near 1e4, grown past their history (e4m3)": (1e4, (0.25, 0.2), torch.float8_e4m3fn),
    "an all-zero tensor, an all-zero history (e5m2)": (0.0, (0.0, 0.0), torch.float8_e5m2),
}


def fp8_cases(seed: int) -> dict[str, tuple[torch.Tensor, list[float], torch.dtype]]:
    """The check's tensors and amax histories: FP8_CASES at seed 0, other magnitudes elsewhere."""
    generator = torch.Generator().manual_seed(seed)

    def factor(low: float, high: float) -> float:
        return 1.0 if seed == 0 else float(torch.empty(()).uniform_(low, high, generator=generator))

    cases = {}
    for name, (magnitude, history, fp8_dtype) in FP8_CASES.items():
        x = torch.randn(64, 32, generator=generator) * magnitude * factor(0.3, 3.0)
        amax = float(x.abs().max())
        cases[name] = (x, [h * amax * factor(0.8, 1.25) for h in history], fp8_dtype)
    return cases


def observe_to_float8(fn, seed: int) -> dict:
    """Run fn(x, fp8_dtype, amax_history) on each case; record its cast, scale and round trip."""
    observed = {}
    for name, (x, history, fp8_dtype) in fp8_cases(seed).items():
        try:
            quantized, scale = fn(x.clone(), fp8_dtype, list(history))
            scale = torch.as_tensor(scale, dtype=torch.float32).detach()
            observed[name] = {
                "dtype": str(quantized.dtype),
                "scale": float(scale),
                "roundtrip": quantized.float() / scale,
                "largest": float(quantized.float().abs().max()),
                "x": x,
                "history": list(history),
                "max": torch.finfo(fp8_dtype).max,
            }
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            observed[name] = {"error": error_text(error)}
    return observed


def _fail_on_error_or_dtype(name: str, got: dict, ref: dict) -> None:
    if "error" in got:
        raise ExerciseFailed(f"for {name} your code raised {got['error']}")
    if got["dtype"] != ref["dtype"]:
        raise ExerciseFailed(
            f"for {name} you returned {got['dtype']}; cast to the requested {ref['dtype']}."
        )


def compare_to_float8(mine: dict, reference: dict, seed: int) -> None:
    for name, ref in reference.items():
        got, x, fp8_max = mine[name], ref["x"], ref["max"]
        _fail_on_error_or_dtype(name, got, ref)
        history = ", ".join(f"{h:.3g}" for h in ref["history"])
        if not abs(got["scale"] - ref["scale"]) <= 1e-5 * ref["scale"]:  # inf and NaN too
            raise ExerciseFailed(
                f"for {name} your scale is {got['scale']:.6g}, the reference's {ref['scale']:.6g} "
                f"(the history [{history}], x's own amax {x.abs().max():.3g}, the format's max "
                f"{fp8_max:g})."
            )
        bad = int((~torch.isfinite(got["roundtrip"])).sum())
        if bad:
            raise ExerciseFailed(
                f"for {name} x_fp8 holds {bad} inf or NaN values where the reference's holds none: "
                f"x * scale reaches {float(x.abs().max()) * ref['scale']:.4g}, and the largest "
                f"finite {ref['dtype']} is {fp8_max:g}."
            )
        mine_error, ref_error = (float(_relative_errors(x, r)) for r in (got, ref))
        if mine_error > 1.05 * ref_error + 1e-6:
            raise ExerciseFailed(
                f"for {name} x_fp8.float() / scale is off from x by {mine_error:.3g} (relative), "
                f"the reference's by {ref_error:.3g}, with the same scale; your largest |x_fp8| "
                f"is {got['largest']:g}, the reference's {ref['largest']:g}."
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


def _relative_errors(x: torch.Tensor, observed: dict, dim=None) -> torch.Tensor:
    """|x - round trip| / |x|, over the whole tensor or along ``dim`` (0 where x is zero)."""
    return (x - observed["roundtrip"]).norm(dim=dim) / x.norm(dim=dim).clamp(min=AMAX_EPS)


def compare_to_float8_rowwise(mine: dict, reference: dict, seed: int) -> None:
    for name, ref in reference.items():
        got, x = mine[name], ref["x"]
        rows, cols = x.shape
        _fail_on_error_or_dtype(name, got, ref)
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
        mine_errors, ref_errors = (_relative_errors(x, r, dim=1) for r in (got, ref))
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
