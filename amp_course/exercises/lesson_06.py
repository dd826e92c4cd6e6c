"""Lesson 06 exercises: choosing what to train in for a device (the rule of ac.device)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..debug import ActivationWatch, find_first_nonfinite
from ..models import build_vit
from ..precisions import BF16
from ..scaling import FP16_MAX
from ..timing import Comparison
from . import ExerciseFailed, call_answer, fail_on_error, register


@dataclass(frozen=True)
class CpuTiming:
    """What ``choose`` learns about a CPU: its flags, and bf16 autocast timed against fp32 there.

    ``bf16`` is ``ac.timing.compare(fp32, bf16)`` of a training step on that CPU: ``bf16.ratio``
    (bf16's time over fp32's), ``bf16.distinguishable`` and ``bf16.verdict``.
    """

    flags: frozenset[str]
    bf16: Comparison


def _cpu(flags: str, ratio: float, distinguishable: bool) -> CpuTiming:
    return CpuTiming(frozenset(flags.split()), Comparison("fp32", "bf16", ratio, distinguishable))


AMX = "avx2 avx512f avx512bw avx512_bf16 amx_tile amx_bf16"
BF16_CORES = "has bf16 tensor cores, as every GPU from compute capability 8.0 (Ampere) on has."
NO_TENSOR_CORES = (
    "has no tensor cores (they came with 7.0) and no bf16 hardware: the course's rule gives every "
    "GPU below 8.0 fp16 with a GradScaler, which still shrinks the activations."
)
# (device, compute capability or None for a CPU, the CPU's timing, why a GPU's dtype is the better).
# None of these GPUs is one the lesson names: the check asks for its rule, not for its examples.
DEVICES = [
    ("GTX 1080", (6, 1), None, "Pascal " + NO_TENSOR_CORES),
    ("L4", (8, 9), None, "Ada " + BF16_CORES),
    ("Tesla M40", (5, 2), None, "Maxwell " + NO_TENSOR_CORES),
    (
        "RTX 2080 Ti",
        (7, 5),
        None,
        "Turing's tensor cores do fp16 only; torch.cuda.is_bf16_supported() says True there "
        "because it counts emulation, so decide by compute capability.",
    ),
    ("B200", (10, 0), None, "Blackwell " + BF16_CORES),
    ("Jetson AGX Orin", (8, 7), None, "Ampere " + BF16_CORES),
    ("RTX 5090", (12, 0), None, "Blackwell " + BF16_CORES),
    ("a Sapphire Rapids CPU (AMX)", None, _cpu(AMX, 0.45, True), ""),
    ("an AMD Zen 4 CPU (AVX512-BF16)", None, _cpu("avx2 avx512f avx512_bf16", 1.61, True), ""),
    ("an AVX2 CPU", None, _cpu("avx avx2 fma", 3.5, True), ""),
    ("another AMX CPU", None, _cpu(AMX, 0.96, False), ""),
]
GPU_RULE = (
    "bf16 tensor cores came with compute capability 8.0 (Ampere); below it, fp16 with a "
    "GradScaler, also below 7.0, where there are no tensor cores at all."
)
CPU_FLAGS = ["avx", "avx2", "avx512f", "avx512bw", "avx512_bf16", "amx_tile", "amx_bf16"]


def devices(seed: int) -> list[tuple]:
    """Seed 0: DEVICES. Other seeds: those, six more GPUs and four more CPUs, shuffled."""
    if seed == 0:
        return list(DEVICES)
    generator = torch.Generator().manual_seed(seed)
    majors = torch.randint(3, 13, (6,), generator=generator).tolist()
    minors = torch.randint(0, 10, (6,), generator=generator).tolist()
    pairs = zip(majors, minors, strict=True)
    extra = [(f"a GPU of capability {m}.{n}", (m, n), None, GPU_RULE) for m, n in pairs]
    for number in range(4):
        picked = torch.rand(len(CPU_FLAGS), generator=generator) < 0.5
        flags = " ".join(f for f, keep in zip(CPU_FLAGS, picked.tolist(), strict=True) if keep)
        ratio = round(0.3 + 2.7 * torch.rand(1, generator=generator).item(), 2)
        apart = bool(torch.rand(1, generator=generator).item() < 0.7)
        extra.append((f"CPU {number + 1}", None, _cpu(flags, ratio, apart), ""))
    every = DEVICES + extra
    order = torch.randperm(len(every), generator=generator).tolist()
    return [every[i] for i in order]


def observe(choose, seed: int) -> list[dict]:
    results = []
    for name, capability, cpu, why in devices(seed):
        got, error = call_answer(choose, capability, cpu)
        results.append(
            {
                "device": name,
                "capability": list(capability) if capability else None,
                "flags": sorted(cpu.flags) if cpu else None,
                "ratio": cpu.bf16.ratio if cpu else None,
                "distinguishable": cpu.bf16.distinguishable if cpu else None,
                "why": why,
                "error": error,
                "dtype": str(got) if isinstance(got, torch.dtype) else None,
                "returned": None if isinstance(got, torch.dtype) else repr(got)[:80],
            }
        )
    return results


def _cpu_reason(want: dict, chose: str) -> str:
    """Why the measurement on a CPU calls for ``want["dtype"]`` rather than ``chose``."""
    ratio, apart, flags = want["ratio"], want["distinguishable"], set(want["flags"])
    measured = f"bf16 autocast measured {ratio:.2f}x the fp32 time"
    if chose == "torch.float16":
        return "On a CPU the rule picks bf16 (where it measured faster than fp32) or fp32."
    if want["dtype"] == "torch.bfloat16":
        return f"{measured}, outside the spread of the runs: bf16 is faster there, so train in it."
    if not apart:
        return (
            f"{measured}, but within the spread of the runs (not distinguishable): no evidence "
            "that bf16 is faster, so fp32."
        )
    native = BF16.cpu_flags & flags
    flags_note = f"its flags say native bf16 ({', '.join(sorted(native))}), but " if native else ""
    return f"{flags_note}{measured} (slower): bf16 only where it measured faster."


def compare(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        name, capability = want["device"], want["capability"]
        where = f"compute capability {tuple(capability)}" if capability else "a CPU"
        fail_on_error(got["error"], f"choose(...) for {name} ({where})")
        if got["dtype"] is None:
            raise ExerciseFailed(
                f"For {name} you returned {got['returned']}; return a torch dtype such as "
                "torch.float16, torch.bfloat16 or torch.float32."
            )
        if got["dtype"] != want["dtype"]:
            why = want["why"] if capability else _cpu_reason(want, got["dtype"])
            raise ExerciseFailed(
                f"{name} ({where}): you chose {got['dtype']}, the better choice is "
                f"{want['dtype']}. {why}"
            )


register("06.choose_dtype", observe, compare)


# ---- An overflow elsewhere: fix it with the smallest fp32 region ---------------------------------
# (what is planted, encoder layer): seed 0 holds an attention the lesson has not shown, and an MLP.
OVERFLOW_CASES = [("attention", 1), ("mlp", 3)]


def overflow_cases(seed: int) -> list[tuple[str, int]]:
    """Seed 0: OVERFLOW_CASES. Other seeds: two plants at random layers."""
    if seed == 0:
        return list(OVERFLOW_CASES)
    generator = torch.Generator().manual_seed(seed)
    layers = torch.randperm(4, generator=generator)[:2].tolist()
    return [("attention", layers[0]), ("mlp", layers[1])]


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
    torch.set_num_threads(1)  # tiny forward passes: more threads only wait on each other
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
    culprit = find_first_nonfinite(model, images, device="cpu", autocast_dtype=torch.float16)
    entry = {"plant": kind, "layer": f"encoder.layers.encoder_layer_{layer}"}
    entry["culprit"] = culprit.name if culprit else None
    weights = {name: _weight(m).clone() for name, m in model.named_modules() if _computes(m)}
    fixed, entry["error"] = call_answer(fix_overflow, model, images)
    entry["returned"] = None if isinstance(fixed, nn.Module) else repr(fixed)[:80]
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
    if not all(p.dtype == torch.float32 for p in fixed.parameters()):
        return {"params_fp32": False}  # a converted model; its forward would not say more
    with ActivationWatch(fixed) as watch, torch.no_grad(), torch.autocast("cpu", torch.float16):
        logits = fixed(images)
    first = watch.first_nonfinite
    modules = dict(fixed.named_modules())

    def planted_name(name: str) -> str:
        """The module's name in the model as planted (a wrapper adds a level to the name)."""
        weight = _weight(modules[name])
        same = (n for n, w in weights.items() if w.shape == weight.shape and torch.equal(w, weight))
        return next(same, name)

    fp32 = {
        planted_name(r.name)
        for r in watch.ranges
        if _computes(modules[r.name]) and r.dtype != torch.float16
    }
    finite = first is None and bool(torch.isfinite(logits).all())
    return {
        "first_nonfinite": first.name if first else None,
        "finite": finite,
        "fp32_modules": sorted(fp32),
        "params_fp32": True,
        "max_diff": (logits.float() - reference).abs().max().item() if finite else None,
    }


