"""Lesson 06 exercises: choosing the AMP dtype for a device."""

from __future__ import annotations

import torch

from . import ExerciseFailed, exercise

# (device, compute capability or None for a CPU, the right dtype, why)
DEVICES = [
    ("V100", (7, 0), torch.float16, "Volta's tensor cores do fp16 only; bf16 would be emulated."),
    (
        "T4",
        (7, 5),
        torch.float16,
        "Turing's tensor cores do fp16 only; torch.cuda.is_bf16_supported() says True on a T4 "
        "because it counts emulation, so decide by compute capability.",
    ),
    ("A100", (8, 0), torch.bfloat16, "Ampere has bf16 tensor cores: fp32's range, no GradScaler."),
    ("H100", (9, 0), torch.bfloat16, "Hopper has bf16 tensor cores: fp32's range, no GradScaler."),
    (
        "RTX 3090",
        (8, 6),
        torch.bfloat16,
        "Every Ampere-or-later part (>= 8.0) has bf16 tensor cores.",
    ),
    (
        "CPU",
        None,
        torch.bfloat16,
        "CPU autocast is built around bf16 (fast with AVX512-BF16 or AMX, slow but correct "
        "without).",
    ),
]


def choose_amp_dtype(capability: tuple[int, int] | None) -> torch.dtype:
    """bf16 on a CPU (None) and on compute capability >= 8.0, fp16 below it."""
    if capability is None or tuple(capability) >= (8, 0):
        return torch.bfloat16
    return torch.float16


@exercise("06.choose_dtype", solution=choose_amp_dtype)
def check_choose_dtype(fn) -> None:
    for name, capability, wanted, why in DEVICES:
        got = fn(capability)
        if not isinstance(got, torch.dtype):
            raise ExerciseFailed(
                f"For {name} you returned {got!r}; return a torch dtype such as "
                "torch.float16 or torch.bfloat16."
            )
        if got != wanted:
            where = "a CPU (None)" if capability is None else f"compute capability {capability}"
            raise ExerciseFailed(
                f"{name} ({where}): you chose {got}, the better choice is {wanted}. {why}"
            )
