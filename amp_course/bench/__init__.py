"""Benchmark: precisions (fp32, TF32, fp16, bf16; optionally compiled or fused) x workloads.

Measuring (``run``, in ``matrix``, over the workloads in ``workloads``; every ``Variant``, a
precision plus options, the matrix's cells and the ladder's rungs alike, stepped by the one
``trainer.Trainer``), the result (one ``rows.Row`` per measured configuration, saved as JSON, with
the figures derived from its measurements as properties) and presenting (``format_report``,
``plot_report``, in ``report``, through the one renderer of ``tables``) are separate, as in
torch.utils.benchmark and ``ac.timing``; FLOPs and MFU live in ``ac.flops``, published
peaks in ``ac.gpus``: both below the benchmark.
Variants are timed round-robin, so drift in machine load or clocks hits every one alike, and
each sets its precision flags on entry and restores them on exit.
"""

from . import ladder, ladder_report, profile, rows, tables, timm_vit, trainer
from .config import MNIST_TRAIN_SIZE, PRECISIONS, WORKLOADS, BenchConfig
from .matrix import run
from .report import format_report, plot_report, write_report
from .rows import Row
from .variant import Variant, skip_reason
from .workloads import bench_matmul, bench_max_batch, bench_mnist_cnn, bench_vit

__all__ = [
    "MNIST_TRAIN_SIZE",
    "PRECISIONS",
    "Row",
    "WORKLOADS",
    "BenchConfig",
    "Variant",
    "bench_matmul",
    "bench_max_batch",
    "bench_mnist_cnn",
    "bench_vit",
    "ladder",
    "ladder_report",
    "profile",
    "rows",
    "tables",
    "timm_vit",
    "trainer",
    "format_report",
    "plot_report",
    "run",
    "skip_reason",
    "write_report",
]
