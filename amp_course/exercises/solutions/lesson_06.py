"""Reference for lesson 06's dtype choice (tests check it against ac.device's own rule)."""

from __future__ import annotations

import torch


def choose_amp_dtype(capability: tuple[int, int] | None) -> torch.dtype:
    """bf16 on a CPU (None) and on compute capability >= 8.0, fp16 below it."""
    if capability is None or tuple(capability) >= (8, 0):
        return torch.bfloat16
    return torch.float16


SOLUTIONS = {"06.choose_dtype": choose_amp_dtype}
