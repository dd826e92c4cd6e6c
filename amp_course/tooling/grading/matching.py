"""Which notebook of a submission is which lesson, whatever a learner's tools named the file.

Every lesson carries its id in its notebook metadata (``{"amp_course": {"lesson": "01_..."}}``),
and the copies learners hand in keep it: Colab's "Save a copy in Drive", JupyterLab's "Save As"
and the workspace copy all keep a notebook's metadata. The id decides first. A notebook without
one (its cells pasted into a new notebook, or a file that is not a notebook) is matched by its
file name, in any folder and any letter case, with the marks copies add taken off: Colab's
``Copy of``, a browser's `` (1)``, JupyterLab's ``-Copy1``. Hidden files and folders (Jupyter's
``.ipynb_checkpoints``) are never taken.

Where two files claim one lesson, ``RULE`` decides which is graded, and the feedback names both.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..executed import STAMP_KEY, cell_source

# The course's notebook metadata entry (the executed copies' stamp lives there too), holding
# {"lesson": <the lesson's id>} in every lesson.
METADATA_KEY = STAMP_KEY
RULE = "the one with more exercises answered, then the one saved last, then by name"
_COPY_OF = re.compile(r"^(copy of\s+)+", re.IGNORECASE)
COPY_MARKS = re.compile(r"(\s*\(\d+\)|-copy\d*)+$", re.IGNORECASE)
# The largest notebook the grader reads: a lesson with its outputs takes a few MB, and reading a
# notebook costs several times its size in memory, so a hostile one of gigabytes (it zips to a
# few MB) would end the run for every student.
NOTEBOOK_BYTES = 64 * 2**20


def inside(path: Path, folder: Path) -> bool:
    """A regular file of the submission itself: no link, nothing that resolves outside it."""
    return (
        not path.is_symlink() and path.is_file() and path.resolve().is_relative_to(folder.resolve())
    )


MAC_ZIP = "__MACOSX"  # the folder a Mac's zip adds beside the files, holding "._" copies


def hidden(path: Path, folder: Path) -> bool:
    """A file a learner's tools keep out of sight, never handed in as work: a name starting with a
    dot, or one inside such a folder (Jupyter's ``.ipynb_checkpoints`` holds older copies of each
    notebook, which a plain ``cp -r`` makes newer than the notebook itself)."""
    return any(part.startswith(".") for part in path.relative_to(folder).parts)


def lesson_of_metadata(notebook: dict) -> str | None:
    """The lesson id a notebook's metadata carries, or None."""
    metadata = notebook.get("metadata") if isinstance(notebook, dict) else None
    entry = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    lesson = entry.get("lesson") if isinstance(entry, dict) else None
    return lesson if isinstance(lesson, str) and lesson else None


def lesson_of_name(path: Path) -> str:
    """The lesson a file's name says, the marks of a copy taken off, in lower case."""
    stem = path.name[: -len(".ipynb")] if path.name.lower().endswith(".ipynb") else path.stem
    return COPY_MARKS.sub("", _COPY_OF.sub("", stem.strip())).strip().lower()


