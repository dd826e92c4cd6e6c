"""Reference solutions of lesson 00's exercises (hidden from the grading sandbox)."""

from __future__ import annotations

from ...memory import gpus_needed, training_memory
from ..lesson_00 import GIB, USABLE


def gpus_for(num_params, activation_bytes_per_image, global_batch, gpu_gib, amp):
    """Reference: fewest data-parallel GPUs for the step, or None if one image per GPU cannot fit.

    Every GPU holds the whole static state: fp32 weights (4 bytes per parameter), their
    gradients (4) and AdamW's two moments (8), plus, under AMP, autocast's 2-byte weight copies.
    The activations are split: each GPU holds those of its share of the global batch.
    """
    static = (16 + (2 if amp else 0)) * num_params
    return gpus_needed(static, activation_bytes_per_image, global_batch, gpu_gib * GIB, USABLE)


def largest_batch(num_params, activation_bytes_per_image, gpu_gib, optimizer, amp):
    """Reference: the most images one GPU holds per step, 0 when not even one fits.

    The GPU holds the fp32 weights, their fp32 gradients and the optimizer's fp32 state (AdamW
    two moments, SGD with momentum one buffer, plain SGD none), under AMP autocast's 2-byte
    weight copies, and the activations of every image, within 90% of its memory.
    """
    copies = 2 * num_params if amp else 0
    static = training_memory(num_params, 0, optimizer, weight_copy_bytes=copies).total
    room = USABLE * gpu_gib * GIB - static
    return max(0, int(room // activation_bytes_per_image))


SOLUTIONS = {"00.gpus_for": gpus_for, "00.largest_batch": largest_batch}
