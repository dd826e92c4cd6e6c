"""How long each lesson takes in smoke mode on this machine: the benchmark behind the course's
target "each notebook in smoke mode well under a minute" on a 2-core CPU. The tests only guard
against a hanging cell; a timed test would fail on a busy machine, a benchmark records.

Run as ``make bench-smoke`` or ``amp-course smoke-bench``: the lessons run one after
another (every core to each), and ``reports/smoke/<device>.json`` and ``.md`` keep the times with
the machine they were measured on.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from ...device import machine_record
from ...paths import ROOT, SMOKE_REPORTS, lesson_notebooks
from .. import machine_reports
from .execute import run_notebooks

TARGET_S = 60.0  # "well under a minute": the table marks a lesson at or over it
HANG_GUARD_S = 300  # a cell running longer than this is stopped and its lesson marked failed


def report(results: list[dict], record: dict, target_s: float = TARGET_S) -> dict:
    """The benchmark record: the machine, the target, each lesson's time and whether it met it."""
    rows = [
        {
            **r,
            "met": r["status"] == "passed" and r["seconds"] is not None and r["seconds"] < target_s,
        }
        for r in results
    ]
    timed = [r["seconds"] for r in rows if r["seconds"] is not None]
    return {
        **record,
        "cpu_count": os.cpu_count(),
        "target_s": target_s,
        "total_s": round(sum(timed), 1),
        "slowest_s": max(timed, default=None),
        "all_met": all(r["met"] for r in rows),
        "notebooks": rows,
    }


def markdown(bench: dict) -> str:
    """The record as a table, with the machine and versions it was measured with."""
    lines = [
        f"# Lessons in smoke mode on {bench['device']}",
        "",
        f"{bench['cpu_count']} cores, torch {bench['versions']['torch']}, measured "
        f"{bench['date']}. Target: each lesson under {bench['target_s']:.0f} s. Papermill's "
        "duration of each run, kernel start included; the lessons run one after another.",
        "",
        "| lesson | seconds | under target |",
        "| --- | ---: | --- |",
    ]
    for row in bench["notebooks"]:
        seconds = "-" if row["seconds"] is None else f"{row['seconds']:.1f}"
        met = "yes" if row["met"] else f"**no** ({row['status']})"
        lines.append(f"| {Path(row['notebook']).stem} | {seconds} | {met} |")
    lines += ["", f"Total {bench['total_s']:.1f} s; slowest {bench['slowest_s']} s.", ""]
    return "\n".join(lines)


def measure(notebooks: list[Path] | None = None) -> dict:
    """Each lesson (every one by default) run in smoke mode on the CPU, one after another; the
    benchmark record (``report``)."""
    record = machine_record("cpu")
    with tempfile.TemporaryDirectory() as tmp:
        results = run_notebooks(
            notebooks or lesson_notebooks(), Path(tmp), HANG_GUARD_S, smoke=True, device="cpu"
        )
    return report(results, record)


def write(bench: dict, out: Path) -> list[Path]:
    """``<device>.json`` and ``<device>.md`` in ``out``, for the machine the record names."""
    return machine_reports.write(bench, markdown(bench), out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amp-course smoke-bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / SMOKE_REPORTS)
    parser.add_argument("--notebooks", nargs="*", type=Path, default=None)
    args = parser.parse_args(argv)
    bench = measure(args.notebooks)
    write(bench, args.out)
    print(markdown(bench))
    return 0 if bench["all_met"] else 1
