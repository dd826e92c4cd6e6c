"""The GPUs the course knows, in one table: what each card can do, and the rules by compute
capability that say which formats have tensor cores and which attention kernel takes which dtype.

Every capability question in the course is answered here: ``ac.device``'s dtype rule, the T4
rehearsal (``ac.emulation`` applies the T4's row), the bench's skips, its MFU peaks, the roofline,
the FP8 roofline, the lessons and the test suite's CUDA stand-in all read this module. Below
every other module: it imports nothing of the course, nor torch.

Sources of the figures (dense peaks, without sparsity; NVIDIA's GB are the cards' nominal memory):
- H100 SXM5 and H100 PCIe: NVIDIA's H100 Tensor Core GPU Architecture whitepaper (the "Hopper
  whitepaper", its table comparing A100 and H100,
  https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper): FP32 66.9, TF32 494.7,
  FP16/BF16 989.4 and FP8 1978.9 TFLOP/s and 132 SMs for the SXM5 card, FP32 51.2, TF32 378,
  FP16/BF16 756 and 114 SMs for the PCIe card; memory and bandwidth from the H100 datasheet
  (https://www.nvidia.com/en-us/data-center/h100/): 80 GB, 3.35 TB/s (SXM) and 2.0 TB/s (PCIe).
- H200 SXM: its datasheet (https://www.nvidia.com/en-us/data-center/h200/) lists the H100 SXM's
  compute (67 TFLOP/s FP32, 989 TF32, 1979 BF16 and 3958 FP8 with sparsity: the same dense
  peaks), 141 GB at 4.8 TB/s. It gives no SM count, so the course has none for it.
- A100: its datasheet (https://www.nvidia.com/en-us/data-center/a100/), the same compute for its
  40 and 80 GB cards: FP32 19.5, TF32 156, FP16/BF16 312; 1,555 GB/s for both 40 GB cards, 2,039
  for the SXM4 80 GB, 1,935 for the PCIe 80 GB; 108 SMs in the NVIDIA A100 Tensor Core GPU
  Architecture whitepaper.
- T4: its datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/
  t4-tensor-core-datasheet-951643.pdf): FP32 8.1, FP16 65 on tensor cores, no TF32 or bf16
  tensor cores, 16 GB at 320 GB/s; 40 SMs in the NVIDIA Turing GPU Architecture whitepaper.
- Compute capabilities: NVIDIA's list of CUDA GPUs (https://developer.nvidia.com/cuda-gpus); the
  course's committed H100 runs record sm_90.
No other card has figures here: a variant with its own clocks or memory (an H100 NVL, an H200
NVL, a GH200, an H800) gets none rather than another card's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

Capability = tuple[int, int]


@dataclass(frozen=True)
class Rule:
    """The GPUs that have something: compute capability ``first`` and later, up to ``last``
    (None: no end known), and only the majors in ``majors`` where it names them."""

    first: Capability
    last: Capability | None = None
    majors: tuple[int, ...] | None = None

    def holds(self, capability: Capability) -> bool:
        capability = tuple(capability)
        if capability < self.first or (self.last is not None and capability > self.last):
            return False
        return self.majors is None or capability[0] in self.majors


# Tensor cores per format: fp16 from Volta (7.0), TF32 and bf16 from Ampere (8.0), FP8 from Ada
# (8.9) and Hopper (9.0). The MX formats (MXFP8, MXFP6, MXFP4) and NVFP4 need Blackwell's
# tensor cores: compute capability 10.x, 11.0 (Jetson Thor, sm_101 before CUDA 13 renamed it) and
# 12.x (LLVM's NVPTX tests compile tcgen05.mma's block-scaled kinds for sm_100a, sm_101a and
# sm_110a, and mma.sync's block_scale for sm_120a). Software lags the hardware: Transformer
# Engine's NVFP4 page lists training on 10.0 and 10.3 only.
TENSOR_CORES = {
    "fp16": Rule((7, 0)),
    "tf32": Rule((8, 0)),
    "bf16": Rule((8, 0)),
    "fp8": Rule((8, 9)),
    "mx": Rule((10, 0), majors=(10, 11, 12)),
    "nvfp4": Rule((10, 0), majors=(10, 11, 12)),
}

# Which input dtypes each of scaled_dot_product_attention's CUDA kernels takes, and from which
# compute capability. Memory-efficient: fp32 and fp16 from 5.0, bf16 from 8.0, up to 12.1 (torch's
# aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, ``less_than_sm80_mem_efficient_dtypes``
# and ``check_sm_version<sm50, sm121>``;
# that file is not installed with torch, but the kernel headers installed with it agree, which
# tests/test_gpus.py checks: mem_eff_attention/kernels/cutlassF.h and cutlassB.h declare bf16
# kernels for Sm80 only, fp16 and fp32 ones for Sm50, Sm70, Sm75 and Sm80). Flash and cuDNN: fp16
# and bf16 only, on 8.0 to 12.1 (sdp_utils.cpp, ``check_sm_version<sm80, sm121>``, as lesson 09
# cites it). Math: every dtype everywhere (it computes fp16 and bf16 in fp32).
ATTENTION = {
    "flash": {"fp16": Rule((8, 0), (12, 1)), "bf16": Rule((8, 0), (12, 1))},
    "efficient": {
        "fp32": Rule((5, 0), (12, 1)),
        "fp16": Rule((5, 0), (12, 1)),
        "bf16": Rule((8, 0), (12, 1)),
    },
    "cudnn": {"fp16": Rule((8, 0), (12, 1)), "bf16": Rule((8, 0), (12, 1))},
    "math": {"fp32": Rule((0, 0)), "fp16": Rule((0, 0)), "bf16": Rule((0, 0))},
}


@dataclass(frozen=True)
class Gpu:
    """One card: its compute capability, memory, SMs, bandwidth and dense peaks (TFLOP/s)."""

    model: str  # the course's name for it: "H100 SXM"
    device_name: str  # what torch.cuda.get_device_name calls such a card
    capability: Capability
    memory_gb: int  # NVIDIA's figure (80 for "80GB"), which the course's memory counts take as GiB
    bandwidth_tbs: float  # memory to the SMs, TB/s
    # Dense, per precision name; absent where the card has no tensor cores for it or the course
    # has no sourced figure (the H100 PCIe's FP8).
    peak_tflops: dict[str, float]
    sms: int | None  # streaming multiprocessors; None where NVIDIA's sources give none
    words: frozenset[str]  # the words (lower case, vendor left out) torch's name must have
    optional_words: frozenset[str] = frozenset()  # and the others it may have
    # The kernel scaled_dot_product_attention picks by default for each input dtype, where a
    # committed run of lesson 09 measured it (torch 2.11 on the H100).
    attention_picks: dict[str, str] = field(default_factory=dict)

    def has_tensor_cores(self, fmt: str) -> bool:
        return has_tensor_cores(self.capability, fmt)

    def peak(self, precision: str) -> float | None:
        """The dense peak in TFLOP/s for ``precision`` ("fp32", "tf32", "bf16", "fp8"...); None
        where this card has none in the table. A name no card's peak has is refused."""
        return self.peak_tflops.get(require_peak_name(precision))


