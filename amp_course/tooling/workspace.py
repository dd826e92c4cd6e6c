"""The learner's copy of the lessons. ``make course`` opens JupyterLab on ``workspace/``, a
git-ignored copy of ``notebooks/``: the outputs, answers and edits a learner saves stay there, the
tracked lessons never change, and ``git pull`` updates the course without a conflict.

``prepare`` copies each lesson the workspace lacks (a lesson a ``git pull`` adds arrives on the
next ``make course``) and never overwrites a file; it names the lessons the course has changed
since they were copied. ``fresh`` (``make fresh LESSON=00``) puts a lesson back as the course
ships it, after moving the learner's copy to ``workspace/old/``. Run as ``amp-course workspace``.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import shutil
from pathlib import Path

from ..paths import NOTEBOOKS, ROOT, lesson_notebooks

WORKSPACE = Path("workspace")
OLD = "old"  # where ``fresh`` keeps the copies it replaces
RECORD = ".copied.json"  # {lesson file: SHA-256 of the course's notebook when it was copied}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record(folder: Path) -> dict[str, str]:
    try:
        return json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _save_record(folder: Path, record: dict[str, str]) -> None:
    (folder / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def prepare(root: Path = ROOT) -> tuple[list[Path], list[str]]:
    """Copy into ``root/workspace`` every lesson of ``root/notebooks`` it lacks. Returns the
    copies made and the lessons whose course notebook changed since the learner's copy was made
    (each left as it is)."""
    folder = Path(root) / WORKSPACE
    folder.mkdir(exist_ok=True)
    record, copied, changed = _record(folder), [], []
    for lesson in lesson_notebooks(root):
        target = folder / lesson.name
        if not target.exists():
            shutil.copy2(lesson, target)
            record[lesson.name] = _digest(lesson)
            copied.append(target)
        elif record.get(lesson.name) not in (None, _digest(lesson)):
            changed.append(lesson.stem)
    _save_record(folder, record)
    return copied, changed


def find_lesson(name: str, root: Path = ROOT) -> Path:
    """The course notebook a learner's ``name`` stands for: ``00``, ``00_scenario`` or
    ``00_scenario.ipynb``; an unknown or ambiguous name lists the lessons."""
    lessons = lesson_notebooks(root)
    key = Path(str(name).strip()).stem
    found = [p for p in lessons if p.stem == key] or [p for p in lessons if p.stem.startswith(key)]
    found = found if key else []  # "" starts every name: no lesson, not several
    if len(found) != 1:
        names = ", ".join(p.stem for p in lessons)
        why = "matches several lessons" if found else "is no lesson"
        raise ValueError(f"{name!r} {why}. The lessons: {names}.")
    return found[0]


def fresh(name: str, root: Path = ROOT, now: datetime.datetime | None = None) -> tuple[Path, Path]:
    """Put lesson ``name`` back in the workspace as the course ships it. The learner's copy, if
    any, moves to ``workspace/old/<lesson>-<time>.ipynb`` first. Returns (the fresh copy, where
    the learner's went, or None)."""
    lesson = find_lesson(name, root)
    folder = Path(root) / WORKSPACE
    folder.mkdir(exist_ok=True)
    target, kept = folder / lesson.name, None
    if target.exists():
        stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
        kept = folder / OLD / f"{lesson.stem}-{stamp}.ipynb"
        kept.parent.mkdir(exist_ok=True)
        if kept.exists():
            raise FileExistsError(f"{kept} exists already: nothing was moved; try again")
        target.rename(kept)
    shutil.copy2(lesson, target)
    record = _record(folder)
    record[lesson.name] = _digest(lesson)
    _save_record(folder, record)
    return target, kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amp-course workspace", description=__doc__)
    parser.add_argument(
        "--fresh",
        metavar="LESSON",
        action="append",
        default=[],
        help="put this lesson back as the course ships it (e.g. 00 or 03_grad_scaler); your "
        "copy moves to workspace/old/",
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the course's checkout (default: this package's)"
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    shipped = root / NOTEBOOKS
    if not lesson_notebooks(root):  # not a course: nothing to copy, nothing to leave there
        print(f"error: {args.root} is not the course's checkout: it has no {NOTEBOOKS}/ of lessons")
        return 2
    if (root / WORKSPACE).exists() and not (root / WORKSPACE).is_dir():
        print(
            f"error: {root / WORKSPACE} is a file; the lessons' copy needs that name for a folder"
        )
        return 2
    if args.fresh:
        for name in args.fresh:
            try:
                target, kept = fresh(name, root)
            except (ValueError, FileExistsError) as error:
                print(f"error: {error}")
                return 2
            moved = f"; your copy is now {kept.relative_to(root)}" if kept else ""
            print(f"{target.relative_to(root)}: fresh from {shipped.relative_to(root)}/{moved}")
        return 0
    copied, changed = prepare(root)
    if copied:
        print(f"Copied {len(copied)} lesson(s) into {WORKSPACE}/, your copy of the course.")
    print(
        f"Your work lives in {WORKSPACE}/ (git ignores it); {NOTEBOOKS}/ keeps the lessons as "
        "the course ships them."
    )
    for stem in changed:
        print(
            f"The course has updated {stem} since you copied it; `make fresh LESSON={stem}` gets "
            f"the new one (yours moves to {WORKSPACE}/{OLD}/)."
        )
    return 0
