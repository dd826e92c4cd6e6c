"""Lesson quizzes: authoring schema, publishing, self-check feedback, answer files, widgets.

Three kinds of file (README, "Quizzes"):

- ``quizzes/source/<lesson>.yaml``: the plaintext source an author writes (answers included);
- ``quizzes/<lesson>.yaml``: what learners get, written by ``amp-course quiz publish``. Answers of
  self-check questions are stored only as salted SHA-256 hashes and their explanations are
  obfuscated; graded questions (``graded: true``) carry no hash and no explanation at all. This
  only *deters* peeking: the salt is in the file, so a determined learner can test guesses.
- the instructor key (JSON), the same hashes for every question made with the instructor's own
  secret salt, plus the explanations; ``amp-course grade`` checks answer files against it.

In a notebook, ``quiz = ac.quiz.show("00_scenario")`` renders the lesson's quiz with ipywidgets
in a live Jupyter front end and as text elsewhere (papermill, nbval, a terminal); in either mode
``quiz.answer("q-id", value)`` answers in code. Answers go to ``<lesson>.answers.json`` beside the
notebook, written atomically, and are restored when the cell runs again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
QUIZ_DIR = ROOT / "quizzes"
SOURCE_DIR = QUIZ_DIR / "source"
TYPES = ("single", "multiple", "numeric", "text")
FORMAT = 1
# Learner files are salted with a public, per-lesson salt so publishing is deterministic.
PUBLIC_SALT_PREFIX = "amp-course public quiz salt v1"
# Numeric answers are hashed by buckets of tolerance / NUMERIC_BUCKETS: every value within the
# tolerance is accepted, and values up to tolerance * (1 + 1/NUMERIC_BUCKETS) away may be too.
NUMERIC_BUCKETS = 8
MODE_ENV = "AMP_COURSE_QUIZ_MODE"  # "text" or "widgets" forces the rendering
ANSWERS_ENV = "AMP_COURSE_ANSWERS_DIR"  # where answer files go (default: the notebook's folder)
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class QuizSchemaError(ValueError):
    """A quiz source or learner file is malformed; the message names the file and question."""


class AnswerFileError(ValueError):
    """An answer file cannot be read; it is left untouched (and backed up before any rewrite)."""


# ----------------------------------------------------------------------------- schema


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
    return parse_source(data, path)


def source_paths(source_dir=SOURCE_DIR) -> list[Path]:
    return sorted(Path(source_dir).glob("*.yaml"))


# ----------------------------------------------------------------------------- hashing


def normalize_text(value) -> str:
    return " ".join(str(value).split()).casefold()


def _digest(salt: str, lesson: str, qid: str, canonical: str) -> str:
    return hashlib.sha256(f"{salt}\x00{lesson}\x00{qid}\x00{canonical}".encode()).hexdigest()


def _bucket(value: float, tolerance: float) -> str:
    if tolerance == 0:
        return repr(float(value))
    return str(math.floor(value / (tolerance / NUMERIC_BUCKETS)))


def answer_hashes(question: Question, lesson: str, salt: str) -> list[str]:
    """Hashes of every canonical form that counts as a right answer."""
    if question.type == "single":
        forms = [str(next(i for i, c in enumerate(question.choices) if c.correct))]
    elif question.type == "multiple":
        forms = [",".join(str(i) for i, c in enumerate(question.choices) if c.correct)]
    elif question.type == "text":
        forms = sorted({normalize_text(a) for a in question.accept})
    elif question.tolerance == 0:
        forms = [_bucket(question.answer, 0)]
    else:
        width = question.tolerance / NUMERIC_BUCKETS
        low = math.floor((question.answer - question.tolerance) / width)
        high = math.floor((question.answer + question.tolerance) / width)
        forms = [str(k) for k in range(low, high + 1)]
    return sorted(_digest(salt, lesson, question.id, form) for form in forms)


def canonical_answer(qtype: str, value, n_choices: int = 0, tolerance: float = 0.0) -> str:
    """The canonical form of a learner's (already normalised) answer, as hashed."""
    if qtype == "single":
        return str(value)
    if qtype == "multiple":
        return ",".join(str(i) for i in sorted(set(value)))
    if qtype == "text":
        return normalize_text(value)
    return _bucket(float(value), tolerance)


def is_correct(entry: dict, lesson: str, qid: str, value, salt: str) -> bool:
    """Check ``value`` against a published entry's hashes (learner file or instructor key)."""
    canonical = canonical_answer(
        entry["type"], value, len(entry.get("choices", [])), entry.get("tolerance", 0.0)
    )
    return _digest(salt, lesson, qid, canonical) in entry["hashes"]