def too_large(path: Path) -> str | None:
    """Why a notebook is not read (over NOTEBOOK_BYTES), or None."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size <= NOTEBOOK_BYTES:
        return None
    limit = NOTEBOOK_BYTES >> 20
    return f"{path.name} is {size / 2**20:.0f} MiB, over the {limit} MiB the grader reads"


def _read(path: Path) -> dict | None:
    if too_large(path):
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):  # nested past the stack
        return None
    return data if isinstance(data, dict) else None


def _defines(blank: str) -> re.Pattern | None:
    """A pattern for a cell that defines what ``blank`` (an exercise's shipped cell) defines: the
    name of its first ``def`` or ``class``, else of its first assignment at the top level (lesson
    02's ``predictions = {...}``); None for a blank that defines nothing."""
    found = re.search(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", blank, re.M)
    if found:
        return re.compile(rf"^(?:async\s+)?(?:def|class)\s+{found.group(1)}\b", re.M)
    found = re.search(r"^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)", blank, re.M)
    return re.compile(rf"^{found.group(1)}\s*(?::[^=\n]*)?=(?!=)", re.M) if found else None


@dataclass(frozen=True)
class Shipped:
    """What a lesson ships that a learner's copy is compared with: each exercise's blank cell
    ({name: source}) and the source of every code cell (the labs' broken loops define the
    exercises' names too)."""

    blanks: dict[str, str]
    sources: frozenset[str]


def shipped(master) -> Shipped:
    """The blanks and code cells of a master notebook (nbformat or dict)."""
    cells = master["cells"]
    return Shipped(
        {
            cell["metadata"]["exercise"]["name"]: cell_source(cell)
            for cell in cells
            if isinstance(cell["metadata"].get("exercise"), dict)
            and "name" in cell["metadata"]["exercise"]
        },
        frozenset(cell_source(c).strip() for c in cells if c.get("cell_type") == "code"),
    )


def _answered(notebook: dict | None, lesson: Shipped) -> int:
    """How many of the lesson's exercises a notebook answers: a cell that differs from the blank
    the lesson ships, where the exercise's cell is (its metadata), or a cell the lesson does not
    ship that defines an exercise's name again (cells pasted into a new notebook lose their
    metadata; the kernel grades them all the same)."""
    if notebook is None:
        return 0
    blanks = lesson.blanks
    defines = {name: _defines(blank) for name, blank in blanks.items()}
    answered = set()
    cells = notebook.get("cells")
    for cell in cells if isinstance(cells, list) else ():  # any JSON a learner's file holds
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        metadata = cell.get("metadata")
        exercise = metadata.get("exercise") if isinstance(metadata, dict) else None
        name = exercise.get("name") if isinstance(exercise, dict) else None
        name = name if isinstance(name, str) else None
        source = cell_source(cell).strip()
        if name in blanks:
            answered.update([name] if source != blanks[name].strip() else [])
        elif source not in lesson.sources:
            answered.update(n for n, d in defines.items() if d and d.search(source))
    return len(answered)


@dataclass(frozen=True)
class Found:
    """The file graded for one lesson (None: no file claims it) and the others that claimed it."""

    lesson: str
    path: Path | None
    others: tuple[Path, ...] = ()
    links: tuple[Path, ...] = ()  # links that would have matched: never graded

    def note(self, folder: Path) -> str:
        """One sentence naming the file graded, and why when several claimed the lesson."""

        def name(path: Path) -> str:
            return f"`{path.relative_to(folder)}`"

        if self.path is None:
            return ""
        said = f"graded {name(self.path)}"
        if self.others:
            also = ", ".join(name(p) for p in self.others)
            said += f"; also handed in for {self.lesson}: {also} (of several, graded is {RULE})"
        return said + "."


def find(folder: Path, masters: dict[str, Shipped]) -> dict[str, Found]:
    """For each lesson of ``masters`` ({lesson: what it ships}), the submission's file
    graded for it. A notebook's metadata id decides; without one, its name does. Links and files
    outside the folder are never graded."""
    folder = Path(folder)
    claims: dict[str, list[tuple[Path, dict | None]]] = {lesson: [] for lesson in masters}
    links: dict[str, list[Path]] = {lesson: [] for lesson in masters}
    by_name = {lesson.lower(): lesson for lesson in masters}
    for path in sorted(folder.rglob("*")):
        if not path.name.lower().endswith(".ipynb") or hidden(path, folder):
            continue
        if not inside(path, folder):
            lesson = by_name.get(lesson_of_name(path))
            if lesson is not None and (path.is_symlink() or path.is_file()):
                links[lesson].append(path)
            continue
        notebook = _read(path)
        lesson = lesson_of_metadata(notebook) if notebook else None
        if lesson is None:
            lesson = by_name.get(lesson_of_name(path))
        if lesson in claims:
            claims[lesson].append((path, notebook))
    found = {}
    for lesson, files in claims.items():
        ranked = sorted(
            files,
            key=lambda f: (-_answered(f[1], masters[lesson]), -f[0].stat().st_mtime, str(f[0])),
        )
        paths = [path for path, _ in ranked]
        found[lesson] = Found(
            lesson, paths[0] if paths else None, tuple(paths[1:]), tuple(links[lesson])
        )
    return found


def unclaimed(folder: Path, found: dict[str, Found]) -> str:
    """The notebooks of a submission that no lesson of the run took, as a clause, or "": each
    with the lesson its metadata names, where it names one (a lesson this run does not grade,
    handed in under another lesson's file name)."""
    taken = {p for f in found.values() for p in (f.path, *f.others, *f.links) if p is not None}
    names = []
    for path in sorted(folder.rglob("*.ipynb")):
        if path in taken or hidden(path, folder):
            continue
        lesson = lesson_of_metadata(_read(path) or {})
        said = f" (its metadata names lesson {lesson})" if lesson else ""
        names.append(f"{path.relative_to(folder)}{said}")
    if not names:
        return ""
    return (
        "; it holds notebooks that no lesson of this run claims by the id in their metadata or "
        f"by their file name: {', '.join(names)}"
    )
