"""FLOPs, peaks and MFU: what a step costs, what a GPU can do, and how much of it a run used."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from .. import precision, timing
from ..device import parse_dtype

# Dense (no sparsity) peak TFLOP/s from NVIDIA's datasheets, keyed by a piece of the GPU's name.
# H200 has the H100 SXM's compute; the T4 has no TF32 or bf16 tensor cores.
PEAK_TFLOPS = {
    "H100 PCIe": {"fp32": 51.2, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0},
    "H100": {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4},
    "H200": {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4},
    "A100": {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0},
    "T4": {"fp32": 8.1, "fp16": 65.0},
}


# Peak memory bandwidth in TB/s from NVIDIA's datasheets (HBM or GDDR to the SMs): H100
# https://www.nvidia.com/en-us/data-center/h100/, H200 https://www.nvidia.com/en-us/data-center/h200/,
# A100 https://www.nvidia.com/en-us/data-center/a100/, T4 (320 GB/s) in the T4 datasheet. "A100" is
# the 40 GB card; torch names the 80 GB SXM card "A100-SXM4-80GB", the PCIe one "A100 80GB PCIe".
PEAK_BANDWIDTH_TBS = {
    "H100 PCIe": 2.0,
    "H100": 3.35,
    "H200": 4.8,
    "A100-SXM4-80GB": 2.039,
    "A100 80GB PCIe": 1.935,
    "A100": 1.555,
    "T4": 0.32,
}


def _lookup(table: dict, device_name: str):
    for key in sorted(table, key=len, reverse=True):  # "H100 PCIe" before "H100"
        if key.lower() in device_name.lower():
            return table[key]
    return None


def peak_tflops(device_name: str, precision: str) -> float | None:
    """The published dense peak of this GPU for ``precision``; None when unknown (or a CPU)."""
    peaks = _lookup(PEAK_TFLOPS, device_name)
    return None if peaks is None else peaks.get(precision)


def peak_bandwidth_tbs(device_name: str) -> float | None:
    """The published memory bandwidth of this GPU in TB/s; None when unknown (or a CPU)."""
    return _lookup(PEAK_BANDWIDTH_TBS, device_name)


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


def measure_matmul_flops(
    device, dtype: str, size: int, *, min_run_time: float = 0.2, repeats: int = 5
) -> float:
    """FLOP/s of a ``size`` x ``size`` matmul in ``dtype`` ("fp32" strictly, "tf32" with TF32)."""
    torch_dtype = parse_dtype(dtype)
    a = torch.randn(size, size, device=device, dtype=torch_dtype)
    b = torch.randn(size, size, device=device, dtype=torch_dtype)
    with precision.tf32(dtype == "tf32"):
        seconds = timing.measure(
            lambda: torch.mm(a, b), device=device, min_run_time=min_run_time, repeats=repeats
        ).median
    return 2 * size**3 / seconds
