"""Quiz grading: each student's answer files against the instructor's key."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ... import quiz as _quiz
from .matching import COPY_MARKS, hidden, inside, lesson_of_name
from .reports import Row, bounded

# The most of a file read for answers: an answer file of every lesson is a few kB; a larger file
# (a hostile one of gigabytes) is not read into the grader's memory.
ANSWER_FILE_BYTES = 4 * 2**20
# All answer files of one submission together: many files under the one-file bound would
# otherwise hold the grader's memory (every record is kept until the questions are chosen).
ANSWER_FOLDER_BYTES = 4 * ANSWER_FILE_BYTES
# Checks only add to a question's attempts, and an export copies them: the answer checked more
# often is the later one whatever the copying did to the files' times, which decide only a tie.
ANSWER_RULE = "the answer checked more often, then the one saved last, then by file name"


def _lesson_of(file: Path) -> str | None:
    """The lesson an answer file's name says (lower case, a copy's marks off), "*" for an export
    (``amp-course-answers.json``, `` (1)`` and the like included), None for any other name."""
    stem = COPY_MARKS.sub("", file.name[: -len(".json")])
    if stem.lower().startswith("amp-course-answers"):
        return "*"
    if not stem.lower().endswith(".answers"):
        return None
    return lesson_of_name(file.with_name(stem[: -len(".answers")] + ".ipynb"))


@dataclass(frozen=True)
class Answer:
    """One question's answer as graded, the file it came from, and the files that answer it
    otherwise (``ANSWER_RULE`` chose between them)."""

    record: dict
    file: Path
    others: tuple[Path, ...] = ()

    def note(self, folder: Path) -> str:
        said = f"graded the answer in `{self.file.relative_to(folder)}`"
        if self.others:
            also = ", ".join(f"`{p.relative_to(folder)}`" for p in self.others)
            said += f"; answered otherwise in {also} (of several, graded is {ANSWER_RULE})"
        return said + "."


def answer_sets(folder: Path):
    """The answers of every answer file in the submission, found by their content whatever the
    file is called ({lesson: {question: Answer}}), and per-lesson (or "*") messages for files
    named as answer files that cannot be read."""
    folder = Path(folder)
    found, problems, read = {}, {}, 0
    for file in sorted(folder.rglob("*.json")):
        if hidden(file, folder):
            continue
        lesson = _lesson_of(file)
        if not inside(file, folder):
            if lesson is not None:
                problems[lesson] = (
                    f"{file.name} is a link, not a file of this submission; not graded"
                )
            continue
        try:
            stat = file.stat()
            if stat.st_size > ANSWER_FILE_BYTES:
                raise _quiz.AnswerFileError(
                    f"over {ANSWER_FILE_BYTES >> 20} MiB (all of a course's answers take a few kB)"
                )
            read += stat.st_size
            if read > ANSWER_FOLDER_BYTES:
                raise _quiz.AnswerFileError(
                    f"past the {ANSWER_FOLDER_BYTES >> 20} MiB of JSON files the grader reads in "
                    "one submission (all of a course's answers take a few kB)"
                )
            data = _quiz.read_answers(file)
        except (_quiz.AnswerFileError, OSError) as error:
            if lesson is not None:  # another JSON file of the learner's is none of the grader's
                problems[lesson] = f"unreadable answer file {file.name}: {error}"
            continue
        for name, records in data.get("lessons", {}).items():
            for qid, record in records.items():
                found.setdefault(name, {}).setdefault(qid, []).append((stat.st_mtime, record, file))
    answers = {
        name: {qid: _chosen(seen) for qid, seen in questions.items()}
        for name, questions in found.items()
    }
    return answers, problems


def _attempts(record) -> int:
    attempts = record.get("attempts") if isinstance(record, dict) else None
    return attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else 0


def _value(record):
    """A record's answer; a record that is no dict (a hand-made file) is graded as malformed."""
    return record.get("value") if isinstance(record, dict) else record


def _chosen(seen: list[tuple[float, dict, Path]]) -> Answer:
    """Of one question's answers in several files, the one ``ANSWER_RULE`` grades; the files that
    hold another value are named (an export kept beside the answer file it copied agrees)."""
    ranked = sorted(seen, key=lambda s: (-_attempts(s[1]), -s[0], str(s[2])))
    _, record, file = ranked[0]
    others = tuple(f for _, r, f in ranked[1:] if _value(r) != _value(record))
    return Answer(record, file, others)


def wrong_message(entry: dict, value) -> str:
    """One line for a wrong answer (its row's status says "wrong"): what was answered and, for
    choices, what the key's author says about each one chosen; never which answer is right, so
    for several choices only that the key takes another set."""
    choices, notes = entry.get("choices") or [], (entry.get("explanations") or {}).get("choices")
    if entry["type"] in ("single", "multiple") and choices:
        picked = [value] if entry["type"] == "single" else list(value)
        said = [
            f'"{choices[i]}"' + (f" ({notes[i]})" if notes and i < len(notes) and notes[i] else "")
            for i in picked
        ]
        chose = ", ".join(said[:-1]) + f" and {said[-1]}" if len(said) > 1 else "".join(said)
        other = "; the key takes another set of choices" if entry["type"] == "multiple" else ""
        return bounded(f"you chose {chose or 'nothing'}{other}")
    if entry["type"] == "numeric":
        return f"{value:g} is not within the key's tolerance of the answer"
    return f"the key does not accept {bounded(repr(value), 200)}"


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
        answer = answers.get(lesson, {}).get(qid)
        if answer is None:
            why = (
                problems.get(lesson.lower())
                or problems.get("*")
                or ("not answered" if lesson in answers else f"no answers for {lesson} found")
            )
            rows.append(Row(student, lesson, item, worth, "missing", why))
            continue
        row = Row(student, lesson, item, worth, "", file=answer.note(folder))
        try:
            value = _quiz.normalize_answer({**entry, "id": qid}, answer.record["value"])
            right = _quiz.is_correct(entry, lesson, qid, value, key["secret"])
        except (ValueError, KeyError, TypeError) as error:
            rows.append(replace(row, status="error", message=f"malformed answer: {error}"))
            continue
        if right:
            rows.append(replace(row, status="correct"))
        else:
            rows.append(replace(row, status="wrong", message=wrong_message(entry, value)))
    return rows
