"""Reference for lesson 03's loss-scale update (tests check it against torch.amp.GradScaler)."""

from __future__ import annotations

import torch


def update_scale(
    scale, good_steps, found_inf, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000
):
    """Reference: one GradScaler.update() as (new_scale, new_good_steps)."""
    if found_inf:
        return scale * backoff_factor, 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * growth_factor, 0
    return scale, good_steps


def torch_update(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
    """What torch.amp.GradScaler.update() does: a real scaler, put in the given state, one step."""
    scaler = torch.amp.GradScaler(
        "cpu",
        growth_factor=growth_factor,
        backoff_factor=backoff_factor,
        growth_interval=growth_interval,
    )
    state = scaler.state_dict()
    state.update(scale=scale, _growth_tracker=good_steps)
    scaler.load_state_dict(state)
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=0.0)
    scaler.scale(weight.sum()).backward()
    if found_inf:
        weight.grad.fill_(float("inf"))
    scaler.step(optimizer)
    scaler.update()
    return scaler.get_scale(), int(scaler.state_dict()["_growth_tracker"])


SOLUTIONS = {"03.update_scale": update_scale}
