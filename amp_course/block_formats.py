"""Formats below bf16 on any CPU: fp8 and fp4 elements, amax scaling per tensor, row or block, and
the block-scaled formats MXFP8, MXFP4 (OCP Microscaling v1.0) and NVFP4 (NVIDIA).

MX, per the OCP MX v1.0 spec (section 6.3) and Algorithm 1 of Rouhani et al. 2023 (arXiv
2310.10537): each block of 32 values along the last dimension shares an E8M0 scale
``X = 2^(floor(log2(amax)) - emax_elem)``; every element is ``v / X`` rounded to the element format
(to nearest, ties to even, as torch's casts and torchao round), with normal numbers clamped
(saturated) at its largest value. E8M0 holds 2^-127 to 2^127 (0xFF is NaN). NVFP4, per NVIDIA
(its blog post introducing NVFP4 and the paper "Pretraining Large Language Models with NVFP4",
arXiv 2509.25149): 16-value blocks of E2M1 with an E4M3 scale each, encoded relative to one fp32
scale per tensor, ``amax_tensor / (6 * 448)``.

torch has fp8 casts on the CPU but no fp4 one (``float4_e2m1fn_x2`` is storage only), so fp8
elements are rounded by torch's cast and E2M1 by ``round_to_grid``; the tests check the two agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .formats import LAYOUTS, Layout

AMAX_EPS = 1e-12  # an all-zero tensor or row gets a finite scale (torchao's floor, lesson 09)
# E8M0's smallest scale is 2^-127 (its largest, 2^127, is beyond what an fp32 amax asks for).
E8M0_MIN_EXPONENT = -127


@dataclass(frozen=True)
class ElementFormat:
    """A small float layout with no inf: 1 sign bit, exponent bits, mantissa bits, largest value."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    max: float
    dtype: torch.dtype | None  # torch's dtype where its CPU cast rounds to this format

    @property
    def bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def emax(self) -> int:
        """The exponent of the largest normal number (``emax_elem`` in the MX spec)."""
        return math.floor(math.log2(self.max))

    @property
    def smallest_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (1 - self.bias - self.mantissa_bits)


def _from_layout(name: str, layout: Layout) -> ElementFormat:
    """An fp8 element as ``ac.formats`` defines it, its largest value from torch.finfo."""
    dtype = layout.dtype
    return ElementFormat(
        name, layout.exponent_bits, layout.mantissa_bits, float(torch.finfo(dtype).max), dtype
    )


E4M3 = _from_layout("e4m3", LAYOUTS["fp8 e4m3"])
E5M2 = _from_layout("e5m2", LAYOUTS["fp8 e5m2"])
# E2M1 (OCP FP4) spends every code on a number, the all-ones exponent included: its largest value
# is 1.5 x 2^(3 - bias) = 6.
E2M1 = ElementFormat("e2m1", 2, 1, 1.5 * 2.0 ** (3 - 1), None)
ELEMENTS = {fmt.name: fmt for fmt in (E4M3, E5M2, E2M1)}


@dataclass(frozen=True)
class BlockFormat:
    """A block-scaled format: its elements, how many share a scale, and the scale's encoding."""

    name: str
    element: ElementFormat
    block_size: int
    scale: str  # "e8m0" (a power of two) or "e4m3" (an fp8 number)
    tensor_scale_bits: int = 0  # NVFP4's fp32 scale per tensor

    def bits_per_value(self, numel: int | None = None) -> float:
        """Element bits plus each block's 8-bit scale shared by its values (plus the tensor's)."""
        bits = self.element.bits + 8 / self.block_size
        return bits + (self.tensor_scale_bits / numel if numel else 0.0)


FORMATS = {
    "mxfp8_e4m3": BlockFormat("mxfp8_e4m3", E4M3, 32, "e8m0"),
    "mxfp8_e5m2": BlockFormat("mxfp8_e5m2", E5M2, 32, "e8m0"),
    "mxfp4": BlockFormat("mxfp4", E2M1, 32, "e8m0"),
    "nvfp4": BlockFormat("nvfp4", E2M1, 16, "e4m3", tensor_scale_bits=32),
}


def get_format(name: str) -> BlockFormat:
    """The block format called ``name`` (``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp4"``,
    ``"nvfp4"``)."""
    if name not in FORMATS:
        raise ValueError(f"Unknown block format {name!r}. Valid choices: {', '.join(FORMATS)}.")
    return FORMATS[name]


