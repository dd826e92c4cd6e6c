"""Reference fixes of the more-failures labs (hidden from the grading sandbox)."""

from __future__ import annotations

import torch

from ...labs.more_failures import DEVICE_TYPE, multitask_loss


def train_multitask(model, optimizers, scaler, batches):
    """Reference: step through the scaler only the optimizers whose parameters got a gradient."""
    for images, labels, has_aux in batches:
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        scaler.scale(multitask_loss(model, images, labels, has_aux)).backward()
        for optimizer in optimizers:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            if any(p.grad is not None for p in params):
                scaler.step(optimizer)
        scaler.update()


def masked_attention(q, k, v, keep):
    """Reference: fill with the lowest value the scores' own dtype holds."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return scores.softmax(-1) @ v


def padded_attention(q, k, v, keep):
    """Reference: finite fill values, and zero weights for a query with no key, as torch 2.14's
    CPU kernels of F.scaled_dot_product_attention give (written out: what SDPA gives depends on
    the backend and the version, and some give NaN)."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return (scores.softmax(-1) * keep.any(-1, keepdim=True)) @ v


def rope_cos_sin(inv_freq, positions, dtype):
    """Reference: the angles in fp32 with autocast off, rounded to ``dtype`` only as cos and sin."""
    with torch.autocast(DEVICE_TYPE, enabled=False):
        freqs = (inv_freq[:, None].float() @ positions[None, :].float()).T
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)


SOLUTIONS = {
    "labs.no_inf_checks": train_multitask,
    "labs.masked_fill_fp16": masked_attention,
    "labs.fully_masked_rows": padded_attention,
    "labs.rope_bf16": rope_cos_sin,
}
