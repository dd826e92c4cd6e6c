"""Memory over one training step, by what holds it: parameters, optimizer state, gradients,
activations saved for backward, and temporaries.

On a CUDA GPU ``record_cuda_step`` reads the caching allocator's own history
(``torch.cuda.memory._record_memory_history`` and ``_snapshot``): every block allocated and freed
during the step, in order. Small marker blocks allocated between the phases (forward, backward,
optimizer step, zero_grad) locate the phase boundaries in that history, and the addresses of the
gradients and optimizer state, read from the tensors themselves, name their blocks; a block the
forward allocates and still holds when the backward starts is an activation. ``account_timeline``
tells the same story on any device from the account of ``ac.memory`` (counted, not measured).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..device_index import cuda_index

CATEGORIES = ("parameters", "optimizer state", "gradients", "activations", "temporaries", "other")
PHASES = ("forward done", "backward done", "optimizer step done", "gradients freed")
COLOURS = {
    "parameters": "tab:blue",
    "optimizer state": "tab:green",
    "gradients": "tab:red",
    "activations": "tab:orange",
    "weight copies": "tab:purple",
    "temporaries": "tab:gray",
    "other": "tab:olive",
}


@dataclass
class MemoryTimeline:
    """Bytes per category at each point ``x`` of one step; ``phases`` marks where each ends."""

    x: list[float]
    bytes: dict[str, list[int]]
    phases: dict[str, float]
    source: str
    x_label: str
    step: str | None = "post"  # how to draw between points: held ("post"), or None (a ramp)

    def totals(self) -> list[int]:
        return [sum(values) for values in zip(*self.bytes.values(), strict=True)]

    def peak(self) -> tuple[int, dict[str, int]]:
        """The largest total, and what held it then."""
        totals = self.totals()
        at = max(range(len(totals)), key=totals.__getitem__)
        return totals[at], {name: values[at] for name, values in self.bytes.items()}


def account_timeline(
    parameter_bytes: int,
    optimizer_state_bytes: int,
    activation_bytes: int,
    gradient_bytes: int,
    weight_copy_bytes: int = 0,
) -> MemoryTimeline:
    """The step's memory at its phase boundaries from an account (any device, nothing measured).

    In a warmed-up step with ``zero_grad(set_to_none=True)``: the forward adds the activations
    (and autocast's 16-bit weight copies, saved for backward with them), the backward frees them
    as it creates the gradients, the optimizer updates in place, and zero_grad frees the
    gradients. Temporaries (workspaces, intermediate results) are not counted.
    """
    points = {
        "parameters": [parameter_bytes] * 5,
        "optimizer state": [optimizer_state_bytes] * 5,
        "gradients": [0, 0, gradient_bytes, gradient_bytes, 0],
        "activations": [0, activation_bytes, 0, 0, 0],
    }
    if weight_copy_bytes:
        points["weight copies"] = [0, weight_copy_bytes, 0, 0, 0]
    return MemoryTimeline(
        x=[0, 1, 2, 3, 4],
        bytes=points,
        phases={name: index + 1 for index, name in enumerate(PHASES)},
        source="an account (counted, not measured; temporaries not included)",
        x_label="phase of the step (drawn as ramps between the counted states)",
        step=None,
    )


def _frees(events: list[dict]) -> dict[int, int]:
    """For each alloc event's index, the index of the event that freed its block."""
    open_blocks: dict[int, int] = {}
    freed: dict[int, int] = {}
    for index, event in enumerate(events):
        action, address = event.get("action"), event.get("addr")
        if action == "alloc":
            open_blocks[address] = index
        elif action in ("free_requested", "free_completed") and address in open_blocks:
            freed[open_blocks.pop(address)] = index
    return freed


def timeline_from_trace(
    events: list[dict],
    marker_addresses: list[int],
    held: dict[str, int],
    gradient_addresses: set[int],
    state_addresses: set[int],
) -> MemoryTimeline:
    """Classify the blocks of an allocator history (``_snapshot()["device_traces"][i]``).

    ``marker_addresses``: the blocks allocated at the start and after each phase, in order (they
    live to the end). ``held``: bytes allocated before the history starts, by category.
    """
    import numpy as np

    allocs = [i for i, e in enumerate(events) if e.get("action") == "alloc"]
    last_alloc = {events[i]["addr"]: i for i in allocs}
    marks = [last_alloc[address] for address in marker_addresses]
    start, forward, backward, optimizer = marks[0], marks[1], marks[2], marks[3]
    freed = _frees(events)
    size = len(events)
    deltas = {name: np.zeros(size + 1) for name in CATEGORIES}
    marker_set = set(marks)
    for index in allocs:
        if index in marker_set or index < start:
            continue
        event, end = events[index], freed.get(index, size)
        address = event["addr"]
        if address in gradient_addresses and forward < index < backward < end:
            category = "gradients"
        elif address in state_addresses and backward < index < optimizer < end:
            category = "optimizer state"
        elif index < forward < end:
            category = "activations"
        else:
            category = "temporaries"
        deltas[category][index] += event["size"]
        deltas[category][end] -= event["size"]
    series = {
        name: (np.cumsum(deltas[name])[:size] + held.get(name, 0)).astype(int).tolist()
        for name in CATEGORIES
    }
    return MemoryTimeline(
        x=list(range(size)),
        bytes={name: values for name, values in series.items() if any(values)},
        phases=dict(zip(PHASES, [float(m) for m in marks[1:]], strict=True)),
        source="the CUDA caching allocator's history (_record_memory_history)",
        x_label="allocator event",
    )


def _storage_addresses(tensors) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors}


