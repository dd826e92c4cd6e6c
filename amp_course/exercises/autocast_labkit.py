"""What the beyond-autocast labs and lesson 09's exercises share: the device, the autocast dtype,
seeded inputs and blocks. Public: observe functions and reference solutions both import it.
"""

from __future__ import annotations

import torch
from torch import nn

AMAX_EPS = 1e-12  # torchao's floor for amax, so an all-zero tensor gets a finite FP8 scale
DEVICE_TYPE = "cpu"
AMP_DTYPE = torch.bfloat16


def seeded(seed: int) -> torch.Generator:
    """The generator every observe function draws its inputs from."""
    return torch.Generator().manual_seed(seed)


def lab_block(seed: int = 0, width: int = 32) -> nn.Sequential:
    """A seeded MLP block (Linear, GELU, Linear), the shape of a transformer block's MLP."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
