"""The course's committed GPU runs under ``reports/gpu/``, read in one place: their folders, newest
first, and each lesson's executed copies in them.

A lesson's copy in a run counts when the run is a GPU's own (a rehearsal of a smaller GPU, ``ac.
emulation``, is left out: its outputs are neither the GPU it ran on nor the one it rehearsed),
its report.json is readable (an interrupted run's copies are not trusted), the copy is stamped in
full mode and the run passed the lesson. The website picks the copy a lesson's page shows from
here, the GPU guide's results (docs/gpu-run.md) say where each lesson's copy comes from, the GPU
run's plan what a run of the current notebooks still lacks, and a lesson that cannot run a cell
here shows what the same cell printed in such a copy (``amp_course.gpu_runs``, the one learner-
facing call on this reader). Copies exist in a checkout or a Colab clone; an installed wheel
carries none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import GPU_REPORTS, ROOT
from .executed import cells_differing, read_stamp


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
