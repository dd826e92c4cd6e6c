"""Gradebooks where courses already grade, drawn from the grader's rows: Gradescope's
``results.json`` for one submission, and a CSV that Canvas's gradebook imports.

Gradescope (its autograder specification): ``tests`` holds one entry per graded item with
``name``, ``score``, ``max_score``, ``status`` ("passed" or "failed"), ``output`` and
``visibility``; ``score`` is the submission's total and ``output`` a message shown above the
tests. Canvas (its gradebook import): the identity columns ``Student``, ``ID``, ``SIS User ID``,
``SIS Login ID`` and ``Section``, then one column per assignment; a ``Points Possible`` row under
the header gives each new column its points.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from pathlib import Path

from .reports import EARNED, Row, file_notes, total
from .settings import SettingsError

# What a row's status says when its item could not be graded (the rest were graded, right or not).
NOT_GRADED = {
    "missing": "not in the submission",
    "error": "could not be graded",
    "timeout": "ran out of time",
    "flagged": "flagged for review",
}
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


def gradescope_results(rows: list[Row], visibility: str = "visible") -> dict:
    """Gradescope's results for one student's rows: one test per exercise and quiz item."""
    tests = [
        {
            "name": f"{row.lesson}: {row.item}",
            "score": row.points,
            "max_score": row.max_points,
            "status": "passed" if row.status in EARNED else "failed",
            "output": f"{row.status}: {row.message}" if row.message else row.status,
            "visibility": visibility,
        }
        for row in rows
    ]
    got, of = total(rows)
    problems = [r for r in rows if r.status in NOT_GRADED]
    lines = [f"{got:g} of {of:g} points over {len(rows)} items."]
    for lesson in dict.fromkeys(r.lesson for r in rows):
        lines += [f"{lesson}: {note}" for note in file_notes(r for r in rows if r.lesson == lesson)]
    if problems:
        lines.append(f"{len(problems)} item(s) could not be graded as submitted:")
        lines += [f"- {r.lesson}: {r.item}: {NOT_GRADED[r.status]} ({r.message})" for r in problems]
    return {"score": got, "output": "\n".join(lines), "visibility": visibility, "tests": tests}


def read_roster(path) -> dict[str, dict[str, str]]:
    """A roster CSV: a ``folder`` column (a submission folder's name) beside any of Canvas's
    identity columns (a Canvas gradebook export has them all); refused with one line if not."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            records = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise SettingsError(f"cannot read the roster {path}: {error}") from error
    if not records or "folder" not in records[0]:
        raise SettingsError(
            f"the roster {path} needs a header with a 'folder' column (a submission folder's "
            f"name) and Canvas's identity columns ({', '.join(CANVAS_IDENTITY)})"
        )
    return {
        same_name(r["folder"].strip()): {k: (r.get(k) or "").strip() for k in CANVAS_IDENTITY}
        for r in records
    }


def same_name(name: str) -> str:
    """A folder's name as the roster is matched on it: a Mac writes "Zoë" decomposed (NFD), a
    typed roster composed (NFC); both read alike and are the same student."""
    return unicodedata.normalize("NFC", name)


def check_roster(students, roster: dict) -> None:
    """Refuse, in one line, submission folders the roster does not map (Canvas could not match
    their lines, and their grades would be lost silently)."""
    unknown = [student for student in students if same_name(student) not in roster]
    if unknown:
        raise SettingsError(
            f"submission folders not in the roster: {', '.join(unknown)} (add a line for each, "
            "its submission folder's name in the 'folder' column)"
        )


def canvas_csv(rows: list[Row], lessons, roster: dict | None = None) -> str:
    """The gradebook Canvas imports: a line per student, a column of points per lesson.

    Without a roster the folder name is the student's SIS Login ID (and name); with one, every
    graded folder must be in it (a student Canvas could not match would be lost silently).
    """
    students = sorted({r.student for r in rows})
    if roster is not None:
        check_roster(students, roster)
    columns = [f"amp-course {lesson}" for lesson in lessons]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*CANVAS_IDENTITY, *columns])
    # Every student is graded on the same items; the largest total also covers no student at all.
    possible = [
        max(
            (total(r for r in rows if r.student == s and r.lesson == lesson)[1] for s in students),
            default=0,
        )
        for lesson in lessons
    ]
    writer.writerow(["Points Possible", "", "", "", "", *(f"{p:g}" for p in possible)])
    for student in students:
        who = (
            roster[same_name(student)]
            if roster is not None
            else {"Student": student, "SIS Login ID": student}
        )
        earned = [
            total(r for r in rows if r.student == student and r.lesson == lesson)[0]
            for lesson in lessons
        ]
        writer.writerow([who.get(k, "") for k in CANVAS_IDENTITY] + [f"{e:g}" for e in earned])
    return buffer.getvalue()
