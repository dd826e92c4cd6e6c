"""Reference fixes of the modern-stack labs (hidden from the grading sandbox)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...block_formats import AMAX_EPS
from ...labs.modern_stack import DEVICE_TYPE, digit_loss
from ...recipe import tf32_enabled


def class_means(features, labels, num_classes):
    """Reference: the sums accumulated in fp32, the features cast to the accumulator's dtype."""
    sums = torch.zeros(num_classes, features.shape[1], dtype=torch.float32)
    sums.index_add_(0, labels, features.to(sums.dtype))
    counts = torch.bincount(labels, minlength=num_classes)
    return sums / counts.clamp(min=1)[:, None]


def train_with_ema(model, optimizer, scheduler, ema, scaler, batches):
    """Reference: step the scheduler and update the EMA only when the optimizer stepped; the
    scaler lowers its scale exactly when it skips a step."""
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(digit_loss(model, images, labels)).backward()
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        if scaler.get_scale() >= scale:
            scheduler.step()
            ema.update_parameters(model)


class _MatMul(torch.autograd.Function):
    """Reference: the ctx-first forward that custom_fwd and custom_bwd are written for."""

    @staticmethod
    @torch.amp.custom_fwd(device_type=DEVICE_TYPE)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @torch.amp.custom_bwd(device_type=DEVICE_TYPE)
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)


def matmul(a, b):
    return _MatMul.apply(a, b)


def train_adam(model, batches, lr):
    """Reference: fp32 weights and Adam states, fp16 autocast and a GradScaler (lesson 00's
    recipe); the weights are cast to fp16 only for serving."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler(DEVICE_TYPE)
    for images, labels in batches:
        with torch.autocast(DEVICE_TYPE, dtype=torch.float16):
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return model


def to_float8(x, dtype=torch.float8_e4m3fn):
    """Reference: the amax floored at a tiny epsilon before the scale divides by it."""
    amax = x.abs().max().float().clamp(min=AMAX_EPS)
    scale = torch.finfo(dtype).max / amax
    top = torch.finfo(dtype).max
    return (x.float() * scale).clamp(-top, top).to(dtype), scale


SOLUTIONS = {
    "labs.compiled_dtype_mix": class_means,
    "labs.tf32_api_mix": tf32_enabled,  # read through the API every setter updates
    "labs.ema_skipped_steps": train_with_ema,
    "labs.setup_context_autocast": matmul,
    "labs.adam_fp16_eps": train_adam,
    "labs.fp8_zero_scale": to_float8,
}
