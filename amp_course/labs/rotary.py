"""Lab 4 of the more-failures labs: rotary position angles under bf16 autocast (Llama's inverse
frequencies, its rotation, the check's cases, and a run that records the learner's cos and sin).
``more_failures`` gives the notebook these under ``lab.``."""

from __future__ import annotations

import torch

from ..display import error_text
from .failure_cases import AUTOCAST_CASES, autocast, returned_tensors, seeded


def inverse_frequencies(dim: int, base: float = 10000.0) -> torch.Tensor:
    """RoPE's inverse frequencies, as Llama defines them: base ** (-2i / dim), in fp32."""
    return 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Llama's rotation of the two halves of the last dimension: (a, b) -> (-b, a)."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x, cos, sin):
    """Rotate ``x`` ([..., positions, dim]) by its positions' angles."""
    return x * cos + rotate_half(x) * sin


def rope_cases(seed: int = 0) -> dict:
    """{case: (autocast dtype, output dtype, dim, base, positions)}: the notebook's for seed 0.
    Other seeds give the cases Llama's two bases, 10000 and Llama 3's 500000, one of them drawn
    for the lab's case and the other for the fp32 case: an answer that builds its own inverse
    frequencies at base 10000, not the ones given, passed the seeds that drew 10000 for all.
    Their positions are two packed sequences, the second restarting at 0: an answer that counted
    on from the first position, not the ones given, passed while every case's were a range."""
    if seed == 0:  # positions from 100, as after a prompt: bf16 first merges two at 256 and 257
        dim, bases, start, count = 32, (10000.0, 10000.0), 100, 2048
        positions = torch.arange(start, start + count)
    else:
        generator = seeded(seed)
        dim = 16 * int(torch.randint(1, 5, (), generator=generator))
        bases = (10000.0, 500000.0)
        bases = bases[:: 1 - 2 * int(torch.randint(0, 2, (), generator=generator))]
        start = int(torch.randint(0, 30000, (), generator=generator))
        count = int(torch.randint(1024, 2049, (), generator=generator))
        first = int(torch.randint(count // 4, 3 * count // 4, (), generator=generator))
        positions = torch.cat((torch.arange(start, start + first), torch.arange(count - first)))
    base = {"bf16 autocast": bases[0], "fp16 autocast": bases[0], "fp32": bases[1]}
    return {  # the lab's case first
        case: (
            AUTOCAST_CASES[case],
            AUTOCAST_CASES[case] or torch.float32,
            dim,
            base[case],
            positions,
        )
        for case in ("bf16 autocast", "fp16 autocast", "fp32")
    }


def run_rope(fn, seed: int = 0) -> dict:
    """``fn(inv_freq, positions, dtype)`` in each case: the cos and sin it returns."""
    observed = {}
    for case, (autocast_dtype, dtype, dim, base, positions) in rope_cases(seed).items():
        try:
            with autocast(autocast_dtype):
                cos, sin = returned_tensors(
                    fn(inverse_frequencies(dim, base), positions.clone(), dtype), 2, "(cos, sin)"
                )
            observed[case] = {"error": None, "cos": cos.detach(), "sin": sin.detach()}
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            observed[case] = {"error": error_text(error)}
        observed[case]["positions"] = positions
    return observed
