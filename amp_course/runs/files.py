"""A committed GPU run's files read as typed figures: what the README section and the website's GPU
page render. Everything under the run's folder:

- ``report.json``: the machine, each notebook's papermill and nbval result;
- ``bench*/bench.json``: ``amp-course bench`` reports (merged by workload; the ViT-B/16 matrix
  with torch.compile and fused AdamW is required, the other workloads are used where present);
- ``profile-vit_b16/profile.json``: where a ViT-B/16 step's GPU time goes;
- ``notebooks/``: the executed copies. Lesson 05's printed benchmark table is read only for the
  workloads no bench.json of the run holds (runs made before the bench ran them as a part).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


def printed_text(notebook: Path) -> str:
    """Everything an executed notebook's code cells printed (their stream outputs), in order."""
    nb = nbformat.read(notebook, as_version=4)
    return "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream"
    )


def printed_bench_tables(notebook: Path) -> dict[str, list[dict]]:
    """The tables ``amp-course bench`` printed in an executed notebook, by workload: one dict per
    row, keyed by the header's column names (the report format of ``ac.bench.format_report``)."""
    text = printed_text(notebook)
    start = text.find("amp-course bench on ")
    if start < 0:
        raise ValueError(f"{notebook} printed no benchmark table")
    tables: dict[str, list[dict]] = {}
    parts = re.split(r"^== (\w+) ==\n", text[start:], flags=re.M)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if line.strip()]
        header = re.split(r"\s{2,}", lines[0].strip())
        rows = []
        for line in lines[1:]:
            cells = re.split(r"\s{2,}", line.strip())
            if len(cells) != len(header):
                break  # the table ended (the cell printed something else after it)
            rows.append(dict(zip(header, cells, strict=True)))
        tables[name] = rows
    return tables


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


def _seconds(text: str) -> float:
    value, unit = text.split()
    return float(value) * TIME_UNITS[unit]


def _from_printed(tables: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Lesson 05's printed rows as the bench's own rows (its keys; the figures as printed)."""
    return {
        "matmul": [
            {
                "mode": r["mode"],
                "size": int(r["size"]),
                "tflops": float(r["TFLOP/s"]),
                "fraction_of_peak": float(r["of peak"].rstrip("%")) / 100,
            }
            for r in tables.get("matmul", [])
        ],
        "mnist_cnn": [
            {"mode": r["mode"], "batch_size": int(r["batch"]), "median_s": _seconds(r["step"])}
            for r in tables.get("mnist_cnn", [])
        ],
        "max_batch": [
            {"mode": r["mode"], "max_batch": int(r["max batch"])}
            for r in tables.get("max_batch", [])
        ],
    }


def collect(folder: Path) -> dict:
    """Every figure the GPU results quote, from the run's files."""
    folder = Path(folder)
    report = json.loads((folder / "report.json").read_text())
    bench = bench_report(folder)
    if bench is None or "vit_b16" not in bench["results"]:
        raise FileNotFoundError(f"{folder} holds no bench*/bench.json with the ViT-B/16 matrix")
    vit = {row["mode"]: row for row in bench["results"]["vit_b16"] if "median_s" in row}
    lesson05 = folder / "notebooks" / "05_speed_memory.ipynb"
    other = ("matmul", "mnist_cnn", "max_batch")
    if all(w in bench["results"] for w in other):
        rows = {w: bench["results"][w] for w in other}
        rows_from = ", ".join(sorted({f"`{bench['sources'][w]}`" for w in other}))
    else:
        rows = _from_printed(printed_bench_tables(lesson05))
        rows_from = "lesson 05's executed copy (`notebooks/05_speed_memory.ipynb`), as it printed"
    profile = {
        r["mode"]: r for r in json.loads((folder / "profile-vit_b16/profile.json").read_text())
    }
    batches = {row["mode"]: row["max_batch"] for row in rows["max_batch"] if "max_batch" in row}
    fp32, best = vit["fp32"], vit["bf16+compile+fused"]
    measured = {
        "bf16_time": vit["bf16"]["median_s"] / fp32["median_s"],
        "best_time": best["median_s"] / fp32["median_s"],
        "bf16_mfu": vit["bf16"]["mfu"],
        "best_mfu": best["mfu"],
        "bf16_memory": vit["bf16"]["peak_memory_bytes"] / fp32["peak_memory_bytes"],
        "max_batch": batches["bf16"] / batches["fp32"],
    }
    return {
        "folder": folder,
        "report": report,
        "bench": bench,
        "vit_config": bench["configs"]["vit_b16"],
        "vit": vit,
        "rows": rows,
        "rows_from": rows_from,
        "profile": profile,
        "batches": batches,
        "measured": measured,
        "mnist_source": printed_mnist_source(folder / "notebooks" / "00_scenario.ipynb"),
    }
