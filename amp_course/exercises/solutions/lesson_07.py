"""Reference solutions of lesson 07's exercises (hidden from the grading sandbox)."""

from __future__ import annotations

import torch

from ...dist_train import make_scaler, mixed_precision_policy


def fsdp_precision(amp_dtype: torch.dtype, device: torch.device):
    """Reference: (MixedPrecisionPolicy, scaler) for one FSDP2 process training in ``amp_dtype``."""
    return mixed_precision_policy(amp_dtype), make_scaler("fsdp", amp_dtype, device)


def scaler_for(strategy: str, amp_dtype: torch.dtype, device):
    """Reference: one process's loss scaler, enabled for fp16 only; ShardedGradScaler for FSDP1."""
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    device, enabled = torch.device(device), amp_dtype == torch.float16
    if strategy == "fsdp1":
        return ShardedGradScaler(device=device.type, enabled=enabled)
    return torch.amp.GradScaler(device.type, enabled=enabled)


SOLUTIONS = {"07.fsdp_precision": fsdp_precision, "07.scaler_for": scaler_for}
