"""Where the course's files are: the checkout's root, the lessons' notebooks, and the files shipped
with the course (the published quizzes and the MNIST files).

A wheel (``pip install .``) carries the shipped files inside the package, in
``amp_course/course_files/`` (pyproject.toml maps them there); a git checkout, an editable install
and the Colab setup cell's clone have them at the repository's root, beside the package. Every
reader asks ``course_dir``, so a notebook finds them from any folder, however the course was
installed. What only a checkout has (the notebooks, ``reports/``, ``README.md``) is under ``ROOT``.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent  # the checkout's root (in an installed wheel: site-packages)
BUNDLED_DIR = PACKAGE_DIR / "course_files"  # only in an installed wheel


def course_dir(name: str) -> Path:
    """The shipped folder ``name`` (``"quizzes"`` or ``"data"``): in the wheel, else beside it."""
    bundled = BUNDLED_DIR / name
    return bundled if bundled.is_dir() else ROOT / name


def notebooks_in(folder: Path) -> list[Path]:
    """The notebooks in ``folder``, sorted by name (course order), hidden files aside."""
    return sorted(p for p in Path(folder).glob("*.ipynb") if not p.name.startswith("."))


def lesson_notebooks(root: Path | None = None) -> list[Path]:
    """Every lesson and lab, in course order: the notebooks in ``root/notebooks`` (the checkout's
    by default). The GPU run, the smoke benchmark, the website and the tests all take the list
    from here."""
    return notebooks_in((ROOT if root is None else Path(root)) / "notebooks")
