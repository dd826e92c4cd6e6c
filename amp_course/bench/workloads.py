"""The matrix's workloads: a square matmul, the MNIST CNN, ViT training steps, the largest batch.

Each ``bench_*`` returns one ``Row`` per mode: numbers, or ``skipped`` with a reason.
"""

from __future__ import annotations

import gc
import itertools
import math
from collections.abc import Callable, Iterator

import torch

from .. import data as _data
from .. import models, precision, timing
from ..memory import largest_batch, step_peak_memory
from ..training import amp_step
from .config import MNIST_TRAIN_SIZE, BenchConfig, Mode
from .flops import count_step_flops, mfu, peak_tflops
from .rows import Row, memory_note, timing_fields


def _row(workload: str, mode: Mode, **values) -> Row:
    compile_mode = "default" if mode.compile else None
    return Row(workload, mode.name, mode.precision, compile_mode, mode.fused, **values)


def _skipped(workload: str, mode: Mode, reason: str) -> Row:
    return _row(workload, mode, skipped=reason)


def _time_modes(
    fns: dict[str, Callable[[], object]],
    modes: list[Mode],
    config: BenchConfig,
    device,
    label: str,
) -> tuple[dict, dict]:
    """Time ``fns`` (one per mode) round-robin, each under its mode's precision flags."""
    by_name = {m.name: m for m in modes}
    return timing.round_robin(
        fns,
        device=device,
        rounds=config.rounds,
        min_run_time=config.min_run_time,
        label=label,
        context=lambda name: precision.tf32(by_name[name].precision == "tf32"),
    )


def bench_matmul(
    modes: list[Mode], config: BenchConfig, device: torch.device, name: str
) -> list[Row]:
    """Square matmul throughput per precision and size, against the published peak."""
    base = [m for m in modes if not (m.compile or m.fused)]  # compile/fused do not change a matmul
    rows = []
    for size in config.matmul_sizes:
        fns = {}
        for mode in base:
            dtype = mode.autocast_dtype  # the matmul runs in it directly, without autocast
            a = torch.randn(size, size, device=device, dtype=dtype)
            b = torch.randn(size, size, device=device, dtype=dtype)
            fns[mode.name] = lambda a=a, b=b: torch.mm(a, b)
        measured, failed = _time_modes(fns, base, config, device, f"matmul {size}")
        for mode in base:
            if mode.name in failed:
                rows.append(_row("matmul", mode, size=size, skipped=failed[mode.name]))
                continue
            stats = timing.summarise(measured[mode.name])
            tflops = 2 * size**3 / stats["median_s"] / 1e12
            peak = peak_tflops(name, mode.precision)
            rows.append(
                _row(
                    "matmul",
                    mode,
                    size=size,
                    **timing_fields(stats),
                    flops_per_step=2 * size**3,
                    achieved_tflops=tflops,
                    dense_peak_tflops=peak,
                    mfu=tflops / peak if peak else None,
                )
            )
    return rows


def train_step(model, optimizer, recipe, batches: Iterator):
    """One AMP training step over the next preloaded batch (data loading stays outside), with its
    own scaler; the skipped flag is not read back, so no step waits for the GPU."""
    scaler = recipe.scaler()

    def step():
        amp_step(model, optimizer, scaler, recipe, next(batches), check_skipped=False)

    return step


class _Trainer:
    """A model shared by every mode, one compiled wrapper and one AdamW per fused flag.

    Sharing keeps the memory of a 12-mode matrix at one model's; each mode keeps its own scaler.
    """

    def __init__(self, model: torch.nn.Module, device):
        self.model = model.to(device)
        self.device = device
        self._compiled = None
        self.optimizers: dict[bool, torch.optim.Optimizer] = {}

    def step_fn(self, mode: Mode, batches: Iterator):
        if mode.compile and self._compiled is None:
            self._compiled = torch.compile(self.model)
        model = self._compiled if mode.compile else self.model
        if mode.fused not in self.optimizers:
            self.optimizers[mode.fused] = torch.optim.AdamW(
                self.model.parameters(), lr=1e-4, fused=mode.fused or None
            )
        return train_step(model, self.optimizers[mode.fused], mode.recipe(self.device), batches)

    def clear_state(self) -> None:
        clear_state(self.optimizers.values(), [self.model], self.device)


def clear_state(optimizers, models, device) -> None:
    """Drop every optimizer's state and the gradients, so a memory figure holds one step's."""
    for optimizer in optimizers:
        optimizer.state.clear()
    for model in models:
        model.zero_grad(set_to_none=True)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _time_training(
    workload: str,
    trainer: _Trainer,
    modes: list[Mode],
    config: BenchConfig,
    device,
    make_batches: Callable[[], Iterator],
) -> tuple[dict, dict]:
    fns = {m.name: trainer.step_fn(m, make_batches()) for m in modes}
    return _time_modes(fns, modes, config, device, workload)


def peak_memory(clear, model: torch.nn.Module, step, device, compile_mode=None) -> int | None:
    """The one peak-memory figure of every bench row: the model's parameters plus one step's peak
    from a clean state (``clear()`` drops gradients and optimizer state; a warm-up step makes
    them again), so nothing else the process holds counts. None off CUDA and for steps run from
    CUDA graphs (``rows.memory_note``)."""
    if device.type != "cuda" or memory_note(Row("", "", "", compile_mode)):
        return None
    clear()
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    return parameters + step_peak_memory(lambda: step, device, warmup=1)


