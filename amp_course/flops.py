"""FLOPs and MFU: what a step costs, what a device's matmul reaches, and how much of a peak a run
used. The published peaks and bandwidths are ``ac.gpus``'s table; this module sits beside it, below
the benchmark and the roofline, which both read it."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from . import precisions, recipe, timing

__all__ = ["count_step_flops", "measure_matmul_flops", "mfu"]


def mfu(flops_per_step: float, step_seconds: float, peak: float) -> float:
    """Model FLOP utilisation: achieved FLOP/s over the peak (``peak`` in TFLOP/s), a fraction."""
    if step_seconds <= 0 or peak <= 0:
        raise ValueError(
            f"step time and peak must be positive, got {step_seconds} s, {peak} TFLOP/s."
        )
    return flops_per_step / step_seconds / (peak * 1e12)


def count_step_flops(
    build: Callable[[], torch.nn.Module], input_shape: tuple[int, ...], num_classes: int
) -> tuple[int, int]:
    """(forward, forward+backward) FLOPs of one training step, counted on the meta device.

    FlopCounterMode counts matmuls, convolutions and attention; on meta tensors nothing is
    computed, so even ViT-L/16 is counted in seconds on a CPU.
    """
    with torch.device("meta"):
        model = build()
        inputs = torch.empty(input_shape)
        targets = torch.zeros(input_shape[0], dtype=torch.long)
    with FlopCounterMode(display=False) as counter:
        model(inputs)
    forward = counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        loss = torch.nn.functional.cross_entropy(model(inputs), targets % num_classes)
        loss.backward()
    return forward, counter.get_total_flops()


# The operand layouts of a training step's matmuls: a Linear's forward is x @ W.T, its input's
# gradient g @ W and its weight's gradient g.T @ x. A GPU runs them alike; where a CPU emulates
# bf16, one layout measured here ran at a tenth of another's speed (a @ b the slowest).
LAYOUTS = {
    "a @ b": lambda a, b: torch.mm(a, b),
    "a @ b.T": lambda a, b: torch.mm(a, b.t()),
    "a.T @ b": lambda a, b: torch.mm(a.t(), b),
}


def measure_matmul_flops(
    device, dtype: str, size: int, *, min_run_time: float = 0.2, repeats: int = 5
) -> float:
    """FLOP/s of a ``size`` x ``size`` matmul in ``dtype``: a precision's name or row ("fp32"
    strictly, "tf32" with TF32, as the row's ``tf32_matmuls`` says); the best of ``LAYOUTS``, so
    that it is a ceiling for every matmul of a training step at that size."""
    row = precisions.get(dtype)
    a = torch.randn(size, size, device=device, dtype=row.dtype)
    b = torch.randn(size, size, device=device, dtype=row.dtype)
    with recipe.tf32(row.tf32_matmuls):
        seconds = min(
            timing.measure(
                lambda mm=mm: mm(a, b), device=device, min_run_time=min_run_time, repeats=repeats
            ).median
            for mm in LAYOUTS.values()
        )
    return 2 * size**3 / seconds
