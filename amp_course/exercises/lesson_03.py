"""Lesson 03 exercises: the dynamic loss-scale update rule, checked against a real GradScaler."""

from __future__ import annotations

import torch

from . import ExerciseFailed, exercise


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


def _torch_update(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
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


_CASES = [  # (scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval, what)
    (65536.0, 0, False, 2.0, 0.5, 2000, "a clean step"),
    (65536.0, 5, True, 2.0, 0.5, 2000, "an overflow"),
    (1024.0, 1999, False, 2.0, 0.5, 2000, "the clean step that completes growth_interval"),
    (1024.0, 1998, False, 2.0, 0.5, 2000, "one clean step short of growth_interval"),
    (8.0, 3, False, 4.0, 0.25, 4, "growth with growth_factor=4"),
    (8.0, 3, True, 4.0, 0.25, 4, "an overflow with backoff_factor=0.25"),
    (2.0**20, 0, False, 2.0, 0.5, 1, "growth_interval=1 (grow after every clean step)"),
]


@exercise("03.update_scale", solution=update_scale)
def check_update_scale(fn):
    for scale, good, found, growth, backoff, interval, what in _CASES:
        expected = _torch_update(scale, good, found, growth, backoff, interval)
        got = fn(
            scale,
            good,
            found,
            growth_factor=growth,
            backoff_factor=backoff,
            growth_interval=interval,
        )
        if not isinstance(got, tuple) or len(got) != 2:
            raise ExerciseFailed(
                f"update_scale should return a pair (scale, good_steps); got {got!r}."
            )
        if float(got[0]) != expected[0] or int(got[1]) != expected[1]:
            raise ExerciseFailed(
                f"For {what} (scale={scale:g}, good_steps={good}, found_inf={found}, "
                f"growth_interval={interval}) GradScaler gives scale={expected[0]:g}, "
                f"good_steps={expected[1]}; yours gives scale={float(got[0]):g}, "
                f"good_steps={int(got[1])}."
            )
