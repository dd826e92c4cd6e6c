"""Lesson 06 exercises: choosing what to train in for a device (the rule of ac.device)."""

from __future__ import annotations

import torch

from . import ExerciseFailed, exercise

NO_FLAGS = frozenset()
AMX_CPU = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})

# (device, compute capability or None for a CPU, the CPU's flags, the right dtype, why)
DEVICES = [
    ("V100", (7, 0), NO_FLAGS, torch.float16, "Volta's tensor cores do fp16 only."),
    (
        "T4",
        (7, 5),
        NO_FLAGS,
        torch.float16,
        "Turing's tensor cores do fp16 only; torch.cuda.is_bf16_supported() says True on a T4 "
        "because it counts emulation, so decide by compute capability.",
    ),
    (
        "A100",
        (8, 0),
        NO_FLAGS,
        torch.bfloat16,
        "Ampere has bf16 tensor cores: fp32's range, no GradScaler.",
    ),
    (
        "H100",
        (9, 0),
        NO_FLAGS,
        torch.bfloat16,
        "Hopper has bf16 tensor cores: fp32's range, no GradScaler.",
    ),
    (
        "RTX 3090",
        (8, 6),
        NO_FLAGS,
        torch.bfloat16,
        "Every Ampere-or-later part (>= 8.0) has bf16 tensor cores.",
    ),
    (
        "a Sapphire Rapids CPU",
        None,
        AMX_CPU,
        torch.bfloat16,
        "With AMX (or AVX512-BF16) the CPU computes in bf16 natively: bf16 autocast is faster.",
    ),
    (
        "an AVX2 CPU",
        None,
        frozenset({"avx", "avx2", "fma"}),
        torch.float32,
        "Without AVX512-BF16 or AMX, CPU autocast emulates bf16 and is slower than fp32: "
        "train in fp32 (torch.float32, autocast off).",
    ),
    (
        "an AVX-512 CPU without BF16 (Skylake-SP)",
        None,
        frozenset({"avx2", "avx512f", "avx512bw"}),
        torch.float32,
        "AVX-512 alone has no bf16 arithmetic (that is the avx512_bf16 flag): bf16 would be "
        "emulated and slower than fp32.",
    ),
]


def choose_amp_dtype(capability: tuple[int, int] | None, cpu_flags=NO_FLAGS) -> torch.dtype:
    """bf16 on compute capability >= 8.0, fp16 below it; on a CPU bf16 only with native bf16."""
    if capability is not None:
        return torch.bfloat16 if tuple(capability) >= (8, 0) else torch.float16
    return torch.bfloat16 if {"avx512_bf16", "amx_bf16"} & set(cpu_flags) else torch.float32


@exercise("06.choose_dtype", solution=choose_amp_dtype)
def check_choose_dtype(fn) -> None:
    for name, capability, flags, wanted, why in DEVICES:
        got = fn(capability, flags)
        if not isinstance(got, torch.dtype):
            raise ExerciseFailed(
                f"For {name} you returned {got!r}; return a torch dtype such as "
                "torch.float16, torch.bfloat16 or torch.float32."
            )
        if got != wanted:
            where = (
                f"a CPU with flags {sorted(flags)}"
                if capability is None
                else f"compute capability {capability}"
            )
            raise ExerciseFailed(
                f"{name} ({where}): you chose {got}, the better choice is {wanted}. {why}"
            )
