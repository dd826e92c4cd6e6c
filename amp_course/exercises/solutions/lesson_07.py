"""Reference solutions of lesson 07's exercises (hidden from the grading sandbox)."""

from __future__ import annotations

import dataclasses

import torch

from ...dist_train import make_scaler, mixed_precision_policy
from ...recipe import AmpRecipe


def fsdp_precision(amp_dtype: torch.dtype, device: torch.device):
    """Reference: (the root's MixedPrecisionPolicy, scaler) for one FSDP2 process computing in
    ``amp_dtype`` without autocast: the course's policy, plus fp32 outputs for the loss."""
    recipe = AmpRecipe(device, amp_dtype)
    policy = dataclasses.replace(mixed_precision_policy(recipe), output_dtype=torch.float32)
    return policy, make_scaler("fsdp", recipe)


def scaler_for(strategy: str, amp_dtype: torch.dtype, device):
    """Reference: one process's loss scaler, enabled for fp16 only; ShardedGradScaler for FSDP1."""
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    recipe = AmpRecipe(device, amp_dtype)
    if strategy == "fsdp1":
        return ShardedGradScaler(device=recipe.device.type, enabled=recipe.needs_scaler)
    return recipe.scaler()


SOLUTIONS = {"07.fsdp_precision": fsdp_precision, "07.scaler_for": scaler_for}