def record_cuda_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    forward: Callable[[], torch.Tensor],
    device,
    scaler=None,
) -> MemoryTimeline:
    """Record one training step's CUDA memory: ``forward()`` returns the loss; then backward,
    the optimizer step (through ``scaler`` when given) and ``zero_grad(set_to_none=True)``.

    Run a step first, so the optimizer's state exists (as in every step after the first).
    """
    device = torch.device(device)
    gc.collect()
    torch.cuda.synchronize(device)
    parameters = list(model.parameters())
    state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
    state = [t for t in state if t.is_cuda]
    held = {
        "parameters": sum(p.numel() * p.element_size() for p in parameters if p.is_cuda),
        "optimizer state": sum(t.numel() * t.element_size() for t in state),
    }
    held["other"] = max(0, torch.cuda.memory_allocated(cuda_index(device)) - sum(held.values()))
    markers = []

    def mark():
        markers.append(torch.empty(1, device=device))

    # The history of allocations and frees, without stack traces (context=None): only the order.
    torch.cuda.memory._record_memory_history(context=None, max_entries=1_000_000)
    try:
        mark()
        loss = forward()
        mark()
        (scaler.scale(loss) if scaler else loss).backward()
        gradients = _storage_addresses(p.grad for p in parameters if p.grad is not None)
        mark()
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        new_state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
        mark()
        optimizer.zero_grad(set_to_none=True)
        del loss
        mark()
        torch.cuda.synchronize(device)
        snapshot = torch.cuda.memory._snapshot(cuda_index(device))
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    index = cuda_index(device)
    return timeline_from_trace(
        snapshot["device_traces"][index],
        [m.data_ptr() for m in markers],
        held,
        gradients,
        _storage_addresses(t for t in new_state if t.is_cuda),
    )


def plot(timeline: MemoryTimeline, ax=None, title: str = ""):
    """Stacked bytes by category over the step, with the phase boundaries marked."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3.4), layout="constrained")
    scale, unit = (2**30, "GiB") if max(timeline.totals()) >= 2**30 else (2**20, "MiB")
    names = list(timeline.bytes)
    ax.stackplot(
        timeline.x,
        [[b / scale for b in timeline.bytes[n]] for n in names],
        labels=names,
        colors=[COLOURS[n] for n in names],
        step=timeline.step,
        alpha=0.8,
    )
    top = max(timeline.totals()) / scale
    for x in timeline.phases.values():
        ax.axvline(x, color="k", lw=0.6, ls=":")
    phases = ax.secondary_xaxis("top")
    phases.set_xticks(list(timeline.phases.values()), list(timeline.phases), fontsize=7)
    ax.set(xlabel=timeline.x_label, ylabel=unit, ylim=(0, top * 1.1), title=title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax
