"""Benchmark: precision modes (fp32, TF32, fp16, bf16; optionally compiled or fused) x workloads.

Measuring (``run``, in ``matrix``, over the workloads in ``workloads``; every configuration, a
mode plus options such as the ladder's rungs, stepped by the one ``trainer.Trainer``), the result
(one ``rows.Row`` per measured configuration, saved as JSON) and presenting
(``format_report``, ``plot_report``, in ``report``, from those rows) are separate, as in
torch.utils.benchmark and ``ac.timing``; FLOPs and MFU live in ``flops``, published peaks in
``ac.gpus``. Modes are timed round-robin, so drift in machine load or clocks hits every mode
alike, and each mode sets its precision flags on entry and restores them on exit.
"""

from . import ladder, ladder_report, profile, rows, timm_vit, trainer
from .config import (
    MNIST_TRAIN_SIZE,
    PRECISIONS,
    WORKLOADS,
    BenchConfig,
    Configuration,
    Mode,
    skip_reason,
)
from .flops import count_step_flops, mfu, peak_bandwidth_tbs, peak_tflops
from .matrix import run
from .report import format_report, plot_report, write_report
from .rows import Row
from .workloads import bench_matmul, bench_max_batch, bench_mnist_cnn, bench_vit

__all__ = [
    "MNIST_TRAIN_SIZE",
    "PRECISIONS",
    "Row",
    "WORKLOADS",
    "BenchConfig",
    "Configuration",
    "Mode",
    "bench_matmul",
    "bench_max_batch",
    "bench_mnist_cnn",
    "bench_vit",
    "ladder",
    "ladder_report",
    "profile",
    "rows",
    "timm_vit",
    "trainer",
    "count_step_flops",
    "format_report",
    "mfu",
    "peak_bandwidth_tbs",
    "peak_tflops",
    "plot_report",
    "run",
    "skip_reason",
    "write_report",
]
