"""Instructor grading: every submission sandboxed (or guarded, without a sandbox), every verdict
decided outside learner code.

``amp-course grade SUBMISSIONS --key KEY --out gradebook.csv`` (docs/instructors.md, "Grading").
One module per concern:

- ``notebooks``: rebuild a learner's notebook around the master's protected cells (nbformat);
- ``settings``: one run's settings (key, lessons, masters, sandbox, limits), checked up front;
- ``sandbox``: the bubblewrap / Docker / Podman command a kernel runs under, and what it sees;
- ``guard`` and ``unsandboxed``: without a sandbox, an audit hook in the kernel, a private copy of
  the course without the references, and a check of the instructor's files after each kernel;
- ``kernel``: run the rebuilt notebook in a sandboxed kernel, probing each check with a seed;
- ``verdicts``: secret seeds, reference observations and the verdict (the trusted side);
- ``quizzes``: graded quiz questions against the instructor's key;
- ``reports``: the gradebook's row (``Row``, its points following from its status) and its
  totals, the CSV gradebook, the per-student feedback files and the summary;
- ``run``: the whole run over a folder of submissions.

Why this design: a check that runs in the learner's process can be replaced, wrapped or fooled
by that process (through ``sys.modules``, ``importlib``, a look-alike ``ac``, an IPython custom
exception handler, a forged report). Here the learner's kernel only ever returns plain data
(JSON, tensors as bytes, never pickle) about what their function did on inputs drawn from a
secret seed; the grader computes the reference's results itself, with a reference the sandbox
cannot import, and compares. Nothing the sandbox prints or writes decides a grade.
"""

from .notebooks import CheckItem, cell_key, check_items, restore
from .reports import COLUMNS, Row, feedback_markdown, summary, total, write_csv
from .run import grade_all, grade_submission
from .sandbox import Sandbox, SandboxUnavailable
from .settings import Settings, SettingsError
from .verdicts import decide, secret_seed

__all__ = [
    "COLUMNS",
    "CheckItem",
    "Row",
    "Sandbox",
    "SandboxUnavailable",
    "Settings",
    "SettingsError",
    "cell_key",
    "check_items",
    "decide",
    "feedback_markdown",
    "grade_all",
    "grade_submission",
    "restore",
    "secret_seed",
    "summary",
    "total",
    "write_csv",
]
