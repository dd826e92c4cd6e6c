"""What NVFP4 *training* adds to the NVFP4 format, computed on any CPU (lesson 11).

The recipe of NVIDIA's paper "Pretraining Large Language Models with NVFP4" (arXiv 2509.25149), as
Transformer Engine documents it (its NVFP4 page): weights quantized with one scale per 16x16 tile,
so that a weight and its transpose hold the same numbers; a 16-point random Hadamard transform
(RHT) on the two inputs of the weight-gradient GEMM; stochastic rounding for gradients only; and a
few layers kept in bf16. Everything here dequantizes to fp32: it computes what the formats keep,
not how fast a Blackwell GPU runs them.
"""

from __future__ import annotations

import torch

from . import block_formats as bf

BLOCK = 16  # NVFP4's block: 16 values share an E4M3 scale; also the RHT's size


def stochastic_round_to_grid(
    x: torch.Tensor, exponent_bits: int, mantissa_bits: int, generator=None
) -> torch.Tensor:
    """``x`` rounded to one of the two neighbouring numbers of a layout, the upper one with a
    probability equal to the distance from the lower one (in steps): unbiased on average.

    Like ``block_formats.round_to_grid``: subnormals included, no upper limit (the caller clamps).
    """
    x = x.float()
    magnitude = x.abs()
    step = bf.grid_step(magnitude, exponent_bits, mantissa_bits)
    lower = torch.floor(magnitude / step) * step  # exact: step is a power of two
    up = torch.rand(x.shape, generator=generator) < (magnitude - lower) / step
    return torch.copysign(lower + up * step, x)


def _round_e2m1(stochastic: bool, generator):
    """Rounds scaled values onto E2M1, saturating at 6: to nearest, or stochastically."""
    if not stochastic:
        return lambda v: bf.round_to_element(v, bf.E2M1)
    element = bf.E2M1
    return lambda v: stochastic_round_to_grid(
        v.clamp(-element.max, element.max), element.exponent_bits, element.mantissa_bits, generator
    )


def nvfp4_roundtrip(
    x: torch.Tensor, tile=(1, BLOCK), *, stochastic: bool = False, generator=None
) -> torch.Tensor:
    """A 2-D tensor through NVFP4 and back (fp32): one E4M3 scale per ``tile`` of (rows, columns)
    under one fp32 scale per tensor. ``(1, 16)``: the format's 1-D blocks along a row (what
    ``block_formats.block_roundtrip(x, "nvfp4")`` computes); ``(16, 16)``: the recipe's weight
    tiles. ``stochastic`` rounds the elements stochastically (the recipe's rule for gradients)."""
    rows, cols = tile
    if x.dim() != 2 or x.shape[0] % rows or x.shape[1] % cols:
        raise ValueError(
            f"NVFP4 tiles of {rows}x{cols} need a 2-D tensor whose sides are multiples of them; "
            f"this one is {tuple(x.shape)}."
        )
    r, c = x.shape[0] // rows, x.shape[1] // cols
    tiles = x.float().reshape(r, rows, c, cols).permute(0, 2, 1, 3).reshape(r, c, rows * cols)
    back = bf.nvfp4_blocks(tiles, _round_e2m1(stochastic, generator))
    return back.reshape(r, c, rows, cols).permute(0, 2, 1, 3).reshape(x.shape)


def transpose_mismatch(weight: torch.Tensor, tile) -> float:
    """The share of a weight's values that differ between its forward copy (quantized along its
    rows) and its backward copy (the transpose quantized along its rows, transposed back)."""
    forward = nvfp4_roundtrip(weight, tile)
    backward = nvfp4_roundtrip(weight.t().contiguous(), tile).t()
    return float((forward != backward).float().mean())


