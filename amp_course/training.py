"""Training: the AMP step and epoch the course's helpers share (autocast, GradScaler, clipping,
accumulation), all asking one ``ac.recipe.AmpRecipe``."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.nn.functional as F

from . import display
from .recipe import AmpRecipe


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


class StepResult(NamedTuple):
    """What one AMP step did."""

    loss: torch.Tensor  # the unscaled loss, detached (on the device: ``.item()`` reads it)
    skipped: bool | None  # the scaler skipped optimizer.step() (None: not checked)
    grad_norm: torch.Tensor | None  # the true gradient norm before clipping (when clipping)


def amp_step(
    model,
    optimizer,
    scaler,
    recipe: AmpRecipe,
    batch,
    *,
    loss_fn=F.cross_entropy,
    max_grad_norm: float | None = None,
    check_skipped: bool = True,
) -> StepResult:
    """One AMP training step on ``batch`` (inputs, targets), already on the device.

    The same code for one process, DDP and FSDP, and for fp32, bf16 and fp16 (``scaler`` from
    ``recipe.scaler()``): forward and loss under the recipe's autocast, backward of the scaled
    loss, unscale and clip (with ``max_grad_norm``), ``scaler.step`` and ``scaler.update``, then
    the gradients set to None, so the next step starts from none. The scaler is the caller's: its
    scale carries over from step to step. ``check_skipped=False`` leaves the scale unread: reading
    it waits for the GPU, which a timed step should not do.
    """
    loss = scaled_backward(model, recipe, scaler, batch, loss_fn)
    skipped, grad_norm = optimizer_step(
        model, optimizer, scaler, max_grad_norm=max_grad_norm, check_skipped=check_skipped
    )
    optimizer.zero_grad(set_to_none=True)
    return StepResult(loss.detach(), skipped, grad_norm)


def scaled_backward(
    model, recipe: AmpRecipe, scaler, batch, loss_fn=F.cross_entropy, *, divide_by: int = 1
):
    """The forward pass and loss under the recipe's autocast, then backward of the scaled loss.

    Returns the loss. With ``divide_by`` > 1 the backward runs on ``loss / divide_by`` (one of
    that many micro-batches of an accumulated step), so the gradients add up to their mean.
    """
    inputs, targets = batch
    with recipe.autocast():
        loss = loss_fn(model(inputs), targets)
    # Under DDP and FSDP this backward also averages the (still scaled) gradients across ranks.
    scaler.scale(loss if divide_by == 1 else loss / divide_by).backward()
    return loss


def optimizer_step(
    model, optimizer, scaler, *, max_grad_norm: float | None = None, check_skipped: bool = True
) -> tuple[bool | None, torch.Tensor | None]:
    """Unscale and clip (with ``max_grad_norm``), then step the optimizer through the scaler.

    Returns (skipped, gradient norm before clipping); skipped is None with ``check_skipped=False``.
    Clipping comes after ``scaler.unscale_`` so the threshold applies to the true gradients.
    """
    grad_norm = None
    if max_grad_norm is not None:
        scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    if check_skipped:
        return step_and_update(scaler, optimizer), grad_norm
    scaler.step(optimizer)
    scaler.update()
    return None, grad_norm


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
    recipe: AmpRecipe,
    scaler=None,
    max_grad_norm: float | None = None,
    accumulation_steps: int = 1,
    max_batches: int | None = None,
    progress: bool = True,
    desc: str = "train",
):
    """One epoch of the AMP recipe; returns an EpochResult.

    ``recipe`` (an ``AmpRecipe``: the lesson's ``settings.recipe``) gives the device and the
    precision. scaler: a ``torch.amp.GradScaler`` (the recipe's ``scaler()``); None means a
    disabled one, so the same code runs fp32, bf16 and fp16. Clipping happens after
    ``scaler.unscale_`` so the threshold applies to true gradients. With ``accumulation_steps``
    > 1 the optimizer steps (and the scaler updates) once per group of that many batches, and
    each loss is divided by the number of batches in its group, so a step gets the mean gradient
    of its group: with equal-size batches, exactly one large batch's. The last group may be
    shorter (the epoch's batch count need not be a multiple); it is divided by its own length,
    not by ``accumulation_steps``, so its step is not made smaller.
    """
    device = recipe.device
    if accumulation_steps < 1:
        raise ValueError(f"accumulation_steps must be >= 1, got {accumulation_steps}.")
    if scaler is None:
        scaler = AmpRecipe(device).scaler()  # fp32's: disabled
    result = EpochResult()
    model.train()
    optimizer.zero_grad(set_to_none=True)
    total = len(loader) if max_batches is None else min(len(loader), max_batches)
    bar = display.progress(total=total, desc=desc, disable=not progress, leave=False)
    start = time.perf_counter()
    for index, (inputs, targets) in enumerate(loader):
        if index >= total:
            break
        batch = (inputs.to(device), targets.to(device))
        group_start = index - index % accumulation_steps
        group_size = min(accumulation_steps, total - group_start)
        loss = scaled_backward(model, recipe, scaler, batch, loss_fn, divide_by=group_size)
        result.losses.append(loss.item())
        if (index + 1) % accumulation_steps == 0 or index + 1 == total:
            skipped, norm = optimizer_step(model, optimizer, scaler, max_grad_norm=max_grad_norm)
            if norm is not None:
                result.grad_norms.append(norm.item())
            result.skipped_steps += skipped
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
def evaluate(model, loader, *, recipe: AmpRecipe, loss_fn=None):
    """Mean loss and accuracy over ``loader`` on ``recipe``'s device, under its autocast and
    without gradients or a scaler."""
    loss_fn = loss_fn or F.cross_entropy
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(recipe.device), targets.to(recipe.device)
        with recipe.autocast():
            logits = model(inputs)
            loss = loss_fn(logits, targets)
        total_loss += loss.item() * len(targets)
        correct += (logits.argmax(dim=1) == targets).sum().item()
        count += len(targets)
    model.train()
    return total_loss / max(count, 1), correct / max(count, 1)
