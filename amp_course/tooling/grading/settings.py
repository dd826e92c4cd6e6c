"""One grading run's settings, read and checked once: the key, the lessons, the masters, the
sandbox and the time limits.

``Settings.load`` is what ``amp-course grade`` calls; every level of the run (a submission, a
lesson, a kernel) takes the one object instead of a row of positional values. Anything it cannot
use (an unreadable key, an unknown lesson, no master notebooks) raises ``SettingsError`` with a
one-line reason, before a single kernel starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ... import exercises
from ... import quiz as _quiz
from ...paths import NOTEBOOKS, ROOT, notebooks_in
from . import sandbox
from .notebooks import CheckItem, check_items


class SettingsError(ValueError):
    """A grading run cannot start: the message says what to pass instead."""


@dataclass(frozen=True)
class Master:
    """A master notebook with graded checks, read once for the whole run."""

    path: Path
    notebook: nbformat.NotebookNode
    items: tuple[CheckItem, ...]

    @property
    def lesson(self) -> str:
        return self.path.stem


@dataclass(frozen=True)
class Settings:
    key_path: Path  # the instructor's quiz key (kept out of the kernels' reach)
    key: dict  # its content; its secret also seeds the exercises' hidden inputs
    masters: tuple[Master, ...]  # the lessons graded that have exercises
    lessons: tuple[str, ...]  # every lesson graded (exercises, quizzes or both)
    sandbox: sandbox.Sandbox  # the kind chosen; each submission gets a fresh one
    cell_timeout: int = 120  # seconds per cell
    submission_timeout: float = 900.0  # seconds per submission, in all
    jobs: int = 1  # submissions graded at once

    @property
    def secret(self) -> str:
        return self.key["secret"]

    @property
    def threads(self) -> int:
        """torch threads per kernel: the cores shared between the kernels running at once."""
        return max(1, (os.cpu_count() or 1) // self.jobs) if self.jobs > 1 else 0

    @classmethod
    def load(
        cls,
        key_path,
        masters=None,
        lessons=None,
        sandbox_kind: str = "auto",
        memory: int = sandbox.DEFAULT_MEMORY,
        image: str = sandbox.DEFAULT_IMAGE,
        cell_timeout: int = 120,
        submission_timeout: float = 900.0,
        jobs: int = 1,
    ) -> Settings:
        """Read the key and the masters, pick the lessons and the sandbox (it may warn)."""
        try:
            key = _quiz.load_key(key_path)
        except _quiz.QuizSchemaError as error:
            why = f"{error}; pass the key `amp-course quiz publish --key` wrote"
            raise SettingsError(why) from None
        if cell_timeout <= 0 or submission_timeout <= 0 or jobs <= 0:
            raise SettingsError("--cell-timeout, --timeout and --jobs must be positive")
        paths = master_paths(masters)
        found = {p.stem for p in paths} | set(key["lessons"])
        chosen = tuple(sorted(found)) if lessons is None else tuple(dict.fromkeys(lessons))
        unknown = [name for name in chosen if name not in found]
        if unknown or not chosen:
            raise SettingsError(
                f"unknown lesson(s) {', '.join(unknown) or '(none given)'}; "
                f"the masters and the key have: {', '.join(sorted(found))}"
            )
        read = [master for path in paths if path.stem in chosen if (master := _master(path))]
        for name in exercises.names():  # every module the verdicts need, imported before any
            try:  # kernel runs: nothing a kernel writes is imported later
                exercises.solution(name)
            except Exception as error:  # a broken course: say which reference
                raise SettingsError(f"the reference of {name} cannot be loaded: {error}") from None
        try:
            box = sandbox.choose(sandbox_kind, memory, image)
        except (ValueError, sandbox.SandboxUnavailable) as error:  # unknown, or not here
            raise SettingsError(str(error)) from None
        jobs = 1 if box.kind == "none" else jobs  # a changed file is traced to its submission
        return cls(
            Path(key_path), key, tuple(read), chosen, box, cell_timeout, submission_timeout, jobs
        )


def _master(path: Path) -> Master | None:
    try:
        notebook = nbformat.read(path, as_version=4)
        items = tuple(check_items(notebook))
    except (OSError, ValueError, KeyError) as error:
        raise SettingsError(f"{path}: not a usable master notebook: {error}") from None
    return Master(path, notebook, items) if items else None


def masters_folder(masters=None) -> Path:
    """The folder of master notebooks: ``masters``, or the course's ``notebooks/``."""
    return Path(masters) if masters else ROOT / NOTEBOOKS


def master_paths(masters=None) -> list[Path]:
    """The master notebooks: a folder's ``*.ipynb`` (default: the course's ``notebooks/``)."""
    folder = masters_folder(masters)
    if not folder.is_dir():
        raise SettingsError(f"{folder} is not a folder of master notebooks (--masters)")
    paths = notebooks_in(folder)
    if not paths:
        raise SettingsError(f"no master notebooks (*.ipynb) in {folder} (--masters)")
    return paths