def hadamard(size: int = BLOCK) -> torch.Tensor:
    """The orthonormal Hadamard matrix of a power-of-two size (Sylvester's construction)."""
    if size < 1 or size & (size - 1):
        raise ValueError(f"A Sylvester Hadamard matrix has a power-of-two size, not {size}.")
    h = torch.ones(1, 1)
    while h.shape[0] < size:
        h = torch.cat([torch.cat([h, h], dim=1), torch.cat([h, -h], dim=1)])
    return h / size**0.5


def random_signs(size: int = BLOCK, generator=None) -> torch.Tensor:
    """A random vector of +1 and -1: the 'random' of the random Hadamard transform."""
    return torch.randint(0, 2, (size,), generator=generator).float() * 2 - 1


def rht(x: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
    """``x`` rotated in tiles of ``len(signs)`` along its last dimension by ``diag(signs) @ H``.
    The rotation is orthogonal: applied to both inputs of a GEMM along the dimension it reduces,
    it leaves the product unchanged (in exact arithmetic)."""
    size = len(signs)
    rotation = signs[:, None] * hadamard(size)
    tiles = bf.split_blocks(x.float(), size, "the random Hadamard transform")
    return (tiles @ rotation).reshape(x.shape)


def crest_factors(x: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """Each block's amax over its root mean square, along the last dimension (all-zero blocks
    left out): 1 for a flat block, up to sqrt(block) for a block holding one value."""
    blocks = bf.split_blocks(x.float(), block, f"blocks of {block}")
    rms = blocks.pow(2).mean(dim=-1).sqrt()
    amax = blocks.abs().amax(dim=-1)
    return (amax / rms)[rms > 0]


def wgrad(
    grad_output: torch.Tensor,
    inputs: torch.Tensor,
    *,
    signs: torch.Tensor | None = None,
    stochastic: bool = False,
    generator=None,
) -> torch.Tensor:
    """The weight gradient ``grad_output.T @ inputs`` of a linear layer (tokens in rows) from
    NVFP4 operands quantized along the tokens, the dimension this GEMM reduces: with the RHT on
    both when ``signs`` are given; the gradient rounded stochastically when ``stochastic``."""
    dy_t, x_t = grad_output.float().t().contiguous(), inputs.float().t().contiguous()
    if signs is not None:
        dy_t, x_t = rht(dy_t, signs), rht(x_t, signs)
    dy_q = nvfp4_roundtrip(dy_t, stochastic=stochastic, generator=generator)
    return dy_q @ nvfp4_roundtrip(x_t).t()


def gemm_flops(model: torch.nn.Module, example: torch.Tensor) -> dict[str, dict[str, int]]:
    """FLOPs of one training step (forward and backward) by module, counted on the meta device by
    ``torch.utils.flop_counter``: ``{module name: {"linear": mm/addmm FLOPs, "attention": bmm
    FLOPs, "other": the rest}}`` for every module that runs its own GEMMs. ``model`` is moved to
    the meta device (build it there, ``with torch.device("meta")``, to allocate no weights)."""
    from torch.utils.flop_counter import FlopCounterMode

    kinds = {"mm": "linear", "addmm": "linear", "bmm": "attention"}
    model, example = model.to("meta"), example.to("meta")
    with FlopCounterMode(display=False) as counter:
        model(example).float().sum().backward()
    counts = {}
    for name, ops in counter.get_flop_counts().items():
        own = {"linear": 0, "attention": 0, "other": 0}
        for op, flops in ops.items():
            own[kinds.get(op.__name__, "other")] += flops
        counts[name] = own
    return counts


def mixed_peak(flops: dict[str, float], peaks: dict[str, float]) -> float:
    """The one peak a step whose FLOPs run at several peaks could reach: its FLOPs over the time
    each share takes at its own peak (FLOP/s). ``flops`` and ``peaks`` are keyed by precision."""
    missing = set(flops) - set(peaks)
    if missing:
        raise ValueError(f"No peak given for {', '.join(sorted(missing))}.")
    return sum(flops.values()) / sum(f / peaks[p] for p, f in flops.items() if f)
