"""A lesson's quiz bound to its answer file: a learner's answers checked, explained and saved.

Answers are restored from ``<lesson>.answers.json`` (``answer_files``) when the quiz cell runs
again.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import feedback
from .answer_files import (
    AnswerFileError,
    atomic_write_text,
    default_answers_path,
    read_answers,
    write_answers,
)
from .hashing import is_correct, normalize_text, reveal, right_choices
from .order import SEED_KEY, choice_order, letter, new_seed
from .schema import FORMAT, QUIZ_DIR


def normalize_answer(entry: dict, value, order=None):
    """A learner's value in the stored form: choice index(es), float or string; clear errors.

    Choices are stored by their index in the published file. A letter or an int names a position
    on screen, which ``order`` (position -> index) translates; without it, positions are indices.
    Choice text matches whatever the order.
    """
    qtype, choices = entry["type"], entry.get("choices", [])
    order = list(order) if order else list(range(len(choices)))

    def index_of(item):
        if isinstance(item, bool):
            raise ValueError(f"{entry['id']}: expected a choice, got {item!r}")
        if isinstance(item, int):
            if 0 <= item < len(choices):
                return order[item]
            raise ValueError(
                f"{entry['id']}: choice index {item} out of range 0..{len(choices) - 1}"
            )
        if isinstance(item, str):
            text = item.strip()
            if (
                len(text) == 1
                and text.isalpha()
                and text.lower() not in [c.lower() for c in choices]
            ):
                number = ord(text.lower()) - ord("a")  # "b" means the second choice on screen
                if 0 <= number < len(choices):
                    return order[number]
            for i, choice in enumerate(choices):
                if normalize_text(choice) == normalize_text(text):
                    return i
        shown = [choices[i] for i in order]
        raise ValueError(f"{entry['id']}: {item!r} is not one of the choices {shown}")

    if qtype == "single":
        return index_of(value)
    if qtype == "multiple":
        if isinstance(value, (str, int)):
            value = [value]
        return sorted({index_of(v) for v in value})
    if qtype == "numeric":
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{entry['id']}: expected a number, got {value!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"{entry['id']}: expected a finite number, got {value!r}")
        return number
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{entry['id']}: expected a non-empty text answer, got {value!r}")
    return value.strip()


@dataclass
class Feedback:
    """What ``Quiz.answer`` tells the learner. ``answer`` prints it as it is given, so each answer
    of a cell shows its feedback wherever it stands; as a cell's last value it shows nothing more
    (its text once, not a second time as a repr)."""

    qid: str
    correct: bool | None  # None: graded question, checked by the instructor
    message: str
    attempts: int
    view: feedback.FeedbackView | None = field(default=None, repr=False)  # for the widgets
    shown: bool = field(default=False, repr=False)  # printed already by ``answer``

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"[{self.qid}] {self.message}"

    def _ipython_display_(self):  # a cell's last value: IPython shows it through this
        if not self.shown:
            print(repr(self))


class Quiz:
    """One lesson's quiz bound to an answer file; ``answer`` checks, records and explains."""

    def __init__(self, lesson: str, quiz_dir=QUIZ_DIR, answers_path=None):
        self.path = Path(quiz_dir) / f"{lesson}.yaml"
        if not self.path.exists():
            known = ", ".join(p.stem for p in sorted(Path(quiz_dir).glob("*.yaml"))) or "none"
            raise FileNotFoundError(
                f"No quiz for lesson {lesson!r} in {quiz_dir} (known: {known})."
            )
        self.doc = yaml.safe_load(self.path.read_text(encoding="utf-8"))
        self.lesson, self.salt = self.doc["lesson"], self.doc["salt"]
        self.questions = {q["id"]: q for q in self.doc["questions"]}
        self.answers_path = Path(answers_path) if answers_path else default_answers_path(lesson)
        self._backup_done = False
        self.load_error = None
        try:
            self._data = read_answers(self.answers_path)
        except AnswerFileError as error:
            # Keep going with empty answers; the bad file is copied to .bak before any rewrite.
            self.load_error = str(error)
            self._data = {}
            print(
                f"⚠ {error} Your answers start empty; the old file is kept as "
                f"{self.answers_path.name}.bak when you next answer.",
                file=sys.stderr,
            )

    @property
    def records(self) -> dict:
        return self._data.get("lessons", {}).get(self.lesson, {})

    def entry(self, qid: str) -> dict:
        if qid not in self.questions:
            raise KeyError(
                f"No question {qid!r} in {self.lesson}; ids: {', '.join(self.questions)}"
            )
        return self.questions[qid]

    def order(self, qid: str) -> list[int]:
        """This learner's order of the choices of ``qid``: position on screen -> published index."""
        n_choices = len(self.entry(qid).get("choices", []))
        return choice_order(self._seed(), self.lesson, qid, n_choices) if n_choices else []

    def choices(self, qid: str) -> list[str]:
        """The choices of ``qid`` in the order this learner sees them."""
        choices = self.entry(qid).get("choices", [])
        return [choices[i] for i in self.order(qid)]

    def _seed(self) -> str:
        """The answer file's shuffle seed, made and saved the first time a quiz is shown."""
        if SEED_KEY not in self._data:
            self._data[SEED_KEY] = new_seed()
            if not self.load_error:  # a damaged file stays as it is until the first answer
                try:
                    self._data.setdefault("format", FORMAT)
                    write_answers(self.answers_path, self._data)
                except OSError:
                    pass  # a read-only folder: the order holds until the kernel restarts
        return self._data[SEED_KEY]

    def shown(self, qid: str, stored) -> str:
        """A stored answer as the learner sees it: ``b) text`` for a choice."""
        if "choices" not in self.entry(qid):
            return repr(stored)
        order = self.order(qid)
        indices = stored if isinstance(stored, list) else [stored]
        return ", ".join(
            f"{letter(order.index(i))}) {self.entry(qid)['choices'][i]}" for i in indices
        )

    def answer(self, qid: str, value, *, show: bool = True) -> Feedback:
        """Record ``value`` as the answer to ``qid``, save the answer file, print the feedback as
        text (``show``; the widgets render it themselves) and return it.

        A choice is named by its letter or position (0-based) as shown, or by its text.
        """
        entry = self.entry(qid)
        stored = normalize_answer(entry, value, self.order(qid))
        previous = self.records.get(qid, {})
        attempts = int(previous.get("attempts", 0)) + 1
        correct = (
            None if entry["graded"] else is_correct(entry, self.lesson, qid, stored, self.salt)
        )
        record = {"value": stored, "attempts": attempts}
        if correct is not None:
            record["correct"] = correct
        self._save(qid, record)
        view = self.feedback(qid, stored, correct, attempts)
        result = Feedback(qid, correct, feedback.to_text(view), attempts, view, shown=show)
        if show:
            print(repr(result))
        return result

    def _save(self, qid, record):
        if self.load_error and not self._backup_done and self.answers_path.exists():
            backup = self.answers_path.with_name(self.answers_path.name + ".bak")
            atomic_write_text(
                backup, self.answers_path.read_text(encoding="utf-8", errors="replace")
            )
            self._backup_done = True
        self._data.setdefault("format", FORMAT)
        self._data.setdefault("lessons", {}).setdefault(self.lesson, {})[qid] = record
        write_answers(self.answers_path, self._data)

    def explanations(self, qid: str) -> dict:
        entry = self.entry(qid)
        if "feedback" not in entry:
            return {"choices": [], "explanation": ""}
        return json.loads(reveal(entry["feedback"], self.salt, qid))

    def feedback(self, qid, stored, correct, attempts) -> feedback.FeedbackView:
        """What to tell the learner about ``stored`` (see ``quiz.feedback``)."""
        entry = self.entry(qid)
        right = right_choices(entry, self.lesson, qid, self.salt) if "choices" in entry else None
        notes = self.explanations(qid)
        return feedback.build(entry, self.order(qid), notes, stored, correct, attempts, right)

    def text(self, ids=None) -> str:
        """The quiz (or the questions ``ids``) as plain text, with saved answers."""
        lines = [f"Quiz: {self.doc['title']} ({self.lesson})"]
        for number, (qid, entry) in enumerate(self.questions.items(), 1):
            if ids and qid not in ids:
                continue
            tag = " [graded]" if entry["graded"] else ""
            lines.append(f"\n{number}. [{qid}]{tag} ({entry['type']}) {entry['prompt']}")
            for position, choice in enumerate(self.choices(qid)):
                lines.append(f"   {letter(position)}) {choice}")
            if qid in self.records:
                rec = self.records[qid]
                lines.append(
                    f"   saved answer: {self.shown(qid, rec['value'])} "
                    f"after {rec['attempts']} attempt(s)"
                )
        first = ids[0] if ids else next(iter(self.questions))
        lines.append(
            f'\nAnswer in code: quiz.answer("{first}", value); '
            f"answers are saved to {self.answers_path.name}."
        )
        return "\n".join(lines)

    def __repr__(self):
        return self.text()
