"""Reference for lesson 04's accumulated, clipped step."""

from __future__ import annotations

import torch

from ...labs.bug_hunts import forward_loss


def accumulate_and_clip(model, optimizer, scaler, micro_batches, max_norm):
    """Reference: each micro-batch's mean loss weighted by its share of the examples (so the
    step equals one on the whole batch), scaled backward; one unscale_, clip, step, update."""
    optimizer.zero_grad(set_to_none=True)
    total = sum(len(labels) for _, labels in micro_batches)
    for images, labels in micro_batches:
        share = len(labels) / total
        scaler.scale(forward_loss(model, images, labels) * share).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return norm


SOLUTIONS = {"04.accumulate_and_clip": accumulate_and_clip}
