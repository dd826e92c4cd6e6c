"""Graded code exercises: what check cells call, and the registry the grader reads.

An exercise in a notebook is two cells:
- a blank, tagged ``exercise`` with ``metadata["exercise"] = {"name": ..., "symbol": ...}``, whose
  body ends in ``raise NotImplementedError``; the learner replaces it with code defining ``symbol``;
- a check cell, tagged ``check``, calling ``ac.exercises.check(name, symbol)``.

Each exercise is three pieces (what grading does with them: docs/instructors.md, "Grading"):
``observe(answer, seed)`` runs the answer on inputs built from ``seed`` and returns plain data
(``plain.py``); ``compare(mine, reference, seed)`` raises ExerciseFailed on the first difference
that matters; the reference solution. An exercise module, named after its notebook
(``lesson_NN.py`` for lesson NN, ``labs_bug_hunts`` for ``labs_bug_hunts.ipynb``; a package where
its checks have parts of their own, as ``lesson_05/`` with ``mfu.py``), defines observe and compare
and calls ``register``; the reference lives in the module of the same name in
``solutions/`` (a ``SOLUTIONS`` dict), which the grading sandbox hides. A check cell computes
``compare(observe(answer, 0), observe(solution, 0), 0)`` in the learner's kernel (a lab's, then
the same at ``LAB_DRAWN_SEED``: see ``check_seeds``); the grader does the same with a secret
seed, observing the answer in the sandbox and the reference in its own process
(``amp_course.tooling.grading``), so no verdict is ever decided by the learner's code.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..env_vars import GRADING
from . import plain
from .answers import (  # noqa: F401  (lesson modules and notebooks use them from here)
    ExerciseFailed,
    ExerciseNotDone,
    Verdict,
    error_text,
    fail_on_error,
    judge,
)
from .calling import (  # noqa: F401  (lesson modules use them from here)
    Answer,
    AnswerStopped,
    call_answer,
    is_blank,
    is_blank_text,
)

# Set by the instructor's grader: reference solutions are then off limits to the notebook.
GRADING_ENV = GRADING
SOLUTIONS_PACKAGE = f"{__name__}.solutions"


class SolutionUnavailable(LookupError):
    """The reference solutions cannot be reached here (the grading sandbox hides them)."""


@dataclass(frozen=True)
class Exercise:
    name: str
    observe: Callable[[object, int], object]  # (answer, seed) -> plain data
    compare: Callable[[object, object, int], None]  # (mine, reference, seed); raises
    points: float = 1
    module: str = ""  # the exercise module; its reference is solutions/<same name>.py


# A lab's seed 0 is its notebook's own case: the lab's kit draws other batches, sizes, masks and
# positions from any other seed, as from the grader's secret one. A lab's check cell runs one such
# drawn case after the notebook's, so that a fix fitted to the batches the notebook printed fails
# in the notebook, not first at grading.
LAB_DRAWN_SEED = 1

_REGISTRY: dict[str, Exercise] = {}
_LAST_STATUS: dict[str, str] = {}  # name -> "passed" | "failed" | "not done", in this process


def register(name: str, observe, compare, points: float = 1) -> Exercise:
    """Register exercise ``name`` from an exercise module (``lesson_NN.py``, ``labs_*.py``).

    Its reference is ``SOLUTIONS[name]`` in the module of the same name in ``solutions/``, named
    after the module that calls ``register`` (observe and compare may come from a helper module).
    """
    caller = sys._getframe(1).f_globals.get("__name__", "")
    item = Exercise(name, observe, compare, points, caller.rsplit(".", 1)[-1])
    _REGISTRY[name] = item
    return item


def _exercise_modules(prefix: str = "") -> list[str]:
    """The exercise modules (not imported), or only those where names "<prefix>.x" live by
    convention: ``lesson_<prefix>`` ("05.mfu"), ``<prefix>_*`` ("labs.resume": the labs').

    Found by their file names in this folder alone: listing ``solutions/`` (as ``pkgutil`` does
    to tell a package) is what the grader's guard flags in a learner's kernel.
    """
    if prefix and not prefix.isalnum():
        return []
    patterns = (f"lesson_{prefix}", f"{prefix}_*") if prefix else ("lesson_*", "labs_*")
    folder = Path(__path__[0])
    found = set()
    for pattern in patterns:  # a module, or a package: a lesson's checks and the parts they use
        found |= {path.stem for path in folder.glob(f"{pattern}.py")}
        found |= {path.parent.name for path in folder.glob(f"{pattern}/__init__.py")}
    return sorted(found)


def _load(modules: list[str], until: str = "") -> None:
    for module in modules:
        if until in _REGISTRY:
            return
        importlib.import_module(f"{__name__}.{module}")


def get(name: str) -> Exercise:
    """The registered exercise called ``name``; unknown names list the known ones."""
    if name not in _REGISTRY:  # import only the modules where the name's prefix says it lives
        _load(_exercise_modules(name.split(".")[0]), until=name)
    if name not in _REGISTRY:
        _load(_exercise_modules())
    if name not in _REGISTRY:
        raise KeyError(
            f"Unknown exercise {name!r}. Known: {', '.join(sorted(_REGISTRY)) or 'none'}."
        )
    return _REGISTRY[name]


def names() -> list[str]:
    """Every registered exercise name."""
    _load(_exercise_modules())
    return sorted(_REGISTRY)


def _grading() -> bool:
    return os.environ.get(GRADING_ENV) == "1"


def solution(name: str):
    """The reference solution of exercise ``name`` (refused while an instructor grades)."""
    item = get(name)
    if _grading():
        raise SolutionUnavailable(f"{name}: reference solutions are not available while grading.")
    try:
        module = importlib.import_module(f"{SOLUTIONS_PACKAGE}.{item.module}")
        return module.SOLUTIONS[name]
    except (ImportError, AttributeError, KeyError):
        raise SolutionUnavailable(
            f"{name}: the reference solution is not available here."
        ) from None


# Observing sets torch's global RNG state (seeded models): one observation at a time, even when
# the grader grades several submissions in threads.
_OBSERVING = threading.Lock()


@functools.lru_cache(maxsize=64)
def _reference_text(name: str, seed: int) -> str:
    with _OBSERVING:
        return plain.dumps(get(name).observe(solution(name), seed))


def reference_observation(name: str, seed: int):
    """``observe(solution, seed)`` after the wire's round trip (a fresh copy on every call)."""
    return plain.loads(_reference_text(name, seed))


NOT_DONE_NOTE = (
    "Not done yet: fill in the exercise cell above, run it, then run this check again. "
    "The lesson goes on meanwhile; this exercise scores 0 until it passes."
)


def check(name: str, answer: object) -> Verdict | None:
    """Check the learner's ``answer`` to exercise ``name`` and show the verdict.

    Prints ``✓`` and returns a true Verdict when correct; prints "Not done yet" and returns a false
    one while the blank is untouched (so Run All goes on); raises ExerciseFailed (an
    AssertionError) when wrong, which a notebook shows as the ``✗`` line alone. Where the
    reference is hidden (the grading sandbox) it only says that the grader decides (None).
    """
    item = get(name)
    try:
        for seed in check_seeds(name):
            status, message = verdict(name, answer, seed)
            if status != "passed":
                break
    except SolutionUnavailable:
        print(f"{name}: checked by the grader, outside this notebook.")
        return None
    if status == "failed" and seed != 0:
        first, _, rest = message.partition(" ")
        if first.istitle() and rest:  # "On a long run's ...", not a name such as "GradScaler"
            message = f"{first.lower()} {rest}"
        message = f"on the check's own inputs, not the notebook's: {message}"
    _LAST_STATUS[name] = status
    if status == "passed":
        print(f"✓ {name}: correct ({item.points:g} point{'s' if item.points != 1 else ''})")
        return Verdict(status)
    if status == "not done":
        print(f"… {name}: {NOT_DONE_NOTE}")
        return Verdict(status)
    raise ExerciseFailed(f"{name}: {message}")


def check_seeds(name: str) -> tuple[int, ...]:
    """The seeds a check cell runs, in order: 0, and for a lab's exercise ("labs.") then
    ``LAB_DRAWN_SEED`` too (its seed 0 is the case its notebook shows)."""
    return (0, LAB_DRAWN_SEED) if name.startswith("labs.") else (0,)


def verdict(name: str, answer, seed: int = 0) -> tuple[str, str]:
    """(status, message) for ``answer`` at ``seed``, all in this process.

    What a check cell decides at each of ``check_seeds``, and what the grader decides for another
    seed, without a sandbox: for the course's tests and for trying an exercise's checker.
    """
    item = get(name)
    reference = reference_observation(name, seed)
    if answer is None:
        return "not done", "nothing to check yet."
    watched = Answer(answer) if callable(answer) else answer
    try:
        mine = plain.roundtrip(item.observe(watched, seed))
    except AnswerStopped as stopped:
        call = getattr(stopped, "call", "a call of your code")
        return "failed", (
            f"{call} ran for {stopped.args[0]:g} s without returning and was stopped (the check's "
            "limit for one call)."
        )
    except ExerciseNotDone as failure:
        return "not done", str(failure)
    except ExerciseFailed as failure:
        if getattr(watched, "not_done", False):
            return "not done", "the exercise cell still raises NotImplementedError."
        return "failed", str(failure)
    # The learner's code crashed where observe did not expect it, or called sys.exit(), which
    # would otherwise end the check cell with a traceback and no verdict.
    except (Exception, SystemExit) as error:
        if is_blank(error):
            return "not done", "the exercise cell still raises NotImplementedError."
        return "failed", f"your code raised {error_text(error)}"
    return judge(item, mine, reference, seed, getattr(watched, "not_done", False))


def answer_or_reference(name: str, answer):
    """``answer``, or the course's reference with a visible note while the exercise is not done.

    Cells after an exercise call this so that a lesson run top to bottom (Run All) goes on before
    the learner has answered. While grading the reference is never handed out: ``answer`` is
    returned as it is.
    """
    if answer is not None and _LAST_STATUS.get(name) != "not done":
        return answer
    try:
        reference = solution(name)
    except SolutionUnavailable:
        return answer
    print(
        f"Note: {name} is not done yet, so the cells below use the course's reference answer. "
        "Finish the exercise to see your own."
    )
    return reference


def solution_source(name: str, symbol: str) -> str:
    """Code for a blank cell that binds ``symbol`` to exercise ``name``'s reference solution."""
    return (
        f"# Reference solution, filled in by the course's tests.\n"
        f"{symbol} = ac.exercises.solution({name!r})"
    )


def fill_solutions(nb):
    """Replace every ``exercise`` blank in notebook ``nb`` (nbformat) with its reference."""
    for cell in nb.cells:
        if cell.cell_type == "code" and "exercise" in cell.metadata.get("tags", []):
            meta = cell.metadata.get("exercise", {})
            if "name" not in meta or "symbol" not in meta:
                raise ValueError(
                    "An exercise cell needs metadata exercise.name and exercise.symbol."
                )
            get(meta["name"])  # fail early on a typo
            cell.source = solution_source(meta["name"], meta["symbol"])
    return nb
