"""The one trainer of every measured ``variant.Variant`` (the matrix's cells and the
ladder's rungs): it builds and steps them, times them round-robin and measures their peak
memory by one definition."""

from __future__ import annotations

import contextlib
import gc
import itertools
from collections.abc import Callable, Iterator

import torch

from .. import data as _data
from .. import recipe, timing
from ..attention import emulated_kernels, sdpa_context
from ..memory import step_peak_memory
from ..training import amp_step
from .variant import Variant


class Trainer:
    """One model per kind, one compiled wrapper per compile mode and attention kernel, one AdamW
    per fused flag, shared by every variant it steps; each step keeps its own scaler.

    Sharing keeps the memory of a 16-mode matrix, or of a ladder, at one model per kind.
    ``build(kind)`` makes the model of a kind ("course", "lean" or "timm").
    """

    def __init__(self, device: torch.device, build: Callable[[str], torch.nn.Module]):
        self.device, self.build = device, build
        self.models: dict[str, torch.nn.Module] = {}
        self.compiled: dict[tuple, torch.nn.Module] = {}
        self.optimizers: dict[tuple[str, bool], torch.optim.Optimizer] = {}

    def model(self, kind: str = "course") -> torch.nn.Module:
        """The model of ``kind``, built and moved to the device on first use."""
        if kind not in self.models:
            self.models[kind] = self.build(kind).to(self.device)
        return self.models[kind]

    def step(self, variant: Variant, batches: Iterator | None = None):
        """One training step of ``variant`` over the next of ``batches`` (None: one
        synthetic batch of ``variant.batch`` images, repeated)."""
        model = self.model(variant.model)
        model_fn = model
        if variant.compile:
            key = (variant.model, variant.compile, variant.attention)
            if key not in self.compiled:
                # Static shapes: a variant at another batch compiles its own graph, never
                # a dynamic-shape one.
                self.compiled[key] = torch.compile(model, mode=variant.compile, dynamic=False)
            model_fn = self.compiled[key]
        key = (variant.model, variant.fused)
        if key not in self.optimizers:
            fused = variant.fused or None
            self.optimizers[key] = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
        if batches is None:
            images, labels = _data.synthetic_images(
                variant.batch, image_size=model_image_size(model), device=self.device
            )
            batches = itertools.repeat((images, labels))
        recipe = variant.recipe(self.device)
        inner = train_step(model_fn, self.optimizers[key], recipe, batches)
        # The rung's kernel, else on a rehearsed GPU the kernels it runs for the autocast dtype.
        kernels = variant.attention or emulated_kernels(self.device, recipe.autocast_dtype)
        if kernels is None:
            return inner

        def step():
            with sdpa_context(kernels):
                inner()

        return step

    def clear_state(self) -> None:
        clear_state(self.optimizers.values(), self.models.values(), self.device)

    def peak_memory(self, variant: Variant, step) -> int | None:
        """The bench's one peak-memory figure (``peak_memory``) of ``variant``'s step."""
        with flags(variant):
            model = self.model(variant.model)
            return peak_memory(self.clear_state, model, step, self.device, variant)


@contextlib.contextmanager
def flags(variant: Variant):
    """The flags ``variant`` runs under: TF32 matmuls where its precision's ``tf32_matmuls``
    says (tf32); and where it compiles,
    a ``FailOnRecompileLimitHit`` error instead of torch._dynamo's silent fallback: past its
    recompile limit (``torch._dynamo.config.recompile_limit``) dynamo runs the frame eager, and
    a variant named compiled would time eager code."""
    with recipe.tf32(variant.precision.tf32_matmuls):
        if not variant.compile:
            yield
            return
        import torch._dynamo

        with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
            yield


def recompile_limit_line(error: BaseException | str) -> str | None:
    """What a variant that passed the recompile limit measured (None: ``error``, or
    round_robin's "ErrorType: message", is something else)."""
    name = error.split(":")[0] if isinstance(error, str) else type(error).__name__
    if name != "FailOnRecompileLimitHit":
        return None
    import torch._dynamo

    limit = torch._dynamo.config.recompile_limit
    return (
        f"not timed: torch.compile passed torch._dynamo's recompile limit ({limit}) on this "
        "model, so this variant would have run eager"
    )


def time_steps(
    steps: dict[Variant, Callable[[], object]],
    device,
    rounds: int,
    min_run_time: float,
    label: str,
    warmup: int = 3,
) -> tuple[dict, dict]:
    """Time ``steps`` round-robin, each under its variant's flags, after ``warmup`` untimed calls;
    both dicts are keyed by the configurations' names (``timing.round_robin``'s measured and
    failed)."""
    by_label = {c.label: c for c in steps}
    return timing.round_robin(
        {c.label: step for c, step in steps.items()},
        device=device,
        rounds=rounds,
        min_run_time=min_run_time,
        label=label,
        context=lambda label: flags(by_label[label]),
        warmup=warmup,
    )


def train_step(model, optimizer, recipe, batches: Iterator):
    """One AMP training step over the next preloaded batch (data loading stays outside), with its
    own scaler; the skipped flag is not read back, so no step waits for the GPU."""
    scaler = recipe.scaler()

    def step():
        amp_step(model, optimizer, scaler, recipe, next(batches), check_skipped=False)

    return step


def clear_state(optimizers, models, device) -> None:
    """Drop every optimizer's state and the gradients, so a memory figure holds one step's."""
    for optimizer in optimizers:
        optimizer.state.clear()
    for model in models:
        model.zero_grad(set_to_none=True)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def peak_memory(clear, model: torch.nn.Module, step, device, variant: Variant) -> int | None:
    """The one peak-memory figure of every bench row: the model's parameters plus one step's peak
    from a clean state (``clear()`` drops gradients and optimizer state; a warm-up step makes
    them again), so nothing else the process holds counts. None off CUDA and for steps run from
    CUDA graphs (``Variant.memory_note``)."""
    if device.type != "cuda" or variant.memory_note:
        return None
    clear()
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    return parameters + step_peak_memory(lambda: step, device, warmup=1)


def model_image_size(model: torch.nn.Module) -> int:
    """The input side of a torchvision or timm ViT."""
    if hasattr(model, "image_size"):
        return model.image_size
    return model.patch_embed.img_size[0]
