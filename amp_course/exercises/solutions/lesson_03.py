"""References for lesson 03's exercises: the core of a dynamic loss scaler (its check holds it to
PyTorch's own kernels) and reading a scaler's log (tests check it against the real GradScaler's
growth tracker)."""

from __future__ import annotations

import math

import torch


def _fp32(x: float) -> float:
    """The float32 nearest to ``x``: GradScaler keeps its scale in a float32 tensor."""
    return torch.tensor(x, dtype=torch.float32).item()


class ScalerCore:
    """Reference: the scale, unscaling with the inf check, and the update, as GradScaler's kernels
    (``_amp_foreach_non_finite_check_and_unscale_``, ``_amp_update_scale_``) compute them."""

    def __init__(
        self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000
    ):
        self.scale_value = _fp32(init_scale)
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval
        self.good_steps = 0

    def scale(self, loss):
        return loss * self.scale_value

    def unscale_grads(self, grads) -> bool:
        inverse = _fp32(1.0 / self.scale_value)  # 1/scale in float64, then float32
        found_inf = False
        for grad in grads:
            found_inf |= not torch.isfinite(grad).all().item()  # checked before dividing
            grad.mul_(inverse)
        return found_inf

    def update(self, found_inf: bool) -> None:
        if found_inf:
            self.scale_value = _fp32(self.scale_value * self.backoff_factor)
            self.good_steps = 0
            return
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            grown = _fp32(self.scale_value * self.growth_factor)
            if math.isfinite(grown):  # never grow past float32's largest value to inf
                self.scale_value = grown
            self.good_steps = 0


def read_scale_log(scales, init_scale, growth_factor, backoff_factor, growth_interval):
    """Reference: (overflow steps, growth tracker at the end) from the scale after each update().

    The scale drops exactly at an overflow (backoff_factor < 1), and the tracker restarts at 0; a
    clean update counts one more, and the growth_interval-th one restarts it too, whether the
    scale could grow or, at float32's largest value, could not. So it is not the number of clean
    steps in a row.
    """
    overflows, good, before = [], 0, init_scale
    for step, after in enumerate(scales):
        if after < before:
            overflows.append(step)
            good = 0
        else:
            good += 1
            if good == growth_interval:
                good = 0
        before = after
    return overflows, good


SOLUTIONS = {"03.scaler_core": ScalerCore, "03.read_scale_log": read_scale_log}
