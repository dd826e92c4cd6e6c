"""Timing: warmed-up, synchronised measurements with median and spread, built on
torch.utils.benchmark.

Measuring (``measure``), the result (torch's ``Measurement``) and presenting (``summarise``,
``compare_table``) are kept apart, as torch.utils.benchmark does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch.utils import benchmark


def synchronize(device: torch.device | str) -> None:
    """Wait for queued GPU work; a no-op on CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    fn: Callable[[], object],
    *,
    device: torch.device | str = "cpu",
    warmup: int = 3,
    min_run_time: float = 0.2,
    repeats: int = 7,
    label: str = "",
    sub_label: str = "",
    description: str = "",
) -> benchmark.Measurement:
    """Time ``fn()`` after ``warmup`` untimed calls; returns a Measurement (median, IQR, all runs).

    Every clock reading first synchronises ``device`` (CUDA kernels run asynchronously: a timer
    that does not wait for them measures only the launch), so queued kernels are counted; we pass
    this clock to torch.utils.benchmark.Timer explicitly rather than rely on its default, which
    synchronises only when CUDA is available at all. The explicit warm-up pays for allocation,
    kernel selection and (with torch.compile) compilation before timing starts. We take
    ``repeats`` runs of a fixed number of calls (sized so all runs together last about
    ``min_run_time``) and merge them, so the spread is always measured: ``blocked_autorange``
    can return a single block for slow functions.
    """
    for _ in range(warmup):
        fn()
    synchronize(device)

    def clock() -> float:
        synchronize(device)
        return time.perf_counter()

    timer = benchmark.Timer(
        stmt="fn()",
        globals={"fn": fn},
        label=label,
        sub_label=sub_label,
        description=description,
        num_threads=torch.get_num_threads(),
        timer=clock,
    )
    probe = timer.timeit(1).median
    number = max(1, int(min_run_time / repeats / max(probe, 1e-9)))
    runs = [timer.timeit(number) for _ in range(repeats)]
    return benchmark.Measurement.merge(runs)[0]


def summarise(measurement: benchmark.Measurement) -> dict:
    """Median, IQR and run count of a Measurement, in seconds, as a plain dict."""
    return {
        "median_s": measurement.median,
        "iqr_s": measurement.iqr,
        "mean_s": measurement.mean,
        "runs": len(measurement.times),
        "label": measurement.description or measurement.sub_label or measurement.label,
    }


def format_time(seconds: float) -> str:
    """``0.0123`` -> ``"12.3 ms"``."""
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= factor:
            return f"{seconds / factor:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def compare_table(measurements: list[benchmark.Measurement]) -> str:
    """torch.utils.benchmark's comparison table of several Measurements, as text."""
    compare = benchmark.Compare(measurements)
    compare.trim_significant_figures()
    return str(compare)
