"""Reference for lesson 06's dtype choice (tests check it against ac.device's own rule)."""

from __future__ import annotations

import torch


def choose_amp_dtype(capability: tuple[int, int] | None, cpu=None) -> torch.dtype:
    """bf16 on compute capability >= 8.0, fp16 below it; on a CPU bf16 only if measured faster."""
    if capability is not None:
        return torch.bfloat16 if tuple(capability) >= (8, 0) else torch.float16
    measured_faster = cpu is not None and cpu.bf16.verdict == "faster"
    return torch.bfloat16 if measured_faster else torch.float32


SOLUTIONS = {"06.choose_dtype": choose_amp_dtype}
