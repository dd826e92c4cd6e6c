"""Loss scaling: gradients against the fp16 range, and a harness that runs any loss scaler step by
step."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .recipe import AmpRecipe
from .training import scaled_backward, step_and_update

FP16 = torch.finfo(torch.float16)
FP16_SMALLEST_NORMAL = FP16.smallest_normal  # 2**-14
FP16_MAX = FP16.max  # 65504


def collect_gradients(model, inputs, targets, *, device, loss_fn=F.cross_entropy) -> torch.Tensor:
    """Every nonzero gradient element of one fp32 forward/backward of ``model``, flattened (fp32,
    CPU)."""
    device = torch.device(device)
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model(inputs.to(device)), targets.to(device))
    loss.backward()
    grads = torch.cat(
        [p.grad.detach().float().flatten().cpu() for p in model.parameters() if p.grad is not None]
    )
    model.zero_grad(set_to_none=True)
    return grads[grads != 0]


@dataclass(frozen=True)
class Fp16Fate:
    """What happens to a set of fp32 gradients multiplied by ``scale`` and cast to fp16."""

    scale: float
    underflow: float  # share of nonzero gradients that become exactly 0
    subnormal: float  # share that land in fp16's subnormal range (fewer than 11 bits kept)
    overflow: float  # share that become inf


def fp16_fate(grads: torch.Tensor, scale: float) -> Fp16Fate:
    """Cast ``grads * scale`` to fp16 and count what underflows, goes subnormal and overflows."""
    if scale <= 0:
        raise ValueError(f"A loss scale must be positive, got {scale}.")
    grads = grads[grads != 0].float()
    if grads.numel() == 0:
        raise ValueError("No nonzero gradients to look at: run a backward pass first.")
    scaled = grads * scale
    as_fp16 = scaled.to(torch.float16)
    magnitude = as_fp16.float().abs()
    n = grads.numel()
    return Fp16Fate(
        scale=float(scale),
        underflow=(as_fp16 == 0).sum().item() / n,
        subnormal=((magnitude > 0) & (magnitude < FP16_SMALLEST_NORMAL)).sum().item() / n,
        overflow=torch.isinf(as_fp16).sum().item() / n,
    )


@dataclass
class ScalerRun:
    """A training run through a loss scaler: one entry per optimizer step."""

    scales: list[float] = field(default_factory=list)  # the scale after each update()
    skipped: list[bool] = field(default_factory=list)  # the scaler skipped optimizer.step()
    losses: list[float] = field(default_factory=list)
    model: torch.nn.Module | None = None


def mlp(
    seed: int = 0, in_features: int = 784, hidden: int = 64, num_classes: int = 10, device=None
):
    """A small two-layer MLP for MNIST, seeded so two calls build identical models."""
    with torch.random.fork_rng(devices=[]):  # seeds a copy of the CPU generator, then restores it
        torch.manual_seed(seed)
        model = torch.nn.Sequential(
            torch.nn.Flatten(),
            torch.nn.Linear(in_features, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, num_classes),
        )
    return model.to(device)


def mnist_batches(num_batches: int, batch_size: int = 32, seed: int = 0, data=None):
    """A fixed list of real MNIST (images, labels) batches, the same on every call with one seed."""
    from .data import load_mnist

    data = data if data is not None else load_mnist()
    images, labels = data.train.tensors
    needed = num_batches * batch_size
    if needed > len(labels):
        raise ValueError(
            f"{num_batches} batches of {batch_size} need {needed} training digits; there are "
            f"{len(labels)} here ({data.source}): fewer steps or a smaller batch."
        )
    index = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))[:needed]
    return [(images[i], labels[i]) for i in index.split(batch_size)]


def run_with_scaler(
    scaler,
    model,
    optimizer,
    batches,
    *,
    recipe: AmpRecipe,
    inject_inf_at=(),
    loss_fn=F.cross_entropy,
) -> ScalerRun:
    """Train ``model`` over ``batches`` with ``recipe`` (an ``AmpRecipe``, fp16 for a scaler that
    acts) and ``scaler``; record scale and skips.

    ``scaler`` is anything with ``scale``, ``step``, ``update`` and ``get_scale`` (a
    ``torch.amp.GradScaler`` or a hand-written one). At the step numbers in ``inject_inf_at`` one
    gradient element is set to inf after backward, as a real fp16 overflow would.
    """
    run = ScalerRun(model=model)
    first_param = next(model.parameters())
    for step, (inputs, targets) in enumerate(batches):
        optimizer.zero_grad(set_to_none=True)
        batch = (inputs.to(recipe.device), targets.to(recipe.device))
        loss = scaled_backward(model, recipe, scaler, batch, loss_fn)
        if step in inject_inf_at:
            with torch.no_grad():
                first_param.grad.view(-1)[0] = float("inf")
        run.skipped.append(step_and_update(scaler, optimizer))
        run.scales.append(scaler.get_scale())
        run.losses.append(loss.item())
    return run


def compare_scalers(
    make_scaler,
    batches,
    *,
    device,
    seed: int = 0,
    inject_inf_at=(),
    lr: float = 0.05,
    **scaler_kwargs,
):
    """Run ``make_scaler(**scaler_kwargs)`` and ``torch.amp.GradScaler`` on identical models and
    data.

    Returns (mine, torch's) ScalerRuns; equal ``scales``/``skipped`` and equal parameters mean the
    hand-written scaler behaves exactly like PyTorch's.
    """
    recipe = AmpRecipe(device, "fp16")  # the precision a scaler acts in
    mine = _scaler_run(make_scaler(**scaler_kwargs), batches, recipe, seed, inject_inf_at, lr)
    return mine, grad_scaler_run(
        batches, device=device, seed=seed, inject_inf_at=inject_inf_at, lr=lr, **scaler_kwargs
    )


def grad_scaler_run(
    batches, *, device, seed: int = 0, inject_inf_at=(), lr: float = 0.05, **scaler_kwargs
) -> ScalerRun:
    """``torch.amp.GradScaler(**scaler_kwargs)`` alone, on the model and data ``compare_scalers``
    trains: the reference run, with or without injected infs."""
    recipe = AmpRecipe(device, "fp16")  # the precision a scaler acts in
    scaler = torch.amp.GradScaler(recipe.device.type, **scaler_kwargs)
    return _scaler_run(scaler, batches, recipe, seed, inject_inf_at, lr)


def _scaler_run(scaler, batches, recipe: AmpRecipe, seed, inject_inf_at, lr) -> ScalerRun:
    """``scaler`` training the seed's MLP with SGD and momentum over ``batches`` in ``recipe``."""
    model = mlp(seed, device=recipe.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    return run_with_scaler(
        scaler, model, optimizer, batches, recipe=recipe, inject_inf_at=inject_inf_at
    )


def same_parameters(model_a, model_b) -> bool:
    """True when every parameter of the two models is bitwise equal."""
    return all(
        torch.equal(a, b) for a, b in zip(model_a.parameters(), model_b.parameters(), strict=True)
    )