def _keystream(salt: str, label: str, length: int) -> bytes:
    out, counter = b"", 0
    while len(out) < length:
        out += hashlib.sha256(f"{salt}\x00{label}\x00{counter}".encode()).digest()
        counter += 1
    return out[:length]


def obfuscate(text: str, salt: str, label: str) -> str:
    """XOR with a salted SHA-256 keystream, then base64: hides text from a glance, nothing more."""
    data = text.encode()
    return base64.b64encode(
        bytes(a ^ b for a, b in zip(data, _keystream(salt, label, len(data)), strict=True))
    ).decode()


def reveal(blob: str, salt: str, label: str) -> str:
    data = base64.b64decode(blob)
    return bytes(
        a ^ b for a, b in zip(data, _keystream(salt, label, len(data)), strict=True)
    ).decode()


def public_salt(lesson: str) -> str:
    return hashlib.sha256(f"{PUBLIC_SALT_PREFIX}\x00{lesson}".encode()).hexdigest()[:32]


# ----------------------------------------------------------------------------- publishing


def learner_document(source: QuizSource) -> dict:
    """The learner file's content: prompts and choices; hashes and obfuscated explanations."""
    salt = public_salt(source.lesson)
    questions = []
    for q in source.questions:
        entry = {
            "id": q.id,
            "type": q.type,
            "prompt": q.prompt,
            "graded": q.graded,
            "points": q.points,
        }
        if q.choices:
            entry["choices"] = [c.text for c in q.choices]
        if q.type == "numeric":
            entry["tolerance"] = q.tolerance
        if not q.graded:
            entry["hashes"] = answer_hashes(q, source.lesson, salt)
            entry["feedback"] = obfuscate(json.dumps(_explanations(q)), salt, q.id)
        questions.append(entry)
    return {
        "format": FORMAT,
        "lesson": source.lesson,
        "title": source.title,
        "salt": salt,
        "note": "Generated by `amp-course quiz publish` from quizzes/source/; do not edit.",
        "questions": questions,
    }


def _explanations(q: Question) -> dict:
    return {"choices": [c.explanation for c in q.choices], "explanation": q.explanation}


def key_entries(source: QuizSource, secret: str) -> dict:
    entries = {}
    for q in source.questions:
        entries[q.id] = {
            "type": q.type,
            "graded": q.graded,
            "points": q.points,
            "choices": [c.text for c in q.choices],
            "tolerance": q.tolerance,
            "hashes": answer_hashes(q, source.lesson, secret),
            "explanations": _explanations(q),
        }
    return entries


def dump_learner(document: dict) -> str:
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and os.replace: never half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_secret(key_path=None, secret=None) -> str:
    """The instructor's salt: given, or from AMP_COURSE_QUIZ_SECRET, or the existing key file."""
    secret = secret or os.environ.get("AMP_COURSE_QUIZ_SECRET")
    if secret:
        return secret
    if key_path and Path(key_path).exists():
        try:
            return json.loads(Path(key_path).read_text())["secret"]
        except (ValueError, KeyError, TypeError):
            raise QuizSchemaError(
                f"{key_path}: not a quiz key file; pass --secret or remove it"
            ) from None
    return None


def publish(source_dir=SOURCE_DIR, out_dir=QUIZ_DIR, key_path=None, secret=None) -> list[Path]:
    """Write one learner file per source (only when its content changed) and the instructor key.

    Without a secret a fresh random one is made once and kept in the key file, so re-running
    gives the same key. Returns the files written or found up to date.
    """
    import secrets as _secrets

    sources = [load_source(p) for p in source_paths(source_dir)]
    if not sources:
        raise QuizSchemaError(f"{source_dir}: no quiz sources (*.yaml) found")
    written = []
    for source in sources:
        path = Path(out_dir) / f"{source.lesson}.yaml"
        text = dump_learner(learner_document(source))
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            atomic_write_text(path, text)
        written.append(path)
    if key_path is not None:
        secret = read_secret(key_path, secret) or _secrets.token_hex(16)
        key = {
            "format": FORMAT,
            "secret": secret,
            "note": "Instructor key: keep private. Regenerate with `amp-course quiz publish "
            "--key PATH --secret YOURS`.",
            "lessons": {s.lesson: key_entries(s, secret) for s in sources},
        }
        atomic_write_text(key_path, json.dumps(key, indent=1, sort_keys=True) + "\n")
        written.append(Path(key_path))
    return written


def stale_learner_files(source_dir=SOURCE_DIR, out_dir=QUIZ_DIR) -> list[str]:
    """Learner files that differ from what ``publish`` would write now (for the tests)."""
    stale = []
    for p in source_paths(source_dir):
        source = load_source(p)
        path = Path(out_dir) / f"{source.lesson}.yaml"
        if not path.exists() or path.read_text(encoding="utf-8") != dump_learner(
            learner_document(source)
        ):
            stale.append(path.name)
    return stale


