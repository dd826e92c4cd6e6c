"""Reference solution of lesson 07's exercise (hidden from the grading sandbox)."""

from __future__ import annotations

import torch

from ...dist_train import make_scaler, mixed_precision_policy


def fsdp_precision(amp_dtype: torch.dtype, device: torch.device):
    """Reference: (MixedPrecisionPolicy, scaler) for one FSDP2 process training in ``amp_dtype``."""
    return mixed_precision_policy(amp_dtype), make_scaler("fsdp", amp_dtype, device)


SOLUTIONS = {"07.fsdp_precision": fsdp_precision}
