"""FLOPs, peaks and MFU: what a step costs, what a GPU can do, and how much of it a run used."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

# Dense (no sparsity) peak TFLOP/s from NVIDIA's datasheets, keyed by a piece of the GPU's name.
# H200 has the H100 SXM's compute; the T4 has no TF32 or bf16 tensor cores.
PEAK_TFLOPS = {
    "H100 PCIe": {"fp32": 51.2, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0},
    "H100": {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4},
    "H200": {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4},
    "A100": {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0},
    "T4": {"fp32": 8.1, "fp16": 65.0},
}


def peak_tflops(device_name: str, precision: str) -> float | None:
    """The published dense peak of this GPU for ``precision``; None when unknown (or a CPU)."""
    for key in sorted(PEAK_TFLOPS, key=len, reverse=True):  # "H100 PCIe" before "H100"
        if key.lower() in device_name.lower():
            return PEAK_TFLOPS[key].get(precision)
    return None


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
