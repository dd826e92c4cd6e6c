"""Reference for lesson 06's dtype choice (tests check it against ac.device's own rule)."""

from __future__ import annotations

import copy

import torch

from ...debug import Fp32Region, find_first_nonfinite
from ...recipe import AmpRecipe


def choose_amp_dtype(capability: tuple[int, int] | None, cpu=None) -> torch.dtype:
    """bf16 on compute capability >= 8.0, fp16 below it; on a CPU bf16 only if measured faster."""
    if capability is not None:
        return torch.bfloat16 if tuple(capability) >= (8, 0) else torch.float16
    measured_faster = cpu is not None and cpu.bf16.verdict == "faster"
    return torch.bfloat16 if measured_faster else torch.float32


def fix_overflow(model, images):
    """The innermost module around the first fp16 overflow whose fp32 region makes it finite."""

    def first_overflow(net):
        return find_first_nonfinite(net, images, recipe=AmpRecipe(images.device, "fp16"))

    found = first_overflow(model)
    name = found.name if found else ""
    while name:  # widen from the culprit to its parents until the overflow stays inside
        candidate = copy.deepcopy(model)
        candidate.set_submodule(name, Fp32Region(candidate.get_submodule(name)))
        if first_overflow(candidate) is None:
            return candidate
        name = name.rpartition(".")[0]
    return model


SOLUTIONS = {"06.choose_dtype": choose_amp_dtype, "06.fix_overflow": fix_overflow}
