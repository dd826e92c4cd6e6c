"""A CUDA GPU's forward on any machine: CUDA's autocast switched on where torch finds no GPU, and
attention sent to the fused kernel that GPU's SDPA picks. On fake tensors placed on a CUDA device
(``saved_tensor_bytes_without_data`` with a recipe on "cuda") a forward then keeps for backward what
it keeps on that GPU."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from .. import gpus, precisions

DEFAULT_GPU = "H100 SXM"  # the GPU counted for where none is present (a row of ac.gpus)

# The fused kernel torch's scaled_dot_product_attention takes on a GPU for each dtype of its
# inputs (without a mask) is that GPU's row of ``ac.gpus`` (``attention_picks``). What a kernel
# saves for backward differs: the memory-efficient kernel keeps a logsumexp padded to a multiple of
# 32 rows and lays its output out batch-first, which nn.MultiheadAttention copies before its
# output projection; cuDNN's keeps one logsumexp per row and an output laid out as its query (as
# the flash kernel does, within a few bytes). The committed H100 run of lesson 00 kept exactly what
# the H100's picks keep, and not what the memory-efficient kernel keeps in bf16. A dtype with no
# pick takes the math kernel.


def attention_kernels_of(gpu: str) -> dict[torch.dtype, str]:
    """The fused attention kernel ``gpu`` (a row of ``ac.gpus``) takes for each input dtype."""
    known = [name for name, row in gpus.GPUS.items() if row.attention_picks]
    if gpu not in known:
        raise ValueError(
            f"No attention kernels on file for GPU {gpu!r}. Valid: {', '.join(known)}."
        )
    return {
        precisions.get(name).dtype: kernel
        for name, kernel in gpus.GPUS[gpu].attention_picks.items()
    }


@contextlib.contextmanager
def cuda_autocast(precision: precisions.Precision) -> Iterator[None]:
    """CUDA's autocast in ``precision`` (a row of ``ac.precisions``; fp32 and tf32: off), where
    torch finds no GPU.

    ``torch.autocast("cuda")`` warns and switches itself off when no CUDA device is present. Fake
    CUDA tensors need none, so this sets the thread-local state that ``torch.autocast`` sets on
    entry and restores on exit; the casts themselves are CUDA's, made by torch's dispatcher.
    """
    if not precision.autocast:
        yield
        return
    was_enabled, was_dtype = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", precision.dtype)
    torch.autocast_increment_nesting()
    try:
        yield
    finally:
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()  # the cast weights it kept, as torch.autocast drops them
        torch.set_autocast_enabled("cuda", was_enabled)
        torch.set_autocast_dtype("cuda", was_dtype)


def _autocast_inputs(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The inputs as CUDA's autocast hands them to SDPA, which is on its lower-precision list: a
    floating-point input other than float64 is cast to the autocast dtype."""
    if not torch.is_autocast_enabled("cuda"):
        return tensors
    dtype = torch.get_autocast_dtype("cuda")
    eligible = (torch.float32, torch.float16, torch.bfloat16)
    return tuple(t.to(dtype) if t.dtype in eligible else t for t in tensors)


@contextlib.contextmanager
def attention_kernels(gpu: str = DEFAULT_GPU) -> Iterator[list[str]]:
    """``F.scaled_dot_product_attention`` sent to the fused kernel ``gpu`` takes for each dtype.

    On fake CUDA tensors SDPA picks the math kernel: its choice asks the CUDA device, and there is
    none. Inside this context ``F.scaled_dot_product_attention`` (which ``nn.MultiheadAttention``
    calls) runs the aten op of the kernel the GPU would pick, whose autograd node saves what that
    kernel saves. Yields the list of kernels that ran, one per call. A model that calls SDPA by
    another name (``torch._C._nn``, or an import of the function itself) is not redirected, and
    the swap holds for every thread while the context lasts.
    """
    kernels = attention_kernels_of(gpu)
    math = F.scaled_dot_product_attention
    ran: list[str] = []

    def sdpa(
        query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs
    ):
        query, key, value = _autocast_inputs(query, key, value)
        kernel = kernels.get(query.dtype, "math")
        ran.append(kernel)
        if kernel == "math":
            return math(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, **kwargs)
        if attn_mask is not None or kwargs.get("enable_gqa"):
            raise ValueError(
                f"counting {gpu}'s {kernel} attention kernel covers attention without a mask or "
                "grouped-query heads"
            )
        # As SDPA does: the logsumexp, which the backward needs, only when a gradient is wanted.
        logsumexp = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
        args = (query, key, value, None, logsumexp, dropout_p, is_causal)
        if kernel == "efficient":
            return torch.ops.aten._scaled_dot_product_efficient_attention(*args, scale=scale)[0]
        return torch.ops.aten._scaled_dot_product_cudnn_attention(*args, False, scale=scale)[0]

    F.scaled_dot_product_attention = sdpa  # multi_head_attention_forward looks it up at each call
    try:
        yield ran
    finally:
        F.scaled_dot_product_attention = math


@contextlib.contextmanager
def cuda_rules(gpu: str, precision: precisions.Precision) -> Iterator[list[str]]:
    """CUDA's autocast in ``precision`` and ``gpu``'s attention kernels, with no GPU present;
    yields the kernels attention ran."""
    with cuda_autocast(precision), attention_kernels(gpu) as ran:
        yield ran
