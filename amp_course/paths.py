"""Where the files shipped with the course are: the published quizzes and the MNIST files.

A wheel (``pip install .``) carries them inside the package, in ``amp_course/course_files/``
(pyproject.toml maps them there); a git checkout, an editable install and the Colab setup cell's
clone have them at the repository's root, beside the package. Every reader asks ``course_dir``,
so a notebook finds them from any folder, however the course was installed.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_DIR = PACKAGE_DIR / "course_files"  # only in an installed wheel


def course_dir(name: str) -> Path:
    """The shipped folder ``name`` (``"quizzes"`` or ``"data"``): in the wheel, else beside it."""
    bundled = BUNDLED_DIR / name
    return bundled if bundled.is_dir() else PACKAGE_DIR.parent / name
