"""Running the matrix: every available configuration (a precision, optionally compiled or with fused
AdamW) on every workload, into one JSON-ready report whose ``results`` hold each workload's rows as
``Row.to_dict`` writes them."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import torch

from ..device import machine_record
from . import ladder
from .config import WORKLOADS, BenchConfig
from .rows import Row, matmul_peaks
from .variant import skip_reason
from .workloads import bench_matmul, bench_max_batch, bench_mnist_cnn, bench_vit


def run(
    config: BenchConfig | None = None,
    device: torch.device | str = "cpu",
    progress: Callable[[str], None] | None = print,
    mnist=None,
) -> dict:
    """Run the matrix; returns the report as a JSON-ready dict (see ``format_report``)."""
    config = config or BenchConfig.full()
    config.validate()
    device = torch.device(device)
    say = progress or (lambda _: None)
    report = {
        **machine_record(device),
        "smoke": config.smoke,
        "config": config.to_dict(),
        "variants": [],
        "results": {w: [] for w in WORKLOADS},
        "seconds": {},
    }
    runnable, skipped = [], []
    for cell in config.variants():
        # Not smoke's rule: the matrix compiles only when asked (--compile), even on a CPU.
        reason = skip_reason(cell, device)
        report["variants"].append(
            {"label": cell.label, "available": reason is None, "reason": reason}
        )
        if reason is None:
            runnable.append(cell)
        else:
            skipped.append((cell, reason))
            say(f"skip {cell.label}: {reason}")
    saved_threads = torch.get_num_threads()
    if config.threads:
        torch.set_num_threads(config.threads)
    report["threads"] = torch.get_num_threads()
    try:
        _run_workloads(report, config, device, runnable, skipped, mnist, say)
    finally:
        torch.set_num_threads(saved_threads)
    return report


def _run_workloads(report, config, device, runnable, skipped, mnist, say) -> None:
    name, peaks = report["device"], {}
    for workload in config.workloads:
        names = ", ".join(c.label for c in runnable) if workload != "ladder" else "its own rungs"
        say(f"{workload}: {names}")
        start = time.perf_counter()
        if workload == "matmul":
            rows = bench_matmul(runnable, config, device, name)
            peaks = matmul_peaks(rows)
        elif workload == "mnist_cnn":
            rows = bench_mnist_cnn(runnable, config, device, mnist)
        elif workload in ("vit_b16", "vit_l16"):
            preset = workload.removeprefix("vit_")
            rows = bench_vit(preset, runnable, config, device, name, peaks)
        elif workload == "ladder":  # its own rungs, in the device's AMP precision: not the cells
            rows = ladder.run(ladder.LadderConfig.from_bench(config, device, peaks), device, say)
        else:
            rows = bench_max_batch(runnable, config, device)
        for cell, reason in skipped if workload != "ladder" else ():
            if workload in ("mnist_cnn", "vit_b16", "vit_l16") or cell.plain:
                rows.append(Row(workload, cell, skipped=reason))
        report["results"][workload] = [row.to_dict() for row in rows]
        report["seconds"][workload] = time.perf_counter() - start
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
