"""Lesson 06 exercises: choosing what to train in for a device (the rule of ac.device)."""

from __future__ import annotations

import torch

from . import ExerciseFailed, call_answer, fail_on_error, register

NO_FLAGS = frozenset()
AMX_CPU = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
AVX2_CPU = frozenset({"avx", "avx2", "fma"})
AVX512_CPU = frozenset({"avx2", "avx512f", "avx512bw"})

# (device, compute capability or None for a CPU, the CPU's flags, why its dtype is the better one)
DEVICES = [
    ("V100", (7, 0), NO_FLAGS, "Volta's tensor cores do fp16 only."),
    (
        "T4",
        (7, 5),
        NO_FLAGS,
        "Turing's tensor cores do fp16 only; torch.cuda.is_bf16_supported() says True on a T4 "
        "because it counts emulation, so decide by compute capability.",
    ),
    ("A100", (8, 0), NO_FLAGS, "Ampere has bf16 tensor cores: fp32's range, no GradScaler."),
    ("H100", (9, 0), NO_FLAGS, "Hopper has bf16 tensor cores: fp32's range, no GradScaler."),
    ("RTX 3090", (8, 6), NO_FLAGS, "Every Ampere-or-later part (>= 8.0) has bf16 tensor cores."),
    (
        "a Sapphire Rapids CPU",
        None,
        AMX_CPU,
        "With AMX (or AVX512-BF16) the CPU computes in bf16 natively: bf16 autocast is faster.",
    ),
    (
        "an AVX2 CPU",
        None,
        AVX2_CPU,
        "Without AVX512-BF16 or AMX, CPU autocast emulates bf16 and is slower than fp32: "
        "train in fp32 (torch.float32, autocast off).",
    ),
    (
        "an AVX-512 CPU without BF16 (Skylake-SP)",
        None,
        AVX512_CPU,
        "AVX-512 alone has no bf16 arithmetic (that is the avx512_bf16 flag): bf16 would be "
        "emulated and slower than fp32.",
    ),
]
GPU_RULE = "bf16 tensor cores came with compute capability 8.0 (Ampere); below it, fp16."
CPU_RULE = "A CPU computes bf16 natively only with the avx512_bf16 or amx_bf16 flag."
CPU_FLAGS = ["avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_bf16", "amx_tile"]


def devices(seed: int) -> list[tuple]:
    """Seed 0: DEVICES. Other seeds: those, six more GPUs and four more CPUs, shuffled."""
    if seed == 0:
        return list(DEVICES)
    generator = torch.Generator().manual_seed(seed)
    majors = torch.randint(5, 13, (6,), generator=generator).tolist()
    minors = torch.randint(0, 10, (6,), generator=generator).tolist()
    pairs = zip(majors, minors, strict=True)
    extra = [(f"a GPU of capability {m}.{n}", (m, n), NO_FLAGS, GPU_RULE) for m, n in pairs]
    for number in range(4):
        picked = torch.rand(len(CPU_FLAGS), generator=generator) < 0.5
        flags = frozenset(f for f, keep in zip(CPU_FLAGS, picked.tolist(), strict=True) if keep)
        extra.append((f"CPU {number + 1} with flags {sorted(flags)}", None, flags, CPU_RULE))
    every = DEVICES + extra
    order = torch.randperm(len(every), generator=generator).tolist()
    return [every[i] for i in order]


def observe(choose, seed: int) -> list[dict]:
    results = []
    for name, capability, flags, why in devices(seed):
        got, error = call_answer(choose, capability, flags)
        results.append(
            {
                "device": name,
                "capability": list(capability) if capability else None,
                "flags": sorted(flags),
                "why": why,
                "error": error,
                "dtype": str(got) if isinstance(got, torch.dtype) else None,
                "returned": None if isinstance(got, torch.dtype) else repr(got)[:80],
            }
        )
    return results


def compare(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        name, capability = want["device"], want["capability"]
        where = tuple(capability) if capability else None
        fail_on_error(got["error"], f"choose({where}, {set(want['flags']) or 'frozenset()'})")
        if got["dtype"] is None:
            raise ExerciseFailed(
                f"For {name} you returned {got['returned']}; return a torch dtype such as "
                "torch.float16, torch.bfloat16 or torch.float32."
            )
        if got["dtype"] != want["dtype"]:
            where = (
                f"a CPU with flags {want['flags']}"
                if capability is None
                else f"compute capability {tuple(capability)}"
            )
            raise ExerciseFailed(
                f"{name} ({where}): you chose {got['dtype']}, the better choice is "
                f"{want['dtype']}. {want['why']}"
            )


register("06.choose_dtype", observe, compare)
