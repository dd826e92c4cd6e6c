"""Reference for lesson 06's dtype choice (tests check it against ac.device's own rule)."""

from __future__ import annotations

import torch

from ..lesson_06 import NO_FLAGS


def choose_amp_dtype(capability: tuple[int, int] | None, cpu_flags=NO_FLAGS) -> torch.dtype:
    """bf16 on compute capability >= 8.0, fp16 below it; on a CPU bf16 only with native bf16."""
    if capability is not None:
        return torch.bfloat16 if tuple(capability) >= (8, 0) else torch.float16
    return torch.bfloat16 if {"avx512_bf16", "amx_bf16"} & set(cpu_flags) else torch.float32


SOLUTIONS = {"06.choose_dtype": choose_amp_dtype}
