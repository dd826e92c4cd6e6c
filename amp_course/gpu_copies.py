"""What the course's committed GPU runs printed, for a lesson on a machine that cannot run a cell.

A GPU run commits its executed copies under ``reports/gpu/<device>/notebooks/``. A cell that needs
hardware the learner lacks (FP8 tensor cores, say) can show what the same cell printed there,
read at run time and labelled with the run's device and versions, never typed into the lesson.
Copies exist in a checkout or a Colab clone; an installed wheel carries none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat

from .executed import read_stamp
from .paths import GPU_REPORTS, NOTEBOOKS, ROOT

REPORTS_DIR = ROOT / GPU_REPORTS
NOTEBOOKS_DIR = ROOT / NOTEBOOKS


@dataclass
class CommittedOutput:
    """What one cell printed in one committed GPU run."""

    run: str  # the run's folder under reports/gpu/
    where: str  # the device and torch version the run's stamp names
    text: str  # the cell's printed output
    same_code: bool  # whether that run's cell held the code the lesson holds now


def _printed(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if "text" in o)


def _cell(nb, cell_id: str):
    return next((c for c in nb.cells if c.get("id") == cell_id), None)


def committed_outputs(
    notebook: str,
    cell_id: str,
    *,
    containing: str,
    reports: Path = REPORTS_DIR,
    notebooks: Path = NOTEBOOKS_DIR,
) -> list[CommittedOutput]:
    """The printed output of cell ``cell_id`` of ``notebook`` in every committed GPU run whose
    output contains ``containing`` (the mark of a result, not of a "skipped" message)."""
    current = None
    if (notebooks / notebook).is_file():
        current = _cell(nbformat.read(notebooks / notebook, as_version=4), cell_id)
    found = []
    for path in sorted(reports.glob(f"*/notebooks/{notebook}")):
        nb = nbformat.read(path, as_version=4)
        cell = _cell(nb, cell_id)
        if cell is None or containing not in _printed(cell):
            continue
        run = path.parent.parent.name
        try:
            stamp = read_stamp(nb)
            where = f"{stamp['device']}, torch {stamp['torch']}, {stamp['date'][:10]}"
        except ValueError:
            where = run
        same = current is not None and cell.source == current.source
        found.append(CommittedOutput(run, where, _printed(cell), same))
    return found
