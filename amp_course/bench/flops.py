"""FLOPs, peaks and MFU: what a step costs, what a GPU can do, and how much of it a run used."""

from __future__ import annotations

import re
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from .. import precision, precisions, timing

# Dense (no sparsity) peak TFLOP/s per GPU model. H100 SXM5 and H100 PCIe: NVIDIA's H100 Tensor
# Core GPU Architecture whitepaper ("Hopper whitepaper", the table comparing A100 and H100,
# https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper): FP32 66.9, TF32 494.7,
# FP16/BF16 989.4 for the SXM5 card. The H200 SXM datasheet
# (https://www.nvidia.com/en-us/data-center/h200/) lists the H100 SXM's compute (67, and 989 and
# 1979 with sparsity). A100: its datasheet (https://www.nvidia.com/en-us/data-center/a100/), the
# same for its 40 and 80 GB cards. T4: its datasheet; it has no TF32 or bf16 tensor cores.
PEAK_TFLOPS = {
    "H100 SXM": {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4},
    "H100 PCIe": {"fp32": 51.2, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0},
    "H200 SXM": {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4},
    "A100": {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0},
    "T4": {"fp32": 8.1, "fp16": 65.0},
}


# Peak memory bandwidth in TB/s from NVIDIA's datasheets (HBM or GDDR to the SMs): H100
# https://www.nvidia.com/en-us/data-center/h100/, H200 https://www.nvidia.com/en-us/data-center/h200/,
# A100 https://www.nvidia.com/en-us/data-center/a100/ (1,555 GB/s for both 40 GB cards), T4
# (320 GB/s) in the T4 datasheet.
PEAK_BANDWIDTH_TBS = {
    "H100 SXM": 3.35,
    "H100 PCIe": 2.0,
    "H200 SXM": 4.8,
    "A100 40GB": 1.555,
    "A100 SXM4 80GB": 2.039,
    "A100 PCIe 80GB": 1.935,
    "T4": 0.32,
}

# How torch names each model (torch.cuda.get_device_name, in lower-case words, the vendor left
# out): the words a name must have, and the others it may have. A name with any other word is a
# variant with its own clocks or memory (an H100 NVL, an H200 NVL, a GH200): it gets no figure
# rather than another card's, so no MFU against a datasheet; measured peaks still stand.
NAME_WORDS = {
    "H100 SXM": ({"h100"}, {"80gb", "hbm3", "sxm5"}),
    "H100 PCIe": ({"h100", "pcie"}, {"80gb"}),
    "H200 SXM": ({"h200"}, {"141gb", "hbm3e", "sxm5"}),
    "A100": ({"a100"}, {"sxm4", "pcie", "40gb", "80gb"}),
    "A100 40GB": ({"a100", "40gb"}, {"sxm4", "pcie"}),
    "A100 SXM4 80GB": ({"a100", "sxm4", "80gb"}, set()),
    "A100 PCIe 80GB": ({"a100", "pcie", "80gb"}, set()),
    "T4": ({"t4"}, set()),
}
VENDOR_WORDS = {"nvidia", "tesla"}


def gpu_model(device_name: str, table: dict) -> str | None:
    """The key of ``table`` whose model is the GPU called ``device_name``; None for any other."""
    words = set(re.findall(r"[a-z0-9]+", device_name.lower())) - VENDOR_WORDS
    matches = [
        model
        for model in table
        if NAME_WORDS[model][0] <= words <= NAME_WORDS[model][0] | NAME_WORDS[model][1]
    ]
    return matches[0] if len(matches) == 1 else None


def peak_tflops(device_name: str, precision: str) -> float | None:
    """The published dense peak of this GPU for ``precision``; None when unknown (or a CPU)."""
    model = gpu_model(device_name, PEAK_TFLOPS)
    return None if model is None else PEAK_TFLOPS[model].get(precision)


def peak_bandwidth_tbs(device_name: str) -> float | None:
    """The published memory bandwidth of this GPU in TB/s; None when unknown (or a CPU)."""
    model = gpu_model(device_name, PEAK_BANDWIDTH_TBS)
    return None if model is None else PEAK_BANDWIDTH_TBS[model]


def datasheet_note(device_name: str) -> str | None:
    """Why the course has no datasheet peak or bandwidth for this device; None when it has both."""
    if gpu_model(device_name, PEAK_TFLOPS) and gpu_model(device_name, PEAK_BANDWIDTH_TBS):
        return None
    if device_name.startswith("CPU"):
        return f"The course has no datasheet figures for a CPU ({device_name})."
    known = ", ".join(PEAK_TFLOPS)
    return (
        f"The course has no datasheet figures for {device_name}: it has them for the {known} "
        "only, and gives none to a variant with its own clocks or memory (an H100 NVL, a GH200) "
        "rather than another card's."
    )


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
    """FLOP/s of a ``size`` x ``size`` matmul in ``dtype``: a precision's name or row ("fp32"
    strictly, "tf32" with TF32, as the row's ``tf32_matmuls`` says)."""
    row = precisions.get(dtype)
    a = torch.randn(size, size, device=device, dtype=row.dtype)
    b = torch.randn(size, size, device=device, dtype=row.dtype)
    with precision.tf32(row.tf32_matmuls):
        seconds = timing.measure(
            lambda: torch.mm(a, b), device=device, min_run_time=min_run_time, repeats=repeats
        ).median
    return 2 * size**3 / seconds
