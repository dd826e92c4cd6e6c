"""The committed GPU runs under ``reports/gpu/``: their folders, newest first, and each lesson's
executed copies in them. The website picks the copy a lesson's page shows from here, the README's
results say where each lesson's copy comes from, and the GPU run's plan (``runs.plan``) what a run
of the current notebooks still lacks."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..executed import cells_differing, read_stamp
from ..paths import GPU_REPORTS, ROOT


def run_records(reports: Path) -> list[tuple[Path, dict]]:
    """Every run folder in ``reports`` (a ``reports/gpu``) with its report.json: newest first by
    report date, runs with the lessons' own AMP dtype before passes that forced one."""
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
    """Folders written by the GPU run (``reports/gpu/<device>/``, or those in ``reports``), in
    ``run_records``' order; emulated runs left out."""
    reports = Path(root) / GPU_REPORTS if reports is None else Path(reports)
    # A rehearsal of a smaller GPU (ac.emulation) is left out: its timings are not that GPU's.
    return [folder for folder, record in run_records(reports) if not record.get("emulated")]


def read_copy(path: Path):
    """The executed notebook at ``path`` and its stamp, or (None, None) if absent or unstamped."""
    if not Path(path).exists():
        return None, None
    try:
        nb = nbformat.read(path, as_version=4)
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
    nb: object = field(compare=False, repr=False)  # the nbformat node


def _passed(folder: Path, lesson: str) -> bool:
    runs = json.loads((folder / "report.json").read_text(encoding="utf-8")).get("notebooks", [])
    return any(r.get("notebook") == f"{lesson}.ipynb" and r.get("status") == "passed" for r in runs)


def full_copies(lesson: str, folders: Iterable[Path]) -> Iterator[Copy]:
    """``lesson``'s stamped full-mode copy in each of ``folders`` whose run passed it, in order."""
    for folder in folders:
        path = folder / "notebooks" / f"{lesson}.ipynb"
        nb, stamp = read_copy(path)
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
