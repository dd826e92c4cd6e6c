"""Which executed copy each lesson page shows: the newest GPU run's, else the tests' smoke run's."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..executed import read_stamp
from ..paths import lesson_notebooks

ROOT = Path(__file__).resolve().parents[2]


class MissingExecutedCopy(FileNotFoundError):
    """A lesson has no usable executed copy; the message says how to make one."""


@dataclass(frozen=True)
class Source:
    """One lesson's executed copy, its stamp, and the GPU report folder it belongs to (if any)."""

    lesson: str
    path: Path
    stamp: dict
    report: Path | None = None

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


def _stamped(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        return read_stamp(nbformat.read(path, as_version=4))
    except (ValueError, OSError):
        return None


def _passed(folder: Path, lesson: str) -> bool:
    runs = report_record(folder).get("notebooks", [])
    return any(r.get("notebook") == f"{lesson}.ipynb" and r.get("status") == "passed" for r in runs)


def select(lesson: str, root: Path = ROOT) -> Source | None:
    """The executed copy for ``lesson``: the newest stamped GPU copy whose run passed, else the
    stamped smoke copy in ``executed/``, else None."""
    for folder in gpu_reports(root):
        path = folder / "notebooks" / f"{lesson}.ipynb"
        stamp = _stamped(path)
        if stamp and stamp["mode"] == "full" and _passed(folder, lesson):
            return Source(lesson, path, stamp, folder)
    path = root / "executed" / f"{lesson}.ipynb"
    stamp = _stamped(path)
    return Source(lesson, path, stamp) if stamp else None


def select_all(root: Path = ROOT) -> list[Source]:
    """Every lesson's source; MissingExecutedCopy names the lessons that have none."""
    chosen = {lesson: select(lesson, root) for lesson in lessons(root)}
    missing = [f"executed/{lesson}.ipynb" for lesson, source in chosen.items() if source is None]
    if missing:
        raise MissingExecutedCopy(
            f"No stamped executed copy of: {', '.join(missing)}. Run `make test` (or only the "
            "lessons' smoke run, `make executed`) first: it executes every lesson in smoke mode "
            "and writes the stamped copies the site shows."
        )
    return list(chosen.values())
