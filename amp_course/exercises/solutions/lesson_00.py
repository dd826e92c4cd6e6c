"""Reference solution of lesson 00's exercise (hidden from the grading sandbox)."""

from __future__ import annotations

from ...memory import gpus_needed

GIB = 2**30
USABLE = 0.9  # the lesson keeps 10% of every GPU for the allocator and workspace


def gpus_for(num_params, activation_bytes_per_image, global_batch, gpu_gib, amp):
    """Reference: fewest data-parallel GPUs for the step, or None if one image per GPU cannot fit.

    Every GPU holds the whole static state: fp32 weights (4 bytes per parameter), their
    gradients (4) and AdamW's two moments (8), plus, under AMP, autocast's 2-byte weight copies.
    The activations are split: each GPU holds those of its share of the global batch.
    """
    static = (16 + (2 if amp else 0)) * num_params
    return gpus_needed(static, activation_bytes_per_image, global_batch, gpu_gib * GIB, USABLE)


SOLUTIONS = {"00.gpus_for": gpus_for}
