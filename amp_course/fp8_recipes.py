"""FP8 training recipes emulated with torch's float8 casts, and the roofline of an FP8 linear layer.

Recipes (where each scale comes from): tensorwise dynamic scaling, the amax of this step's tensor
(torchao.float8's default); rowwise, one amax per row with scales rounded down to powers of two
(torchao's "rowwise" recipe); delayed scaling, the largest amax of earlier steps (Transformer
Engine's DelayedScaling, amax_history_len 1024 and amax_compute_algo "max" by default; torchao
removed it in pytorch/ao PR #1753).

The prediction is the course's own forward-only model with tensorwise scaling: per FP8 input, an
amax pass that reads bf16 and a cast that reads bf16 and writes fp8 once; then the FP8 GEMM, each
kernel at its roofline floor. torchao's float8 roofline (torchao/testing/training/
roofline_utils.py) models forward plus backward instead: 6 bytes per element for the input and the
output's gradient, 8 for the weight (each written in fp8 twice, for two GEMMs), a 2 us floor per
kernel, and 78% of the peak FLOP/s and 92% of the bandwidth reachable on an H100.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import torch

from . import gpus
from .block_formats import AMAX_EPS, ElementFormat, amax_roundtrip
from .roofline import Roofline, published

# torch's name for the H100 SXM, the GPU of the course's committed runs (its row of ac.gpus).
H100_SXM = gpus.GPUS["H100 SXM"].device_name
BF16_BYTES, FP8_BYTES = 2, 1
# Casting one bf16 element to fp8 with a tensorwise scale: the amax pass reads it (2 bytes), the
# cast reads it again (2) and writes one fp8 byte.
CAST_BYTES_PER_ELEMENT = 2 * BF16_BYTES + FP8_BYTES


def fp8_roofline(device_name: str = H100_SXM) -> Roofline | None:
    """The published roofline of a GPU with its FP8 roof added; None where ``ac.gpus`` has no FP8
    peak for it (any GPU but the H100 SXM and the H200 SXM, a CPU)."""
    roofline = published(device_name, ("bf16", "fp8"))
    return roofline if roofline is not None and "fp8" in roofline.peak_flops else None


@dataclass(frozen=True)
class Fp8Prediction:
    """The floors of one (m x k) @ (k x n) linear layer in bf16 and in FP8, in seconds."""

    shape: tuple[int, int, int]
    bf16_s: float  # the bf16 GEMM
    fp8_gemm_s: float  # the FP8 GEMM (fp8 inputs, bf16 output)
    cast_s: float  # the amax and cast passes over both inputs

    @property
    def fp8_s(self) -> float:
        return self.fp8_gemm_s + self.cast_s

    @property
    def speedup(self) -> float:
        return self.bf16_s / self.fp8_s


def predict_fp8_linear(m: int, k: int, n: int, roofline: Roofline) -> Fp8Prediction:
    """bf16 against FP8 for input (m x k) and weight (n x k), each at its roofline floor."""
    flops = 2 * m * k * n
    inputs = m * k + n * k
    bf16_bytes = BF16_BYTES * (inputs + m * n)
    fp8_bytes = FP8_BYTES * inputs + BF16_BYTES * m * n  # the output stays bf16
    bandwidth = roofline.bandwidth
    return Fp8Prediction(
        (m, k, n),
        bf16_s=max(flops / roofline.peak_flops["bf16"], bf16_bytes / bandwidth),
        fp8_gemm_s=max(flops / roofline.peak_flops["fp8"], fp8_bytes / bandwidth),
        cast_s=CAST_BYTES_PER_ELEMENT * inputs / bandwidth,
    )


class DelayedScaling:
    """Transformer Engine's delayed scaling for one tensor: each step is cast with a scale made
    from the largest amax of earlier steps (its history); values above that amax saturate. With
    no history yet, this emulation uses the step's own amax."""

    def __init__(self, element: ElementFormat, history_len: int = 1024, margin: int = 0):
        self.element, self.margin = element, margin
        self.history: deque[float] = deque(maxlen=history_len)

    def amax(self, x: torch.Tensor) -> float:
        """The amax this step's scale maps onto the format's largest value (times 2^margin)."""
        known = max(self.history, default=0.0)
        return (known if known > 0 else float(x.abs().max())) * 2.0**self.margin

    def roundtrip(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        """``x`` through the format with the delayed scale, and how many values saturated."""
        amax = self.amax(x)
        saturated = int((x.abs() > amax).sum())
        y = amax_roundtrip(x, self.element, amax)
        self.history.append(float(x.abs().max()))
        return y, saturated


def current_roundtrip(x: torch.Tensor, element: ElementFormat, granularity: str = "tensor"):
    """``x`` through the format with this step's own amax: per tensor, or per row with the
    scales rounded down to powers of two (torchao's rowwise recipe)."""
    if granularity == "tensor":
        return amax_roundtrip(x, element, x.abs().amax())
    amax = x.abs().amax(dim=-1, keepdim=True).clamp(min=AMAX_EPS)
    return amax_roundtrip(x, element, amax, power_of_two=True)
