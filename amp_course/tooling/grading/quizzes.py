"""Quiz grading: each student's answer files against the instructor's key."""

from __future__ import annotations

from pathlib import Path

from ... import quiz as _quiz
from .matching import inside, lesson_of_name
from .reports import Row, bounded


def _lesson_of(file: Path) -> str:
    """The lesson an answer file's name says (lower case, a copy's marks off), else "*"."""
    name = file.name
    if not name.lower().endswith(".answers.json"):
        return "*"
    return lesson_of_name(file.with_name(name[: -len(".answers.json")] + ".ipynb"))


def answer_sets(folder: Path):
    """Merged answers per lesson, and per-lesson (or "*") messages for unreadable files."""
    answers, problems = {}, {}
    files = sorted(folder.rglob("*.answers.json")) + sorted(folder.rglob("amp-course-answers.json"))
    for file in files:
        lesson = _lesson_of(file)
        if not inside(file, folder):
            problems[lesson] = f"{file.name} is a link, not a file of this submission; not graded"
            continue
        try:
            data = _quiz.read_answers(file)
        except (_quiz.AnswerFileError, OSError) as error:
            problems[lesson] = f"unreadable answer file {file.name}: {error}"
            continue
        for name, records in data.get("lessons", {}).items():
            answers.setdefault(name, {}).update(records)
    return answers, problems


def wrong_message(entry: dict, value) -> str:
    """One line for a wrong answer: what was answered and, for choices, what the key's author
    says about them; never which answer is right."""
    choices, notes = entry.get("choices") or [], (entry.get("explanations") or {}).get("choices")
    if entry["type"] in ("single", "multiple") and choices:
        picked = [value] if entry["type"] == "single" else list(value)
        said = [
            f'"{choices[i]}"' + (f": {notes[i]}" if notes and i < len(notes) and notes[i] else "")
            for i in picked
        ]
        return bounded(f"wrong: you chose {'; '.join(said) or 'nothing'}")
    if entry["type"] == "numeric":
        return f"wrong: {value:g} is not within the key's tolerance of the answer"
    return f"wrong: the key does not accept {bounded(repr(value), 200)}"


def questions(key: dict, lessons=None):
    """(lesson, gradebook item, points, id, key entry) of every graded question in the key (or
    in ``lessons``); a question's points are the key's, published from its source's ``points``."""
    for lesson, entries in sorted(key["lessons"].items()):
        if lessons is not None and lesson not in lessons:
            continue
        for qid, entry in entries.items():
            if entry["graded"]:
                yield lesson, f"quiz:{qid}", float(entry["points"]), qid, entry


def grade_quizzes(student: str, folder: Path, key: dict, lessons=None) -> list[Row]:
    """One row per graded quiz question of every lesson in the key (or of ``lessons``)."""
    rows = []
    answers, problems = answer_sets(folder)
    for lesson, item, worth, qid, entry in questions(key, lessons):
        record = answers.get(lesson, {}).get(qid)
        if record is None:
            why = (
                problems.get(lesson.lower())
                or problems.get("*")
                or ("not answered" if lesson in answers else f"no answers for {lesson} found")
            )
            rows.append(Row(student, lesson, item, worth, "missing", why))
            continue
        try:
            value = _quiz.normalize_answer({**entry, "id": qid}, record["value"])
            right = _quiz.is_correct(entry, lesson, qid, value, key["secret"])
        except (ValueError, KeyError, TypeError) as error:
            rows.append(Row(student, lesson, item, worth, "error", f"malformed answer: {error}"))
            continue
        if right:
            rows.append(Row(student, lesson, item, worth, "correct"))
        else:
            rows.append(Row(student, lesson, item, worth, "wrong", wrong_message(entry, value)))
    return rows
