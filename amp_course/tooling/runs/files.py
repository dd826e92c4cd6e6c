"""A committed GPU run's files read as typed figures: what the GPU guide's section and the website's
GPU page render. Everything under the run's folder:

- ``report.json``: the machine, each notebook's papermill and nbval result;
- ``bench*/bench.json``: ``amp-course bench`` reports (merged by workload; the ViT-B/16 matrix
  with torch.compile and fused AdamW is required, the other workloads are used where present);
- ``profile-vit_b16/profile.json``: where a ViT-B/16 step's GPU time goes;
- ``notebooks/``: the executed copies (for nbval's markers and lesson 00's MNIST source).

Benchmark figures come from bench.json rows (``bench.rows.Row``) only, never from a table a
lesson printed: a workload no bench.json of the run holds is reported as not measured.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

from ...bench.profile import load as load_profile
from ...bench.rows import load
from ..executed import printed


def printed_text(notebook: Path) -> str:
    """Everything an executed notebook's code cells printed (their stream outputs), in order."""
    nb = nbformat.read(notebook, as_version=4)
    return "".join(printed(cell) for cell in nb.cells if cell.cell_type == "code")


def printed_mnist_source(notebook: Path) -> str:
    """The "MNIST source: ..." line a lesson printed (the shipped subset when offline)."""
    found = re.search(r"MNIST source: (.+)", printed_text(notebook))
    if found is None:
        raise ValueError(f"{notebook} printed no MNIST source")
    return found.group(1).strip()


def checked_output_cells(notebook: Path) -> int:
    """Cells whose output ``--nbval-lax`` compares: those marked ``# NBVAL_CHECK_OUTPUT`` or
    tagged ``nbval-check-output`` (nbval's markers); it compares no other output."""
    nb = nbformat.read(notebook, as_version=4)
    return sum(
        "NBVAL_CHECK_OUTPUT" in cell.source
        or "nbval-check-output" in cell.get("metadata", {}).get("tags", [])
        for cell in nb.cells
        if cell.cell_type == "code"
    )


def bench_report(folder: Path) -> dict | None:
    """The run's bench reports merged into one: the first's record, each workload's rows from the
    report that ran it, ``sources`` naming that report's file; None when the run has none."""
    merged = None
    for path in sorted(Path(folder).glob("bench*/bench.json")):
        report = json.loads(path.read_text())
        if merged is None:
            merged = {**report, "results": {}, "sources": {}, "configs": {}}
        for workload, rows in report["results"].items():
            if rows:
                merged["results"][workload] = rows
                merged["sources"][workload] = path.relative_to(folder).as_posix()
                merged["configs"][workload] = report["config"]
    return merged


# The eager workloads the GPU results show beside the ViT-B/16 matrix: the plan's bench-eager part.
EAGER_WORKLOADS = ("matmul", "mnist_cnn", "max_batch")


def collect(folder: Path) -> dict:
    """Every figure the GPU results quote, from the run's files; ``rows`` holds only the eager
    workloads some bench.json of the run has, and ``measured`` None for a target it lacks."""
    folder = Path(folder)
    report = json.loads((folder / "report.json").read_text())
    bench = bench_report(folder)
    if bench is None or "vit_b16" not in bench["results"]:
        raise FileNotFoundError(f"{folder} holds no bench*/bench.json with the ViT-B/16 matrix")
    vit = {row.label: row for row in load(bench, "vit_b16") if row.timed}
    rows = {w: load(bench, w) for w in EAGER_WORKLOADS if w in bench["results"]}
    profile = {r["label"]: r for r in load_profile(folder / "profile-vit_b16/profile.json")}
    batches = {r.label: r.max_batch for r in rows.get("max_batch", []) if r.max_batch is not None}
    fp32, best = vit["fp32"], vit["bf16+compile+fused"]
    fits = {"fp32", "bf16"} <= set(batches)
    measured = {
        "bf16_time": vit["bf16"].time_ratio(fp32),
        "best_time": best.time_ratio(fp32),
        "bf16_mfu": vit["bf16"].mfu,
        "best_mfu": best.mfu,
        "bf16_memory": vit["bf16"].memory_ratio(fp32),
        "max_batch": batches["bf16"] / batches["fp32"] if fits else None,
    }
    return {
        "folder": folder,
        "report": report,
        "bench": bench,
        "vit_config": bench["configs"]["vit_b16"],
        "vit": vit,
        "rows": rows,
        "profile": profile,
        "batches": batches,
        "measured": measured,
        "mnist_source": printed_mnist_source(folder / "notebooks" / "00_scenario.ipynb"),
    }
