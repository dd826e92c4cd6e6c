"""Quiz sources: the authoring schema, its validation and where the files live.

``quizzes/source/<lesson>.yaml`` is what an author writes (answers included); ``parse_source``
checks it and names the file and question in every error.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..paths import QUIZZES, course_dir

QUIZ_DIR = course_dir(QUIZZES)  # the published learner files
SOURCE_DIR = QUIZ_DIR / "source"
TYPES = ("single", "multiple", "numeric", "text")
FORMAT = 1
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class QuizSchemaError(ValueError):
    """A quiz source or learner file is malformed; the message names the file and question."""


@dataclass
class Choice:
    text: str
    correct: bool
    explanation: str


@dataclass
class Question:
    id: str
    type: str
    prompt: str
    graded: bool = False
    points: float = 1
    choices: list[Choice] = field(default_factory=list)
    answer: float | None = None
    tolerance: float = 0.0
    accept: list[str] = field(default_factory=list)
    explanation: str = ""


@dataclass
class QuizSource:
    lesson: str
    title: str
    questions: list[Question]
    path: str = ""


def _fail(path, where, message):
    raise QuizSchemaError(f"{path}: {where}: {message}")


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_source(data, path="<source>") -> QuizSource:
    """Validate a quiz source (already loaded from YAML); errors name the file and question."""
    if not isinstance(data, dict):
        _fail(path, "top level", "expected a mapping with lesson, title and questions")
    unknown = set(data) - {"lesson", "title", "questions"}
    if unknown:
        _fail(path, "top level", f"unknown field(s) {sorted(unknown)}")
    lesson, title, questions = data.get("lesson"), data.get("title"), data.get("questions")
    if not isinstance(lesson, str) or not re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", lesson):
        _fail(
            path,
            "lesson",
            f"expected a notebook name like '01_formats' or 'labs_bug_hunts', got {lesson!r}",
        )
    if Path(path).suffix == ".yaml" and Path(path).stem != lesson:
        _fail(path, "lesson", f"{lesson!r} does not match the file name {Path(path).name!r}")
    if not isinstance(title, str) or not title.strip():
        _fail(path, "title", "expected a non-empty string")
    if not isinstance(questions, list) or not questions:
        _fail(path, "questions", "expected a non-empty list")
    parsed, seen = [], set()
    for number, raw in enumerate(questions, 1):
        where = f"question {number}"
        if not isinstance(raw, dict):
            _fail(path, where, "expected a mapping")
        qid = raw.get("id")
        if not isinstance(qid, str) or not _ID.match(qid):
            _fail(path, where, f"id: expected a kebab-case string, got {qid!r}")
        where = f"question {qid!r}"
        if qid in seen:
            _fail(path, where, "id: used twice in this lesson")
        seen.add(qid)
        parsed.append(_parse_question(raw, path, where))
    return QuizSource(lesson, title, parsed, str(path))


def _parse_question(raw, path, where) -> Question:
    qtype = raw.get("type")
    if qtype not in TYPES:
        _fail(path, where, f"type: expected one of {', '.join(TYPES)}, got {qtype!r}")
    allowed = {"id", "type", "prompt", "graded", "points", "explanation"}
    allowed |= {
        "single": {"choices"},
        "multiple": {"choices"},
        "numeric": {"answer", "tolerance"},
        "text": {"accept"},
    }[qtype]
    unknown = set(raw) - allowed
    if unknown:
        _fail(path, where, f"field(s) {sorted(unknown)} not allowed in a {qtype} question")
    prompt = raw.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        _fail(path, where, "prompt: expected a non-empty string")
    graded = raw.get("graded", False)
    if not isinstance(graded, bool):
        _fail(path, where, f"graded: expected true or false, got {graded!r}")
    points = raw.get("points", 1)
    if not _is_number(points) or points <= 0:
        _fail(path, where, f"points: expected a positive number, got {points!r}")
    question = Question(raw["id"], qtype, prompt.strip(), graded, points)
    if qtype in ("single", "multiple"):
        choices = raw.get("choices")
        if not isinstance(choices, list) or len(choices) < 2:
            _fail(path, where, "choices: expected a list of at least two choices")
        for index, choice in enumerate(choices, 1):
            cwhere = f"{where} choice {index}"
            if not isinstance(choice, dict) or set(choice) != {"text", "correct", "explanation"}:
                _fail(path, cwhere, "expected exactly text, correct and explanation")
            if (
                not isinstance(choice["text"], (str, int, float))
                or str(choice["text"]).strip() == ""
            ):
                _fail(path, cwhere, "text: expected a non-empty string")
            if not isinstance(choice["correct"], bool):
                _fail(path, cwhere, f"correct: expected true or false, got {choice['correct']!r}")
            if not isinstance(choice["explanation"], str) or not choice["explanation"].strip():
                _fail(path, cwhere, "explanation: every choice needs one")
            question.choices.append(
                Choice(
                    str(choice["text"]).strip(), choice["correct"], choice["explanation"].strip()
                )
            )
        texts = [c.text for c in question.choices]
        if len(set(texts)) != len(texts):
            _fail(path, where, "choices: two choices have the same text")
        right = sum(c.correct for c in question.choices)
        if qtype == "single" and right != 1:
            _fail(
                path,
                where,
                f"choices: a single-choice question needs exactly one correct choice, has {right}",
            )
        if qtype == "multiple" and right < 1:
            _fail(
                path, where, "choices: a multiple-choice question needs at least one correct choice"
            )
        if "explanation" in raw and not isinstance(raw["explanation"], str):
            _fail(path, where, "explanation: expected a string")
        question.explanation = str(raw.get("explanation", "")).strip()
        return question
    explanation = raw.get("explanation")
    if not isinstance(explanation, str) or not explanation.strip():
        _fail(path, where, "explanation: a numeric or text question needs one")
    question.explanation = explanation.strip()
    if qtype == "numeric":
        if not _is_number(raw.get("answer")):
            _fail(path, where, f"answer: expected a number, got {raw.get('answer')!r}")
        tolerance = raw.get("tolerance", 0)
        if not _is_number(tolerance) or tolerance < 0:
            _fail(path, where, f"tolerance: expected a number >= 0, got {tolerance!r}")
        question.answer, question.tolerance = float(raw["answer"]), float(tolerance)
    else:
        accept = raw.get("accept")
        if (
            not isinstance(accept, list)
            or not accept
            or not all(isinstance(a, (str, int, float)) and str(a).strip() for a in accept)
        ):
            _fail(path, where, "accept: expected a non-empty list of non-empty strings")
        question.accept = [str(a) for a in accept]
    return question


def load_source(path) -> QuizSource:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise QuizSchemaError(f"{path}: not valid YAML: {error}") from None
    except (OSError, UnicodeDecodeError) as error:  # unreadable, or not UTF-8 text
        raise QuizSchemaError(f"{path}: cannot read it as UTF-8 text: {error}") from None
    return parse_source(data, path)


def source_paths(source_dir=SOURCE_DIR) -> list[Path]:
    return sorted(Path(source_dir).glob("*.yaml"))