def load_key(path) -> dict:
    try:
        key = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise QuizSchemaError(f"{path}: cannot read the quiz key: {error}") from None
    if not isinstance(key, dict) or "secret" not in key or "lessons" not in key:
        raise QuizSchemaError(f"{path}: not a quiz key (needs 'secret' and 'lessons')")
    return key


# ----------------------------------------------------------------------------- answers


def normalize_answer(entry: dict, value):
    """A learner's value in the stored form: choice index(es), float or string; clear errors."""
    qtype, choices = entry["type"], entry.get("choices", [])

    def index_of(item):
        if isinstance(item, bool):
            raise ValueError(f"{entry['id']}: expected a choice, got {item!r}")
        if isinstance(item, int):
            if 0 <= item < len(choices):
                return item
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
                number = ord(text.lower()) - ord("a")  # "b" means the second choice
                if 0 <= number < len(choices):
                    return number
            for i, choice in enumerate(choices):
                if normalize_text(choice) == normalize_text(text):
                    return i
        raise ValueError(f"{entry['id']}: {item!r} is not one of the choices {choices}")

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


def read_answers(path) -> dict:
    """The answers in ``path`` ({} when absent); AnswerFileError when it is corrupt."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise AnswerFileError(f"{path} is not valid JSON ({error}).") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("lessons", {}), dict)
        or not all(isinstance(v, dict) for v in data.get("lessons", {}).values())
    ):
        raise AnswerFileError(f"{path} is not an answer file (expected {{'lessons': {{...}}}}).")
    return data


def write_answers(path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


@dataclass
class Feedback:
    qid: str
    correct: bool | None  # None: graded question, checked by the instructor
    message: str
    attempts: int

    def __str__(self):
        return self.message


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

    def answer(self, qid: str, value) -> Feedback:
        """Record ``value`` as the answer to ``qid``, save the answer file, return feedback."""
        entry = self.entry(qid)
        stored = normalize_answer(entry, value)
        previous = self.records.get(qid, {})
        attempts = int(previous.get("attempts", 0)) + 1
        correct = (
            None if entry["graded"] else is_correct(entry, self.lesson, qid, stored, self.salt)
        )
        record = {"value": stored, "attempts": attempts}
        if correct is not None:
            record["correct"] = correct
        self._save(qid, record)
        return Feedback(qid, correct, self.feedback_text(qid, stored, correct), attempts)

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

    def feedback_text(self, qid, stored, correct) -> str:
        entry = self.entry(qid)
        if correct is None:
            return "Answer saved. This question is graded by your instructor."
        lines = ["✓ Correct." if correct else "✗ Not quite."]
        notes = self.explanations(qid)
        chosen = set(stored) if isinstance(stored, list) else {stored}
        for i, (text, why) in enumerate(
            zip(entry.get("choices", []), notes["choices"], strict=False)
        ):
            lines.append(f"{'→' if i in chosen else ' '} {chr(97 + i)}) {text}: {why}")
        if notes["explanation"]:
            lines.append(notes["explanation"])
        return "\n".join(lines)

    def text(self, ids=None) -> str:
        """The quiz (or the questions ``ids``) as plain text, with saved answers."""
        lines = [f"Quiz: {self.doc['title']} ({self.lesson})"]
        for number, (qid, entry) in enumerate(self.questions.items(), 1):
            if ids and qid not in ids:
                continue
            tag = " [graded]" if entry["graded"] else ""
            lines.append(f"\n{number}. [{qid}]{tag} ({entry['type']}) {entry['prompt']}")
            for i, choice in enumerate(entry.get("choices", [])):
                lines.append(f"   {chr(97 + i)}) {choice}")
            if qid in self.records:
                rec = self.records[qid]
                lines.append(
                    f"   saved answer: {rec['value']!r} after {rec['attempts']} attempt(s)"
                )
        first = ids[0] if ids else next(iter(self.questions))
        lines.append(
            f'\nAnswer in code: quiz.answer("{first}", value); '
            f"answers are saved to {self.answers_path.name}."
        )
        return "\n".join(lines)

    def __repr__(self):
        return self.text()


def default_answers_path(lesson: str) -> Path:
    """``<lesson>.answers.json`` beside the notebook (the kernel's working directory)."""
    folder = os.environ.get(ANSWERS_ENV)
    if not folder:
        session = os.environ.get("JPY_SESSION_NAME", "")  # set by Jupyter Server for notebooks
        folder = (
            str(Path(session).parent)
            if session.endswith(".ipynb") and Path(session).is_absolute()
            else os.getcwd()
        )
    return Path(folder) / f"{lesson}.answers.json"


# ----------------------------------------------------------------------------- rendering


def widgets_available() -> bool:
    """True only in a live front end that renders widgets; AMP_COURSE_QUIZ_MODE forces a mode.

    papermill, nbval and nbclient run a kernel with no front end (so widgets would show nothing);
    Jupyter Server sets JPY_SESSION_NAME for kernels it starts for a notebook, Colab and VS Code
    are recognised by their modules and variables.
    """
    forced = os.environ.get(MODE_ENV, "").strip().lower()
    if forced in ("text", "widgets"):
        return forced == "widgets"
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
        return False
    if "papermill" in sys.modules or "PAPERMILL_INPUT_PATH" in os.environ:
        return False
    if "google.colab" in sys.modules:
        return True
    if "__vsc_ipynb_file__" in shell.user_ns:
        return True
    return bool(os.environ.get("JPY_SESSION_NAME"))


def _question_widget(quiz: Quiz, qid: str):
    import ipywidgets as w

    entry = quiz.entry(qid)
    saved = quiz.records.get(qid)
    options = [(f"{chr(97 + i)}) {c}", i) for i, c in enumerate(entry.get("choices", []))]
    if entry["type"] == "single":
        field_ = w.RadioButtons(
            options=options, value=saved["value"] if saved else None, layout=w.Layout(width="auto")
        )
        read = lambda: field_.value  # noqa: E731
    elif entry["type"] == "multiple":
        boxes = [
            w.Checkbox(value=bool(saved and i in saved["value"]), description=label, indent=False)
            for label, i in options
        ]
        field_ = w.VBox(boxes)
        read = lambda: [i for i, box in enumerate(boxes) if box.value]  # noqa: E731
    elif entry["type"] == "numeric":
        field_ = w.FloatText(value=saved["value"] if saved else 0.0)
        read = lambda: field_.value  # noqa: E731
    else:
        field_ = w.Text(value=saved["value"] if saved else "", placeholder="your answer")
        read = lambda: field_.value  # noqa: E731
    button = w.Button(description="Check", button_style="primary")
    feedback = w.HTML()
    attempts = w.HTML()

    def show(message, count):
        feedback.value = f"<pre style='white-space: pre-wrap'>{_html_escape(message)}</pre>"
        attempts.value = f"<small>attempts: {count}</small>"

    if saved:
        show(quiz.feedback_text(qid, saved["value"], saved.get("correct")), saved["attempts"])

    def on_click(_):
        try:
            result = quiz.answer(qid, read())
        except (ValueError, OSError) as error:
            feedback.value = f"<b>{_html_escape(str(error))}</b>"
            return
        show(result.message, result.attempts)

    button.on_click(on_click)
    tag = " <i>(graded)</i>" if entry["graded"] else ""
    header = w.HTML(f"<b>{_html_escape(entry['prompt'])}</b>{tag}")
    box = w.VBox([header, field_, w.HBox([button, attempts]), feedback])
    box.add_class("amp-quiz-question")
    return box


def _html_escape(text: str) -> str:
    import html

    return html.escape(text)


def show(lesson: str, question: str | None = None, *, quiz_dir=QUIZ_DIR, answers_path=None) -> Quiz:
    """Render a lesson's quiz (or one question); return the Quiz for ``quiz.answer(...)``."""
    quiz = Quiz(lesson, quiz_dir=quiz_dir, answers_path=answers_path)
    ids = [question] if question else list(quiz.questions)
    for qid in ids:
        quiz.entry(qid)
    if widgets_available():
        import ipywidgets as w
        from IPython.display import display

        title = w.HTML(f"<h3>Quiz: {_html_escape(quiz.doc['title'])}</h3>")
        display(w.VBox([title] + [_question_widget(quiz, qid) for qid in ids]))
        if quiz.load_error:
            display(w.HTML(f"<b>⚠ {_html_escape(quiz.load_error)}</b>"))
    else:
        print(quiz.text(ids))
    return quiz


def export(lesson: str | None = None, path=None) -> Path:
    """Collect answer files into one JSON to hand in; in Colab, also download it."""
    folder = Path(path).parent if path else default_answers_path("x").parent
    files = sorted(folder.glob(f"{lesson or '*'}.answers.json"))
    merged = {"format": FORMAT, "lessons": {}}
    for file in files:
        merged["lessons"].update(read_answers(file).get("lessons", {}))
    if not merged["lessons"]:
        raise FileNotFoundError(f"No answers to export in {folder}: answer a quiz first.")
    target = Path(path) if path else folder / "amp-course-answers.json"
    write_answers(target, merged)
    if "google.colab" in sys.modules:
        from google.colab import files  # type: ignore[import-not-found]

        files.download(str(target))
    print(f"Exported {sum(len(v) for v in merged['lessons'].values())} answer(s) to {target}")
    return target
