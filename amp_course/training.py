"""Training: the AMP train step and epoch the lessons share (autocast, GradScaler, clipping,
accumulation)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from .device import use_grad_scaler


def autocast(device: torch.device | str, autocast_dtype: torch.dtype | None):
    """``torch.autocast`` for ``device``; None or float32 gives a disabled context (plain fp32)."""
    device = torch.device(device)
    enabled = autocast_dtype is not None and autocast_dtype != torch.float32
    return torch.autocast(
        device_type=device.type, dtype=autocast_dtype if enabled else None, enabled=enabled
    )


def make_scaler(device: torch.device | str, autocast_dtype: torch.dtype | None, **kwargs):
    """A GradScaler that is enabled only for fp16; elsewhere every call on it is a no-op."""
    device = torch.device(device)
    enabled = autocast_dtype is not None and use_grad_scaler(autocast_dtype)
    return torch.amp.GradScaler(device.type, enabled=enabled, **kwargs)


def step_and_update(scaler, optimizer) -> bool:
    """``scaler.step(optimizer)`` then ``scaler.update()``; returns True when the step was skipped.

    A GradScaler skips ``optimizer.step()`` exactly when it found inf/NaN gradients, and then
    its ``update()`` lowers the scale (by ``backoff_factor``); otherwise the scale stays or grows.
    So a lower scale after ``update()`` means a skipped step. A disabled scaler never skips.
    """
    scale_before = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    return scaler.get_scale() < scale_before


@dataclass
class EpochResult:
    """What one pass over the data produced."""

    losses: list[float] = field(default_factory=list)  # one per batch, unscaled
    optimizer_steps: int = 0
    skipped_steps: int = 0  # steps the scaler skipped because of inf/NaN gradients
    grad_norms: list[float] = field(default_factory=list)  # after unscale_, when clipping
    seconds: float = 0.0


def train_epoch(
    model,
    loader,
    optimizer,
    loss_fn,
    *,
    device,
    autocast_dtype=None,
    scaler=None,
    max_grad_norm: float | None = None,
    accumulation_steps: int = 1,
    max_batches: int | None = None,
    progress: bool = True,
    desc: str = "train",
):
    """One epoch of the AMP recipe; returns an EpochResult.

    scaler: a ``torch.amp.GradScaler`` (use ``make_scaler``); None means a disabled one, so the
    same code runs fp32, bf16 and fp16. Clipping happens after ``scaler.unscale_`` so the
    threshold applies to true gradients. With ``accumulation_steps`` > 1 the optimizer steps
    (and the scaler updates) once per group of that many batches, and each loss is divided by
    the number of batches in its group, so a step gets the mean gradient of its group: with
    equal-size batches, exactly one large batch's. The last group may be shorter (the epoch's
    batch count need not be a multiple); it is divided by its own length, not by
    ``accumulation_steps``, so its step is not made smaller.
    """
    device = torch.device(device)
    if accumulation_steps < 1:
        raise ValueError(f"accumulation_steps must be >= 1, got {accumulation_steps}.")
    if scaler is None:
        scaler = make_scaler(device, None)
    result = EpochResult()
    model.train()
    optimizer.zero_grad(set_to_none=True)
    total = len(loader) if max_batches is None else min(len(loader), max_batches)
    bar = tqdm(total=total, desc=desc, disable=not progress, leave=False)
    start = time.perf_counter()
    for index, (inputs, targets) in enumerate(loader):
        if index >= total:
            break
        inputs, targets = inputs.to(device), targets.to(device)
        group_start = index - index % accumulation_steps
        group_size = min(accumulation_steps, total - group_start)
        with autocast(device, autocast_dtype):
            loss = loss_fn(model(inputs), targets)
        scaler.scale(loss / group_size).backward()
        result.losses.append(loss.item())
        if (index + 1) % accumulation_steps == 0 or index + 1 == total:
            if max_grad_norm is not None:
                scaler.unscale_(optimizer)
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
                result.grad_norms.append(norm.item())
            if step_and_update(scaler, optimizer):
                result.skipped_steps += 1
            result.optimizer_steps += 1
            optimizer.zero_grad(set_to_none=True)
        bar.update(1)
        bar.set_postfix(loss=f"{result.losses[-1]:.4f}")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    result.seconds = time.perf_counter() - start
    bar.close()
    return result


@torch.no_grad()
def evaluate(model, loader, *, device, autocast_dtype=None, loss_fn=None):
    """Mean loss and accuracy over ``loader``, under autocast and without gradients or a scaler."""
    device = torch.device(device)
    loss_fn = loss_fn or torch.nn.functional.cross_entropy
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        with autocast(device, autocast_dtype):
            logits = model(inputs)
            loss = loss_fn(logits, targets)
        total_loss += loss.item() * len(targets)
        correct += (logits.argmax(dim=1) == targets).sum().item()
        count += len(targets)
    model.train()
    return total_loss / max(count, 1), correct / max(count, 1)
