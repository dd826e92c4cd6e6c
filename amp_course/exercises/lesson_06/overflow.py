"""Lesson 06's planted overflows (the package's ``__init__`` registers the check): a tiny ViT with
an fp16 overflow planted in one region, and what a learner's fix of it does under fp16 autocast."""

from __future__ import annotations

import torch
from torch import nn

from ...debug import ActivationWatch, find_first_nonfinite
from ...display import error_text, shown
from ...models import build_vit
from ...recipe import AmpRecipe
from ...scaling import FP16_MAX
from .. import call_answer

# ---- An overflow elsewhere: fix it with the smallest fp32 region ---------------------------------
# (what is planted, encoder layer): seed 0 holds an attention the lesson has not shown, and an MLP.
OVERFLOW_CASES = [("attention", 1), ("mlp", 3)]


def overflow_cases(seed: int) -> list[tuple[str, int]]:
    """Seed 0: OVERFLOW_CASES. Other seeds: two plants at random layers, never seed 0's two (an
    answer naming seed 0's modules passed the one seed in 12 that drew them)."""
    if seed == 0:
        return list(OVERFLOW_CASES)
    generator = torch.Generator().manual_seed(seed)
    seed0 = tuple(layer for _, layer in OVERFLOW_CASES)
    pairs = [(a, b) for a in range(4) for b in range(4) if a != b and (a, b) != seed0]
    attention, mlp = pairs[int(torch.randint(len(pairs), (), generator=generator))]
    return [("attention", attention), ("mlp", mlp)]


def planted_vit(kind: str, layer: int, seed: int) -> tuple[nn.Module, torch.Tensor]:
    """The tiny ViT with one region's activations scaled to 1.5 x 65504, and its input batch.

    "attention": the value projection scaled up by k and the output projection down by k (the
    same function, since attention is linear in the values); "mlp": the first Linear up by k,
    the second down by k. fp32 and bf16 stay finite; fp16 overflows inside that region.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):  # leave the learner's random stream as it was
        torch.manual_seed(seed)
        model = build_vit("tiny").eval()
        nn.init.normal_(model.heads.head.weight, std=0.1)
    images = torch.randn(4, 1, 28, 28, generator=generator)
    block = model.encoder.layers[layer]
    scaled = {}

    def record(module, inputs, output):
        scaled["x"] = inputs[0]  # the input of the first scaled Linear (or of the attention)

    where = block.self_attention if kind == "attention" else block.mlp[0]
    handle = where.register_forward_hook(record)
    with torch.no_grad():
        model(images)
        handle.remove()
        if kind == "attention":
            attention, width = block.self_attention, block.self_attention.embed_dim
            value_weight = attention.in_proj_weight[2 * width :]
            value_bias = attention.in_proj_bias[2 * width :]
            peak = (scaled["x"] @ value_weight.T + value_bias).abs().max().item()
            k = 1.5 * FP16_MAX / peak
            value_weight.mul_(k), value_bias.mul_(k), attention.out_proj.weight.div_(k)
        else:
            first, second = block.mlp[0], block.mlp[3]
            k = 1.5 * FP16_MAX / first(scaled["x"]).abs().max().item()
            first.weight.mul_(k), first.bias.mul_(k), second.weight.div_(k)
    return model, images


def observe_overflow(fix_overflow, seed: int) -> list[dict]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # no forward pass waits on a core another program holds
    try:
        return [
            _observe_one(fix_overflow, kind, layer, seed) for kind, layer in overflow_cases(seed)
        ]
    finally:
        torch.set_num_threads(threads)


def _observe_one(fix_overflow, kind: str, layer: int, seed: int) -> dict:
    model, images = planted_vit(kind, layer, seed)
    with torch.no_grad():
        reference = model(images)
    culprit = find_first_nonfinite(model, images, recipe=AmpRecipe("cpu", "fp16"))
    entry = {"plant": kind, "layer": f"encoder.layers.encoder_layer_{layer}"}
    entry["culprit"] = culprit.name if culprit else None
    weights = {name: _weight(m).clone() for name, m in model.named_modules() if _computes(m)}
    fixed, entry["error"] = call_answer(fix_overflow, model, images)
    entry["returned"] = None if isinstance(fixed, nn.Module) else shown(fixed)
    if entry["error"] is None and isinstance(fixed, nn.Module):
        entry.update(_judge_fix(fixed, images, reference, weights))
    return entry


def _computes(module: nn.Module) -> bool:
    """A module whose matmuls autocast runs in fp16: a Linear, a convolution, an attention."""
    return isinstance(module, (nn.Linear, nn.Conv2d, nn.MultiheadAttention))


def _weight(module: nn.Module) -> torch.Tensor:
    return module.in_proj_weight if isinstance(module, nn.MultiheadAttention) else module.weight


def _judge_fix(fixed: nn.Module, images, reference, weights: dict) -> dict:
    """The fixed model under fp16 autocast: still overflowing? what ran in fp32? same logits?"""
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in fixed.parameters()})
    if dtypes != ["float32"]:
        return {"param_dtypes": dtypes}  # a converted model; its forward would not say more
    with ActivationWatch(fixed) as watch, torch.no_grad(), torch.autocast("cpu", torch.float16):
        try:
            logits = fixed(images)
        except Exception as error:  # noqa: BLE001 - the returned model's own forward pass
            return {"forward_error": error_text(error)}
    first = watch.first_nonfinite
    modules = dict(fixed.named_modules())

    def planted(name: str) -> str | None:
        """The module's name in the model as planted (a wrapper adds a level to the name), found
        by its weight; None where no planted weight equals it."""
        weight = _weight(modules[name])
        same = (n for n, w in weights.items() if w.shape == weight.shape and torch.equal(w, weight))
        return next(same, None)

    def planted_name(name: str) -> str:
        return planted(name) or name

    # What each computing module returned that is not autocast's fp16: float32 where a region
    # turned autocast off, and anything else (a bf16 autocast region) named as such.
    ran = {
        planted_name(r.name): str(r.dtype).removeprefix("torch.")
        for r in watch.ranges
        if _computes(modules[r.name]) and r.dtype != torch.float16
    }
    fp32 = {name for name, dtype in ran.items() if dtype == "float32"}
    # Weights that match none of the planted model's: a fix that rescaled weights, not a region.
    changed = sorted(n for n, m in modules.items() if _computes(m) and planted(n) is None)
    finite = first is None and bool(torch.isfinite(logits).all())
    return {
        "changed_weights": changed,
        "first_nonfinite": first.name if first else None,
        "first_dtype": str(first.dtype).removeprefix("torch.") if first else None,
        "finite": finite,
        "fp32_modules": sorted(fp32),
        "other_dtypes": {name: dtype for name, dtype in sorted(ran.items()) if name not in fp32},
        "param_dtypes": dtypes,
        "max_diff": (logits.float() - reference).abs().max().item() if finite else None,
    }
