"""Debugging: find the first module whose output holds inf or NaN, and keep a region in fp32.

``torch.autograd.detect_anomaly`` covers the backward pass; nothing in torch reports which
module of a forward pass first overflowed, so this module does it with forward hooks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .recipe import AmpRecipe


@dataclass(frozen=True)
class NonFinite:
    """One module output that holds inf or NaN."""

    order: int  # position in execution order (forward hooks fire when a module finishes)
    name: str  # qualified module name, "" for the model itself
    module_type: str
    dtype: torch.dtype
    num_inf: int
    num_nan: int
    max_finite: float  # largest finite magnitude in the same output (0.0 if none is finite)

    def __str__(self) -> str:
        return (
            f"{self.name or '(model)'} ({self.module_type}) output {self.dtype}: "
            f"{self.num_inf} inf, {self.num_nan} NaN, largest finite |x| = {self.max_finite:.6g}"
        )


@dataclass(frozen=True)
class ActivationRange:
    """The largest magnitude one module output reached."""

    order: int
    name: str
    module_type: str
    dtype: torch.dtype
    max_abs: float  # inf when the output overflowed, NaN when it held NaN and no inf


def _tensors(output):
    """Floating-point tensors in a module output (a tensor, or tuples/lists/dicts of them)."""
    if isinstance(output, torch.Tensor):
        if output.is_floating_point():
            yield output
    elif isinstance(output, (tuple, list)):
        for item in output:
            yield from _tensors(item)
    elif isinstance(output, dict):
        for item in output.values():
            yield from _tensors(item)


def max_finite(tensor: torch.Tensor) -> float:
    """Largest finite magnitude in ``tensor`` (0.0 when none is finite)."""
    values = tensor.detach().abs()
    finite = values[torch.isfinite(values)]
    return float(finite.max()) if finite.numel() else 0.0


class ActivationWatch:
    """Context manager: forward hooks on every module of ``model`` that record output ranges.

    Inside ``with ActivationWatch(model) as watch:`` run any forward pass; afterwards
    ``watch.first_nonfinite`` is the first module (in execution order) whose output held inf or
    NaN, ``watch.nonfinite`` all of them and ``watch.ranges`` every output's largest magnitude.
    A module finishes after the modules it calls, so the first report is the innermost culprit.
    """

    def __init__(self, model: nn.Module):
        if not isinstance(model, nn.Module):
            raise TypeError(f"ActivationWatch needs a torch.nn.Module, got {type(model).__name__}.")
        self.model = model
        self.ranges: list[ActivationRange] = []
        self.nonfinite: list[NonFinite] = []
        self._handles = []

    @property
    def first_nonfinite(self) -> NonFinite | None:
        return self.nonfinite[0] if self.nonfinite else None

    def _hook(self, name: str):
        def record(module, inputs, output):
            for tensor in _tensors(output):
                order = len(self.ranges)
                detached = tensor.detach()
                kind = type(module).__name__
                peak = float(detached.abs().amax()) if detached.numel() else 0.0  # NaN if any NaN
                if peak != float("inf") and peak == peak:  # the common case: all finite, done
                    self.ranges.append(ActivationRange(order, name, kind, tensor.dtype, peak))
                    continue
                num_inf = int(torch.isinf(detached).sum())
                num_nan = int(torch.isnan(detached).sum())
                largest = float("inf") if num_inf else float("nan")
                self.ranges.append(ActivationRange(order, name, kind, tensor.dtype, largest))
                if num_inf or num_nan:
                    self.nonfinite.append(
                        NonFinite(
                            order, name, kind, tensor.dtype, num_inf, num_nan, max_finite(detached)
                        )
                    )

        return record

    def __enter__(self) -> ActivationWatch:
        self.ranges.clear()
        self.nonfinite.clear()
        self._handles = [
            module.register_forward_hook(self._hook(name))
            for name, module in self.model.named_modules()
        ]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


def find_first_nonfinite(
    model: nn.Module, inputs: torch.Tensor, *, recipe: AmpRecipe
) -> NonFinite | None:
    """Run one forward pass (no grad) on ``recipe``'s device under its autocast; return the first
    inf/NaN output, or None."""
    with ActivationWatch(model) as watch, torch.no_grad(), recipe.autocast():
        model(inputs.to(recipe.device))
    return watch.first_nonfinite


def activation_ranges(
    model: nn.Module, inputs: torch.Tensor, *, recipe: AmpRecipe
) -> list[ActivationRange]:
    """Every module output's largest magnitude in one forward pass on ``recipe``'s device under
    its autocast, in execution order."""
    with ActivationWatch(model) as watch, torch.no_grad(), recipe.autocast():
        model(inputs.to(recipe.device))
    return watch.ranges


class Fp32Region(nn.Module):
    """Runs ``module`` in float32 with autocast disabled, whatever the surrounding autocast does.

    Inputs (positional and keyword) are cast to fp32 first: inside a disabled region autocast no
    longer casts them, and an fp16 input times an fp32 weight would fail.
    """

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        def to_fp32(a):
            return a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a

        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        device_type = tensors[0].device.type if tensors else "cpu"
        args = [to_fp32(a) for a in args]
        kwargs = {name: to_fp32(a) for name, a in kwargs.items()}
        with torch.autocast(device_type=device_type, enabled=False):
            return self.module(*args, **kwargs)