# The names a row's peaks go by (a test holds every row to them).
PEAK_NAMES = ("fp32", "tf32", "fp16", "bf16", "fp8")


def require_peak_name(precision: str) -> str:
    """``precision`` when a peak of the table may go by it; else an error naming the valid ones
    (a typo, or "bfloat16", gave None: no peak known)."""
    if precision not in PEAK_NAMES:
        raise ValueError(
            f"The course's table of GPUs has no peak named {precision!r}. Valid choices: "
            f"{', '.join(PEAK_NAMES)}."
        )
    return precision


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_HOPPER_SXM = {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}
_A100 = {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}
_ROWS = (
    Gpu(
        "T4",
        "Tesla T4",
        (7, 5),
        memory_gb=16,
        bandwidth_tbs=0.32,
        peak_tflops={"fp32": 8.1, "fp16": 65.0},
        sms=40,
        words=_words("t4"),
    ),
    Gpu(
        "A100 40GB",
        "NVIDIA A100-SXM4-40GB",
        (8, 0),
        memory_gb=40,
        bandwidth_tbs=1.555,
        peak_tflops=_A100,
        sms=108,
        words=_words("a100 40gb"),
        optional_words=_words("sxm4 pcie"),
    ),
    Gpu(
        "A100 SXM4 80GB",
        "NVIDIA A100-SXM4-80GB",
        (8, 0),
        memory_gb=80,
        bandwidth_tbs=2.039,
        peak_tflops=_A100,
        sms=108,
        words=_words("a100 sxm4 80gb"),
    ),
    Gpu(
        "A100 PCIe 80GB",
        "NVIDIA A100 80GB PCIe",
        (8, 0),
        memory_gb=80,
        bandwidth_tbs=1.935,
        peak_tflops=_A100,
        sms=108,
        words=_words("a100 pcie 80gb"),
    ),
    Gpu(
        "H100 SXM",
        "NVIDIA H100 80GB HBM3",
        (9, 0),
        memory_gb=80,
        bandwidth_tbs=3.35,
        peak_tflops=_HOPPER_SXM,
        sms=132,
        words=_words("h100"),
        optional_words=_words("80gb hbm3 sxm5"),
        attention_picks={"fp32": "efficient", "fp16": "cudnn", "bf16": "cudnn"},
    ),
    Gpu(
        "H100 PCIe",
        "NVIDIA H100 PCIe",
        (9, 0),
        memory_gb=80,
        bandwidth_tbs=2.0,
        peak_tflops={"fp32": 51.2, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0},
        sms=114,
        words=_words("h100 pcie"),
        optional_words=_words("80gb"),
    ),
    Gpu(
        "H200 SXM",
        "NVIDIA H200",
        (9, 0),
        memory_gb=141,
        bandwidth_tbs=4.8,
        peak_tflops=_HOPPER_SXM,
        sms=None,
        words=_words("h200"),
        optional_words=_words("141gb hbm3e sxm5"),
    ),
)
GPUS = {gpu.model: gpu for gpu in _ROWS}
# The course's scenario (lessons 00, 07 and 09): ViT-L/16 trained on GPUs of this kind. Its memory
# is taken as GiB, as the lessons count bytes (an H100's 80 GB of HBM3 are 80 GiB).
SCENARIO = GPUS["H100 SXM"]
VENDOR_WORDS = frozenset({"nvidia", "tesla"})


