"""Reference fixes of the bug-hunt labs."""

from __future__ import annotations

import torch

from ...labs.bug_hunts import LR, SCALER_KWARGS, forward_loss, train_steps
from ...recipe import AmpRecipe
from ...training import step_and_update


def make_scaler(device, autocast_dtype):
    """Reference: a real GradScaler, enabled only for fp16 autocast (the course's recipe)."""
    return AmpRecipe(device, autocast_dtype).scaler()


def train_clipped(model, optimizer, scaler, batches, max_norm):
    """Reference: clip the true gradients, i.e. after unscale_."""
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(forward_loss(model, images, labels)).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()


def train_accumulated(model, optimizer, scaler, batches, accumulation_steps, max_norm):
    """Reference: each group's losses divided by the group's own length (the last may be
    shorter); unscale_, clip, step and update once per group."""
    for start in range(0, len(batches), accumulation_steps):
        group = batches[start : start + accumulation_steps]
        optimizer.zero_grad(set_to_none=True)
        for images, labels in group:
            scaler.scale(forward_loss(model, images, labels) / len(group)).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()


def train_scheduled(model, optimizer, scheduler, scaler, batches):
    """Reference: step the scheduler only when the optimizer really stepped."""
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(forward_loss(model, images, labels)).backward()
        if not step_and_update(scaler, optimizer):  # the optimizer really stepped
            scheduler.step()


def save_checkpoint(model, optimizer, scaler):
    """Reference: all a run needs to continue exactly: weights, optimizer and scaler state."""
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
    }


def prepare(model, device):
    """Reference: fp32 weights on ``device``, an optimizer over them, an enabled fp16 GradScaler."""
    device = torch.device(device)
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    return model, optimizer, torch.amp.GradScaler(device.type, **SCALER_KWARGS)


def train_plain(model, optimizer, scaler, batches):
    """Reference: scaler.step replaces optimizer.step; one update() per step."""
    train_steps(model, optimizer, scaler, batches)


SOLUTIONS = {
    "labs.clip_after_unscale": train_clipped,
    "labs.accumulation": train_accumulated,
    "labs.bf16_scaler": make_scaler,
    "labs.scheduler_skip": train_scheduled,
    "labs.resume": save_checkpoint,
    "labs.half_model": prepare,
    "labs.extra_step": train_plain,
}
