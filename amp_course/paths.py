"""Where the course's files are: the checkout's root, the lessons' notebooks, and the files shipped
with the course (the published quizzes and the MNIST files).

A wheel (``pip install .``) carries the shipped files inside the package, in
``amp_course/course_files/`` (pyproject.toml maps them there); a git checkout, an editable install
and the Colab setup cell's clone have them at the repository's root, beside the package. Every
reader asks ``course_dir``, so a notebook finds them from any folder, however the course was
installed. What only a checkout has (the notebooks, ``reports/``, ``README.md``, the guides in
``docs/``) is under ``ROOT``, at the paths named below: the layout and the lessons' order are
named here once.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent  # the checkout's root (in an installed wheel: site-packages)
BUNDLED_DIR = PACKAGE_DIR / "course_files"  # only in an installed wheel

# The checkout's layout, relative to its root; every module composes its paths from these names.
NOTEBOOKS = Path("notebooks")  # the lessons and labs, committed without outputs
EXECUTED = Path("executed")  # the tests' smoke-mode executed copies, stamped
REPORTS = Path("reports")  # measured runs: the benchmark's default output folder
GPU_REPORTS = REPORTS / "gpu"  # one folder per GPU run (reports/gpu/<device>/)
SMOKE_REPORTS = REPORTS / "smoke"  # the CPU smoke benchmark of every lesson
GRADING_REPORTS = REPORTS / "grading"  # the grading throughput benchmark
SUITE_REPORTS = REPORTS / "suite"  # the test suite's time (make test's pytest)
SITE = Path("site")  # the website's conf.py and _static/; its build goes to site/_build
QUIZZES = Path("quizzes")  # published quizzes (their sources in quizzes/source/)
DATA = Path("data")  # the shipped MNIST files
README = Path("README.md")  # its "Lessons" table is the course's order (``lesson_notebooks``)
DOCS = Path("docs")  # the guides (instructors, GPU run, helper package, contributing): site pages
GPU_GUIDE = DOCS / "gpu-run.md"  # holds the GPU results section ``amp-course gpu-results`` writes
LESSONS_HEADING = "## Lessons"


def course_dir(name: str | Path) -> Path:
    """The shipped folder ``name`` (``QUIZZES`` or ``DATA``): in the wheel, else beside it."""
    bundled = BUNDLED_DIR / name
    return bundled if bundled.is_dir() else ROOT / name


def notebooks_in(folder: Path) -> list[Path]:
    """The notebooks in ``folder``, sorted by name, hidden files aside."""
    return sorted(p for p in Path(folder).glob("*.ipynb") if not p.name.startswith("."))


def readme_order(root: Path | None = None) -> list[str]:
    """The lessons' names in the order the README's "Lessons" table lists them (none if absent;
    a name listed twice comes twice)."""
    readme = (ROOT if root is None else Path(root)) / README
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    start = text.find(f"\n{LESSONS_HEADING}\n")
    end = text.find("\n## ", start + 1) if start >= 0 else -1
    table = "" if start < 0 else text[start:] if end < 0 else text[start:end]
    return re.findall(r"`([^`/]+)\.ipynb`", table)


def lesson_notebooks(root: Path | None = None) -> list[Path]:
    """Every lesson and lab in ``root/notebooks`` (the checkout's by default), in course order: the
    README's "Lessons" table's, then any notebook it does not list, by name. The GPU run, the
    smoke benchmark, the website and the tests all take the list from here."""
    order: dict[str, int] = {}
    for index, name in enumerate(readme_order(root)):
        order.setdefault(name, index)
    found = notebooks_in((ROOT if root is None else Path(root)) / NOTEBOOKS)
    return sorted(found, key=lambda p: (p.stem not in order, order.get(p.stem, 0), p.name))
