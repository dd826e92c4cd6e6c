"""Lesson 06 exercises: choosing what to train in for a device (the rule of ac.device)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

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
# (device, compute capability or None for a CPU, the CPU's timing, why a GPU's dtype is the better)
DEVICES = [
    ("V100", (7, 0), None, "Volta's tensor cores do fp16 only."),
    (
        "T4",
        (7, 5),
        None,
        "Turing's tensor cores do fp16 only; torch.cuda.is_bf16_supported() says True on a T4 "
        "because it counts emulation, so decide by compute capability.",
    ),
    ("A100", (8, 0), None, "Ampere has bf16 tensor cores: fp32's range, no GradScaler."),
    ("H100", (9, 0), None, "Hopper has bf16 tensor cores: fp32's range, no GradScaler."),
    ("RTX 3090", (8, 6), None, "Every Ampere-or-later part (>= 8.0) has bf16 tensor cores."),
    ("a Sapphire Rapids CPU (AMX)", None, _cpu(AMX, 0.45, True), ""),
    ("an AMD Zen 4 CPU (AVX512-BF16)", None, _cpu("avx2 avx512f avx512_bf16", 1.61, True), ""),
    ("an AVX2 CPU", None, _cpu("avx avx2 fma", 3.5, True), ""),
    ("another AMX CPU", None, _cpu(AMX, 0.96, False), ""),
]
GPU_RULE = "bf16 tensor cores came with compute capability 8.0 (Ampere); below it, fp16."
CPU_FLAGS = ["avx", "avx2", "avx512f", "avx512bw", "avx512_bf16", "amx_tile", "amx_bf16"]


def devices(seed: int) -> list[tuple]:
    """Seed 0: DEVICES. Other seeds: those, six more GPUs and four more CPUs, shuffled."""
    if seed == 0:
        return list(DEVICES)
    generator = torch.Generator().manual_seed(seed)
    majors = torch.randint(7, 13, (6,), generator=generator).tolist()
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
    native = {"avx512_bf16", "amx_bf16"} & flags
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