def _mode_peak_memory(trainer: _Trainer, mode: Mode, device, make_batches) -> int | None:
    step = trainer.step_fn(mode, make_batches())
    with precision.tf32(mode.precision == "tf32"):
        return peak_memory(trainer.clear_state, trainer.model, step, device)


def bench_mnist_cnn(
    modes: list[Mode],
    config: BenchConfig,
    device: torch.device,
    mnist: _data.MnistData | None = None,
) -> list[Row]:
    """The MNIST tutorial's CNN: time per step on preloaded real digits, and per epoch."""
    batch = config.mnist_batch_size
    loader, _ = _data.mnist_loaders(batch, num_train=batch * config.mnist_batches, data=mnist)
    preloaded = [(x.to(device), y.to(device)) for x, y in loader]  # loading stays untimed

    def make_batches():
        return itertools.cycle(preloaded)

    trainer = _Trainer(models.MnistCNN(width_divisor=config.mnist_width_divisor), device)
    measured, failed = _time_training("mnist_cnn", trainer, modes, config, device, make_batches)
    steps_per_epoch = math.ceil(MNIST_TRAIN_SIZE / batch)
    rows = []
    for mode in modes:
        if mode.name in failed:
            rows.append(_skipped("mnist_cnn", mode, failed[mode.name]))
            continue
        stats = timing.summarise(measured[mode.name])
        rows.append(
            _row(
                "mnist_cnn",
                mode,
                batch=batch,
                **timing_fields(stats),
                images_per_s=batch / stats["median_s"],
                epoch_s=stats["median_s"] * steps_per_epoch,
                steps_per_epoch=steps_per_epoch,
            )
        )
    return rows


def bench_vit(
    preset: str,
    modes: list[Mode],
    config: BenchConfig,
    device: torch.device,
    name: str,
    ceilings: dict[str, float],
) -> list[Row]:
    """A ViT training step on synthetic images: time, images/s, peak memory and MFU."""
    workload = f"vit_{preset}"
    overrides = config.vit_overrides.get(preset, {})
    batch = config.vit_batch_size[preset]

    def build():
        return models.build_vit(preset, **overrides)

    model = build()
    size, classes = model.image_size, model.num_classes
    _, flops_per_image = count_step_flops(build, (1, 3, size, size), classes)
    images, labels = _data.synthetic_images(
        batch, image_size=size, num_classes=classes, device=device
    )

    def make_batches():
        return itertools.repeat((images, labels))

    trainer = _Trainer(model, device)
    measured, failed = _time_training(workload, trainer, modes, config, device, make_batches)
    rows = []
    for mode in modes:
        if mode.name in failed:
            rows.append(_skipped(workload, mode, failed[mode.name]))
            continue
        stats = timing.summarise(measured[mode.name])
        flops = flops_per_image * batch
        peak = peak_tflops(name, mode.precision)
        ceiling = ceilings.get(mode.precision)
        memory, note = None, None
        try:
            memory = _mode_peak_memory(trainer, mode, device, make_batches)
        except Exception as error:  # noqa: BLE001 - a memory figure is optional
            note = f"not measured: {type(error).__name__}: {error}"[:200]
        rows.append(
            _row(
                workload,
                mode,
                batch=batch,
                **timing_fields(stats),
                images_per_s=batch / stats["median_s"],
                flops_per_step=flops,
                achieved_tflops=flops / stats["median_s"] / 1e12,
                dense_peak_tflops=peak,
                mfu=mfu(flops, stats["median_s"], peak) if peak else None,
                matmul_peak_tflops=ceiling,
                mfu_of_matmul=mfu(flops, stats["median_s"], ceiling) if ceiling else None,
                peak_memory_bytes=memory,
                memory_note=note,
            )
        )
    return rows


def bench_max_batch(modes: list[Mode], config: BenchConfig, device: torch.device) -> list[Row]:
    """The largest ViT-B/16 training batch that fits per precision (GPU only)."""
    base = [m for m in modes if not (m.compile or m.fused)]  # recompiling per size is too slow
    if device.type != "cuda":
        return [
            _skipped("max_batch", m, "GPU only: a CPU swaps instead of failing cleanly")
            for m in base
        ]
    overrides = config.vit_overrides.get("b16", {})
    trainer = _Trainer(models.build_vit("b16", **overrides), device)
    size = trainer.model.image_size
    rows = []
    for mode in base:

        def try_batch(n, mode=mode):
            trainer.clear_state()
            images, labels = _data.synthetic_images(n, image_size=size, device=device)
            with precision.tf32(mode.precision == "tf32"):
                trainer.step_fn(mode, itertools.repeat((images, labels)))()

        try:
            best = largest_batch(try_batch, config.max_batch_limit)
        except Exception as error:  # noqa: BLE001
            rows.append(_skipped("max_batch", mode, f"{type(error).__name__}: {error}"[:200]))
            continue
        rows.append(_row("max_batch", mode, max_batch=best, limit=config.max_batch_limit))
    trainer.clear_state()
    return rows
