"""The matrix's workloads: a square matmul, the MNIST CNN, ViT training steps, the largest batch.

Each ``bench_*`` returns one ``Row`` per mode: numbers, or ``skipped`` with a reason.
"""

from __future__ import annotations

import itertools
import math

import torch

from .. import data as _data
from .. import models, timing
from ..memory import largest_batch
from .config import MNIST_TRAIN_SIZE, BenchConfig, Configuration, Mode
from .flops import count_step_flops, mfu, peak_tflops
from .rows import Row, timing_fields
from .trainer import Trainer, flags, recompile_limit_line, time_steps


def _time(steps: dict, config: BenchConfig, device, label: str) -> tuple[dict, dict]:
    return time_steps(steps, device, config.rounds, config.min_run_time, label)


def bench_matmul(
    modes: list[Mode], config: BenchConfig, device: torch.device, name: str
) -> list[Row]:
    """Square matmul throughput per precision and size, against the published peak."""
    # compile/fused do not change a matmul
    base = [Configuration.of(m) for m in modes if not (m.compile or m.fused)]
    rows = []
    for size in config.matmul_sizes:
        fns = {}
        for c in base:
            dtype = c.mode.autocast_dtype  # the matmul runs in it directly, without autocast
            a = torch.randn(size, size, device=device, dtype=dtype)
            b = torch.randn(size, size, device=device, dtype=dtype)
            fns[c] = lambda a=a, b=b: torch.mm(a, b)
        measured, failed = _time(fns, config, device, f"matmul {size}")
        for c in base:
            if c.name in failed:
                rows.append(c.row("matmul", size=size, skipped=failed[c.name]))
                continue
            stats = timing.summarise(measured[c.name])
            tflops = 2 * size**3 / stats["median_s"] / 1e12
            peak = peak_tflops(name, c.precision)
            rows.append(
                c.row(
                    "matmul",
                    size=size,
                    **timing_fields(stats),
                    flops_per_step=2 * size**3,
                    achieved_tflops=tflops,
                    dense_peak_tflops=peak,
                    mfu=tflops / peak if peak else None,
                )
            )
    return rows


def _time_training(
    workload: str, trainer: Trainer, modes: list[Mode], config: BenchConfig, device, make_batches
) -> tuple[list[Configuration], dict, dict]:
    """Every mode's configuration, and their steps timed round-robin on the shared trainer."""
    configurations = [Configuration.of(m) for m in modes]
    steps = {c: trainer.step(c, make_batches()) for c in configurations}
    return configurations, *_time(steps, config, device, workload)


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

    model = models.MnistCNN(width_divisor=config.mnist_width_divisor)
    trainer = Trainer(device, lambda kind: model)
    configurations, measured, failed = _time_training(
        "mnist_cnn", trainer, modes, config, device, make_batches
    )
    steps_per_epoch = math.ceil(MNIST_TRAIN_SIZE / batch)
    rows = []
    for c in configurations:
        if c.name in failed:
            rows.append(c.row("mnist_cnn", skipped=failed[c.name]))
            continue
        stats = timing.summarise(measured[c.name])
        rows.append(
            c.row(
                "mnist_cnn",
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

    trainer = Trainer(device, lambda kind: model)
    configurations, measured, failed = _time_training(
        workload, trainer, modes, config, device, make_batches
    )
    rows = []
    for c in configurations:
        if c.name in failed:
            skipped = recompile_limit_line(failed[c.name]) or failed[c.name]
            rows.append(c.row(workload, skipped=skipped))
            continue
        stats = timing.summarise(measured[c.name])
        flops = flops_per_image * batch
        peak = peak_tflops(name, c.precision)
        ceiling = ceilings.get(c.precision)
        memory, note = None, None
        try:
            memory = trainer.peak_memory(c, trainer.step(c, make_batches()))
        except Exception as error:  # noqa: BLE001 - a memory figure is optional
            note = f"not measured: {type(error).__name__}: {error}"[:200]
        rows.append(
            c.row(
                workload,
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
    # Recompiling per size is too slow: the search runs the eager, unfused modes.
    base = [Configuration.of(m) for m in modes if not (m.compile or m.fused)]
    if device.type != "cuda":
        reason = "GPU only: a CPU swaps instead of failing cleanly"
        return [c.row("max_batch", skipped=reason) for c in base]
    overrides = config.vit_overrides.get("b16", {})
    model = models.build_vit("b16", **overrides)
    trainer = Trainer(device, lambda kind: model)
    size = trainer.model().image_size
    rows = []
    for c in base:

        def try_batch(n, c=c):
            trainer.clear_state()
            images, labels = _data.synthetic_images(n, image_size=size, device=device)
            with flags(c):
                trainer.step(c, itertools.repeat((images, labels)))()

        try:
            best = largest_batch(try_batch, config.max_batch_limit)
        except Exception as error:  # noqa: BLE001
            rows.append(c.row("max_batch", skipped=f"{type(error).__name__}: {error}"[:200]))
            continue
        rows.append(c.row("max_batch", max_batch=best, limit=config.max_batch_limit))
    trainer.clear_state()
    return rows
