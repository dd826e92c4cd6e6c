"""Which executed copy each lesson page shows: the newest GPU run's that ran the lesson as it is
now, else the tests' smoke run's. A copy whose markdown or code differs from the current notebook
(exercise blanks aside) is never shown: its outputs would not come from the text and code shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ...paths import EXECUTED, NOTEBOOKS, ROOT, lesson_notebooks
from ..executed import cells_differing
from ..gpu_copies import full_copies, gpu_reports, read_copy, up_to_date


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


def report_record(folder: Path) -> dict:
    """The GPU run's report.json (device, driver, versions, date, each notebook's status)."""
    return json.loads((folder / "report.json").read_text(encoding="utf-8"))


def select(lesson: str, root: Path = ROOT) -> Source:
    """The executed copy for ``lesson``: the newest stamped GPU copy whose run passed and ran the
    lesson as it is now, else the stamped smoke copy in ``executed/`` if it ran the lesson as it is
    now; MissingExecutedCopy says what is missing or stale."""
    committed = nbformat.read(root / NOTEBOOKS / f"{lesson}.ipynb", as_version=4)
    shown, stale = up_to_date(committed, full_copies(lesson, gpu_reports(root)))
    note = ""
    if stale is not None:
        copy, changed = stale
        note = (
            f"The GPU run on {copy.stamp['device']} ({copy.stamp['date'][:10]}) is not shown: the "
            f"lesson has changed since it ran ({changed} cell(s) of markdown or code differ), so "
            "its outputs would not match the text and code on this page."
        )
    if shown is not None:
        return Source(lesson, shown.path, shown.stamp, shown.folder, note)
    path = root / EXECUTED / f"{lesson}.ipynb"
    nb, stamp = read_copy(path)
    if stamp is None:  # say which: a run to make, or a damaged or hand-made file to replace
        why = "not a stamped, readable executed notebook" if path.exists() else "none"
        raise MissingExecutedCopy(f"{EXECUTED}/{lesson}.ipynb: {why}")
    changed = cells_differing(committed, nb)
    if changed:
        raise MissingExecutedCopy(
            f"{EXECUTED}/{lesson}.ipynb: older than the notebook ({changed} cell(s) differ)"
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
