"""What the grader writes: the CSV gradebook and one Markdown feedback file per student.

Both are written only by the grader's own process, atomically (a temporary file renamed over the
old one), so a reader never sees half a file and a crash leaves the previous version intact.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..quiz import atomic_write_text

COLUMNS = ["student", "lesson", "item", "points", "max_points", "status", "message", "isolation"]


def row(student, lesson, item, points, max_points, status, message="", isolation=""):
    return {
        "student": student,
        "lesson": lesson,
        "item": item,
        "points": points,
        "max_points": max_points,
        "status": status,
        "message": message,
        "isolation": isolation,
    }


def write_csv(path, rows: list[dict]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def _cell(text) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|") or " "


def feedback_markdown(student: str, rows: list[dict]) -> str:
    """Per lesson and item: points, status and the checker's message, in plain words."""
    total = sum(float(r["points"]) for r in rows)
    maximum = sum(float(r["max_points"]) for r in rows)
    isolation = sorted({r["isolation"] for r in rows if r["isolation"]})
    lines = [f"# Feedback for {student}", "", f"**Total: {total:g} of {maximum:g} points.**", ""]
    if isolation:
        lines += [f"Graded in sandbox: {', '.join(isolation)}.", ""]
    for lesson in sorted({r["lesson"] for r in rows}):
        mine = [r for r in rows if r["lesson"] == lesson]
        got = sum(float(r["points"]) for r in mine)
        of = sum(float(r["max_points"]) for r in mine)
        lines += [f"## {lesson} ({got:g} of {of:g})", ""]
        lines += ["| item | points | status | what the check says |", "|---|---|---|---|"]
        for r in mine:
            points = f"{float(r['points']):g} / {float(r['max_points']):g}"
            lines.append(
                f"| {_cell(r['item'])} | {points} | {_cell(r['status'])} | {_cell(r['message'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def write_feedback(folder: Path, student: str, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{student}.md"
    atomic_write_text(path, feedback_markdown(student, rows))
    return path