def round_to_grid(x: torch.Tensor, exponent_bits: int, mantissa_bits: int) -> torch.Tensor:
    """``x`` rounded to nearest, ties to even, onto a layout's numbers (subnormals included).

    No upper limit: saturation is the caller's rule (the MX spec clamps before rounding).
    """
    x = x.float()
    magnitude = x.abs()
    step = grid_step(magnitude, exponent_bits, mantissa_bits)
    # magnitude / step is exact (a power of two); torch.round rounds halves to even.
    return torch.copysign(torch.round(magnitude / step) * step, x)


def grid_step(magnitude: torch.Tensor, exponent_bits: int, mantissa_bits: int) -> torch.Tensor:
    """The spacing of a layout's numbers around each magnitude (a power of two; in the subnormal
    range, the smallest binade's)."""
    _, exponent = torch.frexp(magnitude)  # magnitude = f * 2^exponent with f in [0.5, 1)
    lowest = 1 - (2 ** (exponent_bits - 1) - 1)  # below it the spacing stays (subnormals)
    binade = (exponent - 1).clamp(min=lowest)
    return torch.ldexp(torch.ones_like(magnitude), binade - mantissa_bits)


def round_to_element(x: torch.Tensor, element: ElementFormat) -> torch.Tensor:
    """``x`` saturated at the element format's largest value, then rounded to it (as fp32)."""
    clamped = x.float().clamp(-element.max, element.max)  # NaN stays NaN
    if element.dtype is not None:
        return clamped.to(element.dtype).float()
    return round_to_grid(clamped, element.exponent_bits, element.mantissa_bits)


def amax_roundtrip(
    x: torch.Tensor, element: ElementFormat, amax, *, power_of_two: bool = False
) -> torch.Tensor:
    """``x`` scaled so that ``amax`` (broadcastable) lands on the format's largest value, rounded,
    and scaled back. ``power_of_two`` rounds each scale down to a power of two (torchao's
    rowwise recipe), so nothing saturates."""
    amax = torch.as_tensor(amax, dtype=torch.float32).clamp(min=AMAX_EPS)
    scale = element.max / amax
    if power_of_two:
        scale = torch.exp2(torch.floor(torch.log2(scale)))
    return round_to_element(x.float() * scale, element) / scale


def group_amax(x: torch.Tensor, granularity) -> torch.Tensor:
    """The amax of each group, shaped to broadcast over ``x``'s blocks: granularity ``"tensor"``,
    ``"row"`` (over the last dimension) or an int, a block of that many along the last dimension."""
    x = x.float().abs()
    if granularity == "tensor":
        return x.amax()
    if granularity == "row":
        return x.amax(dim=-1, keepdim=True)
    return split_blocks(x, granularity, f"blocks of {granularity}").amax(dim=-1, keepdim=True)


def scaled_roundtrip(x: torch.Tensor, element: ElementFormat, granularity) -> torch.Tensor:
    """``x`` through ``element`` with one fp32 amax scale per tensor, per row or per block."""
    if granularity in ("tensor", "row"):
        return amax_roundtrip(x, element, group_amax(x, granularity))
    blocks = split_blocks(x.float(), granularity, f"blocks of {granularity}")
    return amax_roundtrip(blocks, element, group_amax(x, granularity)).reshape(x.shape)


