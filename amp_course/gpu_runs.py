"""What the course's committed GPU runs printed, for a lesson: where this machine cannot run a cell
(no FP8 tensor cores, say), the lesson shows what the same cell printed in a GPU run's copy,
labelled with that run's device and versions, never typed into the lesson. The runs and their
copies are read by the tooling's one reader (``amp_course.tooling.gpu_copies``); copies exist in a
checkout or a Colab clone, and an installed wheel carries none."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .paths import GPU_REPORTS, NOTEBOOKS, ROOT
from .tooling.executed import cell_source, printed
from .tooling.gpu_copies import full_copies, gpu_reports


@dataclass
class CommittedOutput:
    """What one cell printed in one committed GPU run."""

    run: str  # the run's folder under reports/gpu/
    where: str  # the device and torch version the run's stamp names
    text: str  # the cell's printed output
    same_code: bool  # whether that run's cell held the code the lesson holds now


def _cell(nb: dict, cell_id: str):
    return next((c for c in nb["cells"] if c.get("id") == cell_id), None)


def committed_outputs(
    notebook: str,
    cell_id: str,
    *,
    containing: str,
    reports: Path = ROOT / GPU_REPORTS,
    notebooks: Path = ROOT / NOTEBOOKS,
) -> list[CommittedOutput]:
    """The printed output of cell ``cell_id`` of ``notebook`` in each GPU run's copy of it
    (``full_copies`` of ``gpu_reports``, newest first) whose output contains ``containing`` (the
    mark of a result, not of a "skipped" message)."""
    current = None
    if (notebooks / notebook).is_file():
        current = _cell(json.loads((notebooks / notebook).read_text(encoding="utf-8")), cell_id)
    found = []
    for copy in full_copies(Path(notebook).stem, gpu_reports(reports=reports), node=False):
        cell = _cell(copy.nb, cell_id)
        text = "" if cell is None else printed(cell)
        if containing not in text:
            continue
        stamp = copy.stamp
        where = f"{stamp['device']}, torch {stamp['torch']}, {stamp['date'][:10]}"
        same = current is not None and cell_source(cell) == cell_source(current)
        found.append(CommittedOutput(copy.folder.name, where, text, same))
    return found