def compare_overflow(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        where = f"the model with an overflow planted in {want['layer']}'s {want['plant']}"
        fail_on_error(got["error"], f"fix_overflow({where}, images)")
        if got["returned"] is not None:
            raise ExerciseFailed(f"For {where} you returned {got['returned']}; return the model.")
        if not got["params_fp32"]:
            raise ExerciseFailed(
                f"For {where} your fix changed the parameters' dtype: keep the model fp32 and "
                "wrap the region that overflows in ac.debug.Fp32Region."
            )
        if not got["finite"]:
            culprit, first = want["culprit"], got["first_nonfinite"]
            if first == culprit:
                advice = (
                    "that is the module find_first_nonfinite names first: run it in an fp32 "
                    "region (ac.debug.Fp32Region), or its parent if that is not enough"
                )
            else:
                advice = (
                    "the region ends too early: values beyond 65504 leave it and are cast back "
                    "to fp16 by the next op; widen it to the module that brings them back in range"
                )
            raise ExerciseFailed(f"For {where} fp16 still overflows at {first}: {advice}.")
        extra = sorted(set(got["fp32_modules"]) - set(want["fp32_modules"]))
        if extra:
            raise ExerciseFailed(
                f"For {where} your fix also runs {', '.join(extra)} in float32. The smallest "
                f"region that keeps the forward pass finite runs only "
                f"{', '.join(want['fp32_modules'])} in float32; the rest keeps fp16's speed."
            )
        if got["max_diff"] > 0.05:
            raise ExerciseFailed(
                f"For {where} the fixed model's logits differ from the fp32 ones by up to "
                f"{got['max_diff']:.3g}: a fix must compute the same function."
            )


register("06.fix_overflow", observe_overflow, compare_overflow)
