"""Reference fixes of the labs on what autocast does not cover (hidden while grading)."""

from __future__ import annotations

import torch

from ..autocast_labkit import AMP_DTYPE, DEVICE_TYPE


def make_fused_op(name, kernel):
    """Reference: the custom op, plus an autocast rule that casts its inputs to bf16 on the CPU."""
    op = torch.library.custom_op(name, kernel, mutates_args=())
    torch.library.register_autocast(name, DEVICE_TYPE, AMP_DTYPE)
    return op


def mean_loss(losses):
    """Reference: accumulate in Python floats (float64), as ``loss.item()`` gives them."""
    total = 0.0
    for loss in losses:
        total += loss.item()
    return total / len(losses)


SOLUTIONS = {"labs.custom_op_autocast": make_fused_op, "labs.bf16_loss_sum": mean_loss}