def has_tensor_cores(capability: Capability, fmt: str) -> bool:
    """Whether a GPU of this compute capability has tensor cores for ``fmt`` (a key of
    ``TENSOR_CORES``: "fp16", "tf32", "bf16", "fp8", "mx", "nvfp4")."""
    return TENSOR_CORES[fmt].holds(capability)


def tensor_cores_from(fmt: str) -> Capability:
    """The compute capability of the first GPUs with tensor cores for ``fmt``."""
    return TENSOR_CORES[fmt].first


def attention_takes(kernel: str, dtype: str, capability: Capability) -> bool:
    """Whether SDPA's ``kernel`` ("flash", "efficient", "cudnn", "math") takes ``dtype`` inputs
    ("fp32", "fp16", "bf16") on a GPU of this compute capability."""
    rule = ATTENTION[kernel].get(dtype)
    return rule is not None and rule.holds(capability)


def attention_dtypes(kernel: str, capability: Capability) -> tuple[str, ...]:
    """The input dtypes SDPA's ``kernel`` takes on a GPU of this compute capability (none: the
    GPU has no such kernel)."""
    return tuple(d for d in ATTENTION[kernel] if attention_takes(kernel, d, capability))


def attention_kernels(dtype: str, capability: Capability) -> tuple[str, ...]:
    """The SDPA kernels that take ``dtype`` inputs on a GPU of this compute capability."""
    return tuple(k for k in ATTENTION if attention_takes(k, dtype, capability))


def format_capability(capability: Capability) -> str:
    """``(8, 9)`` -> ``"8.9"``."""
    return ".".join(str(part) for part in capability)


def lookup(device_name: str) -> Gpu | None:
    """The row of the GPU torch calls ``device_name``; None for any other card (or a CPU)."""
    words = set(re.findall(r"[a-z0-9]+", device_name.lower())) - VENDOR_WORDS
    rows = [g for g in _ROWS if g.words <= words <= g.words | g.optional_words]
    return rows[0] if len(rows) == 1 else None


def peak_tflops(device_name: str, precision: str) -> float | None:
    """The published dense peak of this GPU for ``precision``; None when unknown (or a CPU)."""
    name = require_peak_name(precision)  # on a CPU too: a name is refused wherever it runs
    gpu = lookup(device_name)
    return None if gpu is None else gpu.peak_tflops.get(name)


def peak_bandwidth_tbs(device_name: str) -> float | None:
    """The published memory bandwidth of this GPU in TB/s; None when unknown (or a CPU)."""
    gpu = lookup(device_name)
    return None if gpu is None else gpu.bandwidth_tbs


def datasheet_note(device_name: str) -> str | None:
    """Why the course has no datasheet figures for this device; None when it has them."""
    if lookup(device_name) is not None:
        return None
    if device_name.startswith("CPU"):
        return f"The course has no datasheet figures for a CPU ({device_name})."
    return (
        f"The course has no datasheet figures for {device_name}: it has them for the "
        f"{', '.join(GPUS)} only, and gives none to a variant with its own clocks or memory (an "
        "H100 NVL, a GH200) rather than another card's."
    )
