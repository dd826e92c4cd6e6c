"""The course's committed GPU runs under ``reports/gpu/``, read in one place: their folders, newest
first, each lesson's executed copies in them, and what a cell printed there.

A lesson's copy in a run counts when the run is a GPU's own (a rehearsal of a smaller GPU, ``ac.
emulation``, is left out: its outputs are neither the GPU it ran on nor the one it rehearsed),
its report.json is readable (an interrupted run's copies are not trusted), the copy is stamped in
full mode and the run passed the lesson. The website picks the copy a lesson's page shows from
here, the GPU guide's results (docs/gpu-run.md) say where each lesson's copy comes from, the GPU
run's plan what a run of the current notebooks still lacks, and a lesson on a machine that cannot
run a cell (no FP8 tensor cores, say) shows what the same cell printed in such a copy
(``committed_outputs``), labelled with the run's device and versions, never typed into the lesson.
Copies exist in a checkout or a Colab clone; an installed wheel carries none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .executed import cells_differing, printed, read_stamp
from .paths import GPU_REPORTS, NOTEBOOKS, ROOT


def run_records(reports: Path) -> list[tuple[Path, dict]]:
    """Every run folder in ``reports`` (a ``reports/gpu``) with its report.json, rehearsals
    included: newest first by report date, runs with the lessons' own AMP dtype before passes that
    forced one."""
    found = []
    for report in Path(reports).glob("*/report.json"):
        try:
            record = json.loads(report.read_text(encoding="utf-8"))
        except ValueError:
            continue  # an interrupted run: its copies are not trusted
        # A pass with a forced AMP dtype (the fp16 pass a T4 takes) ranks after the lessons' own.
        own = record.get("amp_dtype", "lesson default") == "lesson default"
        found.append(
            ((own, str(record.get("date", "")), report.parent.name), report.parent, record)
        )
    found.sort(key=lambda item: item[0], reverse=True)
    return [(folder, record) for _, folder, record in found]


def gpu_reports(root: Path = ROOT, reports: Path | None = None) -> list[Path]:
    """The folders of GPU runs (``reports/gpu/<device>/``, or those in ``reports``), in
    ``run_records``' order; rehearsals left out."""
    reports = Path(root) / GPU_REPORTS if reports is None else Path(reports)
    return [folder for folder, record in run_records(reports) if not record.get("emulated")]


def read_copy(path: Path, node: bool = True):
    """The executed notebook at ``path`` and its stamp, or (None, None) if absent or unstamped.

    ``node=False`` reads it as the plain JSON dict, without importing nbformat: its schema
    validator pulls in jsonschema's format checkers, seconds of a lesson's run on a slow CPU for
    one file the course wrote itself."""
    if not Path(path).exists():
        return None, None
    try:
        if node:
            import nbformat

            nb = nbformat.read(path, as_version=4)
        else:
            nb = json.loads(Path(path).read_text(encoding="utf-8"))
        return nb, read_stamp(nb)
    except (ValueError, OSError):
        return None, None


@dataclass(frozen=True)
class Copy:
    """A lesson's stamped executed copy in a committed GPU run's folder."""

    lesson: str
    path: Path
    stamp: dict = field(compare=False)
    folder: Path
    nb: object = field(compare=False, repr=False)  # the nbformat node (or its JSON dict)


def _passed(folder: Path, lesson: str) -> bool:
    runs = json.loads((folder / "report.json").read_text(encoding="utf-8")).get("notebooks", [])
    return any(r.get("notebook") == f"{lesson}.ipynb" and r.get("status") == "passed" for r in runs)


def full_copies(lesson: str, folders: Iterable[Path], node: bool = True) -> Iterator[Copy]:
    """``lesson``'s stamped full-mode copy in each of ``folders`` whose run passed it, in order
    (``node``: as ``read_copy`` reads it)."""
    for folder in folders:
        path = folder / "notebooks" / f"{lesson}.ipynb"
        nb, stamp = read_copy(path, node)
        if stamp and stamp["mode"] == "full" and _passed(folder, lesson):
            yield Copy(lesson, path, stamp, folder, nb)


def up_to_date(committed, copies: Iterable[Copy]) -> tuple[Copy | None, tuple[Copy, int] | None]:
    """The first of ``copies`` that ran the notebook ``committed`` as it is now (None: none did),
    and the first before it that did not, with how many cells differ (None: none)."""
    stale = None
    for copy in copies:
        changed = cells_differing(committed, copy.nb)
        if not changed:
            return copy, stale
        stale = stale or (copy, changed)
    return None, stale


@dataclass
class CommittedOutput:
    """What one cell printed in one committed GPU run."""

    run: str  # the run's folder under reports/gpu/
    where: str  # the device and torch version the run's stamp names
    text: str  # the cell's printed output
    same_code: bool  # whether that run's cell held the code the lesson holds now


def _cell(nb: dict, cell_id: str):
    return next((c for c in nb["cells"] if c.get("id") == cell_id), None)


def _source(cell: dict) -> str:
    """A cell's source as one string (notebook JSON may store it as a list of lines)."""
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


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
        if cell is None or containing not in printed(cell):
            continue
        stamp = copy.stamp
        where = f"{stamp['device']}, torch {stamp['torch']}, {stamp['date'][:10]}"
        same = current is not None and _source(cell) == _source(current)
        found.append(CommittedOutput(copy.folder.name, where, printed(cell), same))
    return found
