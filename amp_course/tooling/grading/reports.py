"""What the grader writes: the CSV gradebook, one Markdown feedback file per student, and the
summary table it prints at the end, all from the same rows (``Row``) and the same totals
(``total``).

Both files are written only by the grader's own process, atomically (a temporary file renamed
over the old one), so a reader never sees half a file and a crash leaves the previous version
intact.
"""

from __future__ import annotations

import csv
import io
import shutil
from dataclasses import dataclass
from pathlib import Path

from ...quiz import atomic_write_text

COLUMNS = [
    "student",
    "lesson",
    "item",
    "points",
    "max_points",
    "status",
    "message",
    "isolation",
    "file",
]
# The statuses that earn an item's points; every other status earns none. No check gives part
# marks, so a row's points follow from its status and cannot disagree with it.
EARNED = frozenset({"passed", "correct"})


@dataclass(frozen=True)
class Row:
    """One gradebook line: one student's item, what it is worth, and how it went."""

    student: str
    lesson: str
    item: str  # an exercise's name, or "quiz:<question id>"
    max_points: float  # the item's worth: ``CheckItem.points``, or the key's for a question
    status: str
    message: str = ""
    isolation: str = ""  # where the kernels ran (``Sandbox.label``)
    file: str = ""  # which file of the submission was graded (``matching.Found.note``)

    def __post_init__(self):
        object.__setattr__(self, "max_points", float(self.max_points))

    @property
    def points(self) -> float:
        """What the item earned: all of its points when its status earns them, else none."""
        return self.max_points if self.status in EARNED else 0.0

    def as_dict(self) -> dict:
        """The row as the CSV holds it, column by column (``COLUMNS``)."""
        return {name: getattr(self, name) for name in COLUMNS}


MESSAGE_LIMIT = 4000  # characters of one message kept: a bound for hostile output, not a display


def bounded(text, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` whole, or, beyond ``limit`` characters (a submission printing megabytes), cut
    at a word with a visible mark that says how much was left out: never cut silently."""
    text = str(text)
    if len(text) <= limit:
        return text
    kept = text[:limit]
    kept = kept.rsplit(" ", 1)[0] if " " in kept else kept  # a whole word last
    return f"{kept} [… {len(text) - len(kept)} more characters cut]"


def total(rows) -> tuple[float, float]:
    """(points earned, points possible) over ``rows``: every total the grader shows."""
    rows = list(rows)
    return sum(r.points for r in rows), sum(r.max_points for r in rows)


def keep_previous(path: Path) -> None:
    """A gradebook already at ``path`` copied to ``<path>.bak`` before a run rewrites it."""
    path = Path(path)
    if path.exists():
        shutil.copyfile(path, path.with_name(f"{path.name}.bak"))


def write_csv(path, rows: list[Row]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(r.as_dict() for r in rows)
    atomic_write_text(path, buffer.getvalue())


def _cell(text) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|") or " "


def feedback_markdown(student: str, rows: list[Row]) -> str:
    """Per lesson and item: points, status and the checker's message, in plain words."""
    got, of = total(rows)
    isolation = sorted({r.isolation for r in rows if r.isolation})
    lines = [f"# Feedback for {student}", "", f"**Total: {got:g} of {of:g} points.**", ""]
    if isolation:
        lines += [f"Isolation: {', '.join(isolation)}.", ""]
    for lesson in sorted({r.lesson for r in rows}):
        mine = [r for r in rows if r.lesson == lesson]
        got, of = total(mine)
        lines += [f"## {lesson} ({got:g} of {of:g})", ""]
        files = file_notes(mine)
        lines += [f"{note[0].upper()}{note[1:]}" for note in files] + ([""] if files else [])
        lines += ["| item | points | status | what the check says |", "|---|---|---|---|"]
        for r in mine:
            points = f"{r.points:g} / {r.max_points:g}"
            lines.append(f"| {_cell(r.item)} | {points} | {_cell(r.status)} | {_cell(r.message)} |")
        lines.append("")
    return "\n".join(lines)


def file_notes(rows) -> list[str]:
    """The rows' notes of the files graded, each once; a note another one extends (the answer
    file graded, and the same with the file that answers a question otherwise) is left out."""
    notes = list(dict.fromkeys(r.file for r in rows if r.file))
    return [
        n for n in notes if not any(o != n and o.startswith(n.removesuffix(".")) for o in notes)
    ]


def write_feedback(folder: Path, student: str, rows: list[Row]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{student}.md"
    atomic_write_text(path, feedback_markdown(student, rows))
    return path


SUMMARY_COUNTS = ("flagged", "timeout", "error", "missing")  # statuses the summary counts


def summary(rows: list[Row], box) -> str:
    """The run's summary: students by points (best first) with what needs a look, and where the
    kernels ran (``box``, the sandbox)."""
    students = sorted({r.student for r in rows})
    table = []
    for student in students:
        mine = [r for r in rows if r.student == student]
        got, of = total(mine)
        counts = [sum(r.status == status for r in mine) for status in SUMMARY_COUNTS]
        table.append((student, f"{got:g} / {of:g}", *(str(c) if c else "" for c in counts), got))
    table.sort(key=lambda line: (-line[-1], line[0]))
    header = ("student", "points", *(f"{s} items" for s in SUMMARY_COUNTS))
    lines = [header, *(line[:-1] for line in table)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    flagged = [line[0] for line in table if line[2]]
    out = [f"Summary: {len(students)} submission(s); isolation: {box.label}", *text]
    if flagged:
        out.append(f"Flagged for review (see their messages): {', '.join(flagged)}")
    return "\n".join(out)