def split_blocks(x: torch.Tensor, block_size: int, what: str) -> torch.Tensor:
    """``x`` as (..., blocks, block_size) along its last dimension; refuses a size that does not
    divide it."""
    if x.dim() == 0 or x.shape[-1] % block_size:
        raise ValueError(
            f"{what} quantizes the last dimension in blocks of {block_size}: it must be a "
            f"multiple of {block_size}, and this tensor's shape is {tuple(x.shape)}."
        )
    return x.reshape(*x.shape[:-1], x.shape[-1] // block_size, block_size)


def mx_scale_exponents(amax: torch.Tensor, element: ElementFormat, rounding: str = "floor"):
    """Each block's E8M0 scale exponent (NaN where its amax is inf or NaN).

    ``"floor"``: the OCP MX v1.0 rule, ``floor(log2(amax)) - emax_elem``; the largest element can
    then exceed the format's maximum and is clamped. ``"rceil"`` (NVIDIA's cuBLAS, torchao's
    ScaleCalculationMode.RCEIL): ``ceil(log2(amax / max_elem))``, the smallest power of two with
    ``amax / scale <= max_elem``, so nothing is clamped.
    """
    amax = amax.float()
    if rounding == "floor":
        _, exponent = torch.frexp(amax)  # exact, where log2 rounds near powers of two
        exponents = (exponent - 1 - element.emax).float()
    elif rounding == "rceil":
        fraction, exponent = torch.frexp(amax.double() / element.max)
        exponents = (exponent - (fraction == 0.5).int()).float()  # a power of two stays
    else:
        raise ValueError(f"Unknown scale rounding {rounding!r}: 'floor' (the spec's) or 'rceil'.")
    # An all-zero block (log2(0) = -inf) and tiny ones get E8M0's smallest scale, 2^-127, as
    # Microsoft's MX emulation library (microxcaling) and torchao do.
    exponents = torch.where(amax > 0, exponents, E8M0_MIN_EXPONENT).clamp(min=E8M0_MIN_EXPONENT)
    return torch.where(torch.isfinite(amax), exponents, torch.nan)


def block_roundtrip(x: torch.Tensor, fmt, *, scale_rounding: str = "floor") -> torch.Tensor:
    """``x`` quantized to a block format along its last dimension and dequantized, as fp32.

    ``fmt``: ``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp4"`` or ``"nvfp4"`` (or a BlockFormat).
    The last dimension must be a multiple of the block size (32 for MX, 16 for NVFP4).
    ``scale_rounding`` (MX only): ``"floor"`` (the spec) or ``"rceil"``.
    """
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    blocks = split_blocks(x.float(), fmt.block_size, fmt.name)
    if fmt.scale == "e4m3":
        return nvfp4_blocks(blocks).reshape(x.shape)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    scale = torch.exp2(mx_scale_exponents(amax, fmt.element, scale_rounding))  # 2^-127 is exact
    return (round_to_element(blocks / scale, fmt.element) * scale).reshape(x.shape)


def nvfp4_tensor_scale(x: torch.Tensor) -> torch.Tensor:
    """NVFP4's fp32 scale per tensor: amax / (6 x 448), so that the largest block's scale lands on
    E4M3's largest value (1 for an all-zero tensor)."""
    amax = x.float().abs().amax()
    return torch.where(amax > 0, amax / (E2M1.max * E4M3.max), 1.0)


def nvfp4_blocks(blocks: torch.Tensor, round_elements=None) -> torch.Tensor:
    """Blocks (..., block) through NVFP4 and back: an E4M3 scale per block under one fp32 scale
    for them all. ``round_elements`` rounds the scaled values onto E2M1 (default: to nearest, ties
    to even, saturating; lesson 11's stochastic rounding passes its own)."""
    round_elements = round_elements or (lambda v: round_to_element(v, E2M1))
    tensor_scale = nvfp4_tensor_scale(blocks)
    block_scale = blocks.abs().amax(dim=-1, keepdim=True) / E2M1.max
    # The block's scale is stored in E4M3, relative to the tensor's (a cast, ties to even).
    stored = round_to_element(block_scale / tensor_scale, E4M3)
    scale = stored * tensor_scale
    # A block whose scale rounds to 0 (all zeros, or under E4M3's range) dequantizes to 0, and a
    # scale in E4M3's subnormal range is kept. torchao (nvfp4_tensor.py, E4M3_EPS) instead clamps
    # every block scale below E4M3's smallest normal number, 2^-6, up to it before the cast.
    safe = torch.where(scale > 0, scale, 1.0)
    elements = torch.where(scale > 0, round_elements(blocks / safe), 0.0)
    return elements * scale


def relative_error(x: torch.Tensor, y: torch.Tensor) -> float:
    """||x - y|| / ||x|| (0 for an all-zero x)."""
    norm = x.float().norm()
    return float((x.float() - y.float()).norm() / norm) if norm > 0 else 0.0


def row_errors(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Relative error of each row (rows of zeros count as 0)."""
    x, y = x.float().reshape(-1, x.shape[-1]), y.float().reshape(-1, x.shape[-1])
    norms = x.norm(dim=-1)
    return torch.where(norms > 0, (x - y).norm(dim=-1) / norms.clamp(min=AMAX_EPS), 0.0)


def flushed_share(x: torch.Tensor, y: torch.Tensor) -> float:
    """The share of ``x``'s non-zero values that ``y`` holds as zero."""
    nonzero = x != 0
    return float((nonzero & (y == 0)).sum() / nonzero.sum().clamp(min=1))
