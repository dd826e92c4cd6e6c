"""Which executed copy each lesson page shows: the newest GPU run's that ran the lesson as it is
now, else the tests' smoke run's. A copy whose markdown or code differs from the current notebook
(exercise blanks aside) is never shown: its outputs would not come from the text and code shown.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..executed import read_stamp
from ..paths import ROOT, lesson_notebooks


class MissingExecutedCopy(FileNotFoundError):
    """A lesson has no usable executed copy; the message says how to make one."""


@dataclass(frozen=True)
class Source:
    """One lesson's executed copy, its stamp, and the GPU report folder it belongs to (if any)."""

    lesson: str
    path: Path
    stamp: dict
    report: Path | None = None
    note: str = ""  # why a newer GPU run is not shown, if one is not

    @property
    def on_gpu(self) -> bool:
        return self.report is not None


def lessons(root: Path = ROOT) -> list[str]:
    """The lessons' names, in course order (the committed notebooks' stems)."""
    return [path.stem for path in lesson_notebooks(root)]


def gpu_reports(root: Path = ROOT) -> list[Path]:
    """Folders written by the GPU run (``reports/gpu/<device>/``), newest first by report date,
    runs with the lessons' own AMP dtype before passes that forced one; emulated runs left out."""
    found = []
    for report in (root / "reports" / "gpu").glob("*/report.json"):
        try:
            record = json.loads(report.read_text(encoding="utf-8"))
        except ValueError:
            continue  # an interrupted run: its copies are not trusted
        if record.get("emulated"):
            continue  # a rehearsal of a smaller GPU (ac.emulation): its timings are not that GPU's
        # A pass with a forced AMP dtype (the fp16 pass a T4 takes) ranks after the lessons' own.
        own = record.get("amp_dtype", "lesson default") == "lesson default"
        found.append(((own, str(record.get("date", ""))), report.parent))
    return [folder for _, folder in sorted(found, key=lambda item: item[0], reverse=True)]


def report_record(folder: Path) -> dict:
    """The GPU run's report.json (device, driver, versions, date, each notebook's status)."""
    return json.loads((folder / "report.json").read_text(encoding="utf-8"))


def _read(path: Path):
    """The executed notebook at ``path`` and its stamp, or (None, None) if absent or unstamped."""
    if not path.exists():
        return None, None
    try:
        nb = nbformat.read(path, as_version=4)
        return nb, read_stamp(nb)
    except (ValueError, OSError):
        return None, None


def _passed(folder: Path, lesson: str) -> bool:
    runs = report_record(folder).get("notebooks", [])
    return any(r.get("notebook") == f"{lesson}.ipynb" and r.get("status") == "passed" for r in runs)


def shown_cells(nb) -> list[tuple[str, str]]:
    """What a page shows of a notebook as written: each cell's type and source, exercise cells
    (blanks in the notebook, solutions in a run) and the parameters papermill injects aside."""
    aside = {"exercise", "injected-parameters"}
    return [
        (cell.cell_type, cell.source)
        for cell in nb.cells
        if not aside & set(cell.get("metadata", {}).get("tags", []))
    ]


def cells_differing(committed, executed) -> int:
    """How many cells of the notebook and of the run's copy differ in markdown or code (0: the
    copy ran the lesson as it is now)."""
    matcher = difflib.SequenceMatcher(None, shown_cells(committed), shown_cells(executed), False)
    return sum(
        max(end_a - start_a, end_b - start_b)  # a changed cell counts once, not removed and added
        for tag, start_a, end_a, start_b, end_b in matcher.get_opcodes()
        if tag != "equal"
    )


def select(lesson: str, root: Path = ROOT) -> Source:
    """The executed copy for ``lesson``: the newest stamped GPU copy whose run passed and ran the
    lesson as it is now, else the stamped smoke copy in ``executed/`` if it ran the lesson as it is
    now; MissingExecutedCopy says what is missing or stale."""
    committed = nbformat.read(root / "notebooks" / f"{lesson}.ipynb", as_version=4)
    note = ""
    for folder in gpu_reports(root):
        path = folder / "notebooks" / f"{lesson}.ipynb"
        nb, stamp = _read(path)
        if not (stamp and stamp["mode"] == "full" and _passed(folder, lesson)):
            continue
        changed = cells_differing(committed, nb)
        if not changed:
            return Source(lesson, path, stamp, folder, note)
        note = note or (
            f"The GPU run on {stamp['device']} ({stamp['date'][:10]}) is not shown: the lesson has "
            f"changed since it ran ({changed} cell(s) of markdown or code differ), so its outputs "
            "would not match the text and code on this page."
        )
    path = root / "executed" / f"{lesson}.ipynb"
    nb, stamp = _read(path)
    if stamp is None:
        raise MissingExecutedCopy(f"executed/{lesson}.ipynb: none, or not stamped")
    changed = cells_differing(committed, nb)
    if changed:
        raise MissingExecutedCopy(
            f"executed/{lesson}.ipynb: older than the notebook ({changed} cell(s) differ)"
        )
    return Source(lesson, path, stamp, None, note)


def select_all(root: Path = ROOT) -> list[Source]:
    """Every lesson's source; MissingExecutedCopy names the lessons that have none up to date."""
    chosen, problems = [], []
    for lesson in lessons(root):
        try:
            chosen.append(select(lesson, root))
        except MissingExecutedCopy as problem:
            problems.append(str(problem))
    if problems:
        raise MissingExecutedCopy(
            f"No up-to-date stamped executed copy: {'; '.join(problems)}. Run `make executed` "
            "(or `make test`) first: it executes every lesson in smoke mode and writes the "
            "stamped copies the site shows."
        )
    return chosen
