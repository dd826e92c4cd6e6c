"""Lesson quizzes: authoring schema, publishing, self-check feedback, answer files, widgets.

Three kinds of file (docs/instructors.md, "Quizzes"):

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

One module per concern: ``schema`` (sources and validation), ``hashing`` (hidden answers),
``publish`` (learner files and the instructor key), ``answers`` (a quiz's answers checked and
explained), ``answer_files`` (reading, crash-safe writing, export) and
``widgets`` (rendering; whether widgets render at all is ``amp_course.display``'s answer).
Everything public is re-exported here, so ``ac.quiz.show`` and ``ac.quiz.export`` are the names
a notebook uses.
"""

from ..display import MODE_ENV, widgets_available
from .answer_files import (
    ANSWERS_ENV,
    AnswerFileError,
    atomic_write_text,
    default_answers_path,
    export,
    read_answers,
    write_answers,
)
from .answers import Feedback, Quiz, normalize_answer
from .hashing import (
    NUMERIC_BUCKETS,
    PUBLIC_SALT_PREFIX,
    answer_hashes,
    canonical_answer,
    is_correct,
    normalize_text,
    obfuscate,
    public_salt,
    reveal,
)
from .publish import (
    dump_learner,
    key_entries,
    learner_document,
    load_key,
    publish,
    read_secret,
    stale_learner_files,
)
from .schema import (
    FORMAT,
    QUIZ_DIR,
    SOURCE_DIR,
    TYPES,
    Choice,
    Question,
    QuizSchemaError,
    QuizSource,
    load_source,
    parse_source,
    source_paths,
)
from .widgets import _question_widget, show

__all__ = [
    "ANSWERS_ENV",
    "FORMAT",
    "MODE_ENV",
    "NUMERIC_BUCKETS",
    "PUBLIC_SALT_PREFIX",
    "QUIZ_DIR",
    "SOURCE_DIR",
    "TYPES",
    "AnswerFileError",
    "Choice",
    "Feedback",
    "Question",
    "Quiz",
    "QuizSchemaError",
    "QuizSource",
    "_question_widget",
    "answer_hashes",
    "atomic_write_text",
    "canonical_answer",
    "default_answers_path",
    "dump_learner",
    "export",
    "is_correct",
    "key_entries",
    "learner_document",
    "load_key",
    "load_source",
    "normalize_answer",
    "normalize_text",
    "obfuscate",
    "parse_source",
    "public_salt",
    "publish",
    "read_answers",
    "read_secret",
    "reveal",
    "show",
    "source_paths",
    "stale_learner_files",
    "widgets_available",
    "write_answers",
]
