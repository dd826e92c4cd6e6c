"""Graded code exercises: checkers, reference solutions, and what check cells call.

An exercise in a notebook is two cells:
- a blank, tagged ``exercise`` with ``metadata["exercise"] = {"name": ..., "symbol": ...}``, whose
  body ends in ``raise NotImplementedError``; the learner replaces it with code defining ``symbol``;
- a check cell, tagged ``check``, calling ``ac.exercises.check(name, symbol)``.

Lesson modules (``amp_course/exercises/lesson_NN.py``) register each exercise's checker and
reference solution with ``@exercise(name, solution=...)``. The tests run notebooks with every blank
replaced by its reference solution (``fill_solutions``), so CI proves that each check accepts a
correct answer; the checkers' own tests prove they reject the usual wrong ones.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

# Set by the instructor's grader: reference solutions are then off limits to the notebook.
GRADING_ENV = "AMP_COURSE_GRADING"


class ExerciseFailed(AssertionError):
    """The learner's answer is wrong; the message says what is wrong in plain words."""


@dataclass(frozen=True)
class Exercise:
    name: str
    checker: Callable[[object], None]  # raises ExerciseFailed with a plain-words message
    solution: object  # the reference answer (usually a function)
    points: int = 1


_REGISTRY: dict[str, Exercise] = {}


def exercise(name: str, solution: object, points: int = 1):
    """Decorator registering ``checker`` as the check of exercise ``name``."""

    def register(checker):
        _REGISTRY[name] = Exercise(name, checker, solution, points)
        return checker

    return register


def _load_all() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("lesson_"):
            importlib.import_module(f"{__name__}.{module.name}")


def get(name: str) -> Exercise:
    """The registered exercise called ``name``; unknown names list the known ones."""
    _load_all()
    if name not in _REGISTRY:
        raise KeyError(
            f"Unknown exercise {name!r}. Known: {', '.join(sorted(_REGISTRY)) or 'none'}."
        )
    return _REGISTRY[name]


def names() -> list[str]:
    """Every registered exercise name."""
    _load_all()
    return sorted(_REGISTRY)


def _grading() -> bool:
    return os.environ.get(GRADING_ENV) == "1"


def solution(name: str):
    """The reference solution of exercise ``name`` (refused while an instructor grades)."""
    if _grading():
        raise ExerciseFailed(f"{name}: reference solutions are not available while grading.")
    return get(name).solution


def check(name: str, answer: object) -> bool:
    """Run exercise ``name``'s checker on the learner's ``answer``; print the verdict.

    Raises ExerciseFailed (an AssertionError, so nbval and the grader see a failed cell) with a
    message saying what is wrong.
    """
    item = get(name)
    if answer is None:
        raise ExerciseFailed(
            f"{name}: nothing to check yet; fill in the exercise cell above first."
        )
    if _grading() and answer is item.solution:
        raise ExerciseFailed(
            f"{name}: the answer is the course's reference solution, not your own."
        )
    try:
        item.checker(answer)
    except ExerciseFailed as failure:
        print(f"✗ {name}: {failure}")
        raise
    except NotImplementedError:
        raise ExerciseFailed(
            f"{name}: the exercise cell still raises NotImplementedError."
        ) from None
    except Exception as error:  # the learner's code crashed inside the checker
        message = f"{name}: your code raised {type(error).__name__}: {error}"
        print(f"✗ {message}")
        raise ExerciseFailed(message) from error
    print(f"✓ {name}: correct ({item.points} point{'s' if item.points != 1 else ''})")
    return True


def solution_source(name: str, symbol: str) -> str:
    """Code for a blank cell that binds ``symbol`` to exercise ``name``'s reference solution."""
    return (
        f"# Reference solution, filled in by the course's tests.\n"
        f"{symbol} = ac.exercises.solution({name!r})"
    )


def fill_solutions(nb):
    """Replace every ``exercise`` blank in notebook ``nb`` (nbformat) with its reference
    solution."""
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
