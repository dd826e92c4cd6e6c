"""The matrix's workloads: a square matmul, the MNIST CNN, ViT training steps, the largest batch.

Each ``bench_*`` takes the matrix's cells (``Variant.matrix``) and returns one ``Row`` per
cell: what it measured, or ``skipped`` with a reason.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import torch

from .. import data as _data
from .. import models, timing
from ..flops import count_step_flops
from ..gpus import peak_tflops
from ..memory import largest_batch
from .config import MNIST_TRAIN_SIZE, BenchConfig
from .rows import Row, timing_fields
from .trainer import Trainer, flags, recompile_limit_line, time_steps
from .variant import Variant


def _time(steps: dict, config: BenchConfig, device, label: str) -> tuple[dict, dict]:
    return time_steps(steps, device, config.rounds, config.min_run_time, label)


def bench_matmul(
    cells: list[Variant], config: BenchConfig, device: torch.device, name: str
) -> list[Row]:
    """Square matmul throughput per precision and size, against the published peak."""
    base = [c for c in cells if c.plain]  # compile/fused do not change a matmul
    rows = []
    for size in config.matmul_sizes:
        fns = {}
        for c in base:
            dtype = c.precision.dtype  # the matmul runs in it directly, without autocast
            a = torch.randn(size, size, device=device, dtype=dtype)
            b = torch.randn(size, size, device=device, dtype=dtype)
            fns[c] = lambda a=a, b=b: torch.mm(a, b)
        measured, failed = _time(fns, config, device, f"matmul {size}")
        for c in base:
            if c.label in failed:
                rows.append(Row("matmul", c, size=size, skipped=failed[c.label]))
                continue
            stats = timing_fields(timing.summarise(measured[c.label]))
            peak = peak_tflops(name, c.precision.name)
            rows.append(
                Row("matmul", c, size, **stats, flops_per_step=2 * size**3, dense_peak_tflops=peak)
            )
    return rows


def _time_training(
    workload: str,
    trainer: Trainer,
    cells: list[Variant],
    config: BenchConfig,
    device,
    make_batches,
) -> tuple[dict, dict]:
    """The cells' steps timed round-robin on the shared trainer."""
    steps = {c: trainer.step(c, make_batches()) for c in cells}
    return _time(steps, config, device, workload)


def bench_mnist_cnn(
    cells: list[Variant],
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
    cells = [replace(c, batch=batch) for c in cells]
    measured, failed = _time_training("mnist_cnn", trainer, cells, config, device, make_batches)
    steps_per_epoch = math.ceil(MNIST_TRAIN_SIZE / batch)
    rows = []
    for c in cells:
        if c.label in failed:
            rows.append(Row("mnist_cnn", c, skipped=failed[c.label]))
            continue
        stats = timing_fields(timing.summarise(measured[c.label]))
        rows.append(Row("mnist_cnn", c, **stats, steps_per_epoch=steps_per_epoch))
    return rows


def bench_vit(
    preset: str,
    cells: list[Variant],
    config: BenchConfig,
    device: torch.device,
    name: str,
    matmul_peaks: dict[str, float],
) -> list[Row]:
    """A ViT training step on synthetic images: time, images/s, peak memory and MFU, against the
    published dense peak and against the run's ``matmul_peaks`` (``rows.matmul_peaks``)."""
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
    cells = [replace(c, batch=batch) for c in cells]
    measured, failed = _time_training(workload, trainer, cells, config, device, make_batches)
    rows = []
    for c in cells:
        if c.label in failed:
            skipped = recompile_limit_line(failed[c.label]) or failed[c.label]
            rows.append(Row(workload, c, skipped=skipped))
            continue
        memory, note = None, None
        try:
            memory = trainer.peak_memory(c, trainer.step(c, make_batches()))
        except Exception as error:  # noqa: BLE001 - a memory figure is optional
            note = f"not measured: {type(error).__name__}: {error}"[:200]
        rows.append(
            Row(
                workload,
                c,
                **timing_fields(timing.summarise(measured[c.label])),
                flops_per_step=flops_per_image * batch,
                dense_peak_tflops=peak_tflops(name, c.precision.name),
                matmul_peak_tflops=matmul_peaks.get(c.precision.name),
                peak_memory_bytes=memory,
                memory_note=note,
            )
        )
    return rows


def bench_max_batch(cells: list[Variant], config: BenchConfig, device: torch.device) -> list[Row]:
    """The largest ViT-B/16 training batch that fits per precision (GPU only)."""
    base = [c for c in cells if c.plain]  # recompiling per size is too slow: eager cells only
    if device.type != "cuda":
        reason = "GPU only: a CPU swaps instead of failing cleanly"
        return [Row("max_batch", c, skipped=reason) for c in base]
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
            rows.append(Row("max_batch", c, skipped=f"{type(error).__name__}: {error}"[:200]))
            continue
        rows.append(Row("max_batch", c, max_batch=best, limit=config.max_batch_limit))
    trainer.clear_state()
    return rows
