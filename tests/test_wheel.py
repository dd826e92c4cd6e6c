"""The wheel carries the course: every module of the package, the quizzes and the data; installed
(not editable) in a fresh environment, a lesson opened in a folder far from the checkout starts
and finds its quiz, and ``amp-course check-data`` finds the data."""

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, tagged

from amp_course.tooling.executed import printed

LESSON = ROOT / "notebooks" / "01_number_formats.ipynb"


def _run(*command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{command[:3]}: {result.stdout[-2000:]}{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of a fresh venv with the wheel installed, a folder outside the checkout, env)."""
    tmp = tmp_path_factory.mktemp("wheel")
    _run(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
        "-w", str(tmp / "dist"), str(ROOT),
    )  # fmt: skip
    (wheel,) = (tmp / "dist").glob("amp_course-*.whl")
    venv = tmp / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", str(venv))  # this pip installs into it
    python = venv / "bin" / "python"
    site = _run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    # torch, Jupyter and the rest come from the test environment (a plain path entry: its .pth
    # files, the editable install of the checkout among them, are not run); the course does not.
    Path(site.stdout.strip(), "test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
        "--no-index", str(wheel),
    )  # fmt: skip
    outside = tmp / "elsewhere"
    outside.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "AMP_COURSE_DATA", "AMP_COURSE_ANSWERS_DIR")
    }
    env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"
    return python, outside, env, wheel


def test_wheel_holds_every_module_the_published_quizzes_and_the_mnist_files(installed):
    names = set(zipfile.ZipFile(installed[3]).namelist())
    package = ROOT / "amp_course"
    modules = {p.relative_to(ROOT).as_posix() for p in package.rglob("*.py")}
    assert modules <= names, sorted(modules - names)
    for quiz in (ROOT / "quizzes").glob("*.yaml"):
        assert f"amp_course/course_files/quizzes/{quiz.name}" in names
    assert "amp_course/course_files/data/mnist_5k.csv.gz" in names
    assert "amp_course/course_files/data/mnist_full.tar.xz" in names
    assert not any("MNIST/" in name for name in names)  # never a downloaded torchvision copy


def test_check_data_runs_outside_the_checkout(installed):
    python, outside, env, _ = installed
    result = _run(str(python.parent / "amp-course"), "check-data", cwd=outside, env=env)
    assert "SHA-256 verified" in result.stdout  # and the file checked is the wheel's:
    assert "site-packages" in result.stdout and str(ROOT) not in result.stdout, result.stdout


@pytest.mark.notebook
def test_a_lesson_starts_from_any_folder(installed):
    # The lesson's setup, parameters and settings cells and its quiz: what finds the course's
    # files (the whole lesson runs in tests/test_notebooks.py).
    python, outside, env, _ = installed
    notebook = outside / LESSON.name
    lesson = nbformat.read(LESSON, as_version=4)
    code = [c for c in lesson.cells if c.cell_type == "code"]
    settings = code[code.index(tagged(lesson, "parameters")[0]) + 1]
    assert "ac.lesson.start(" in settings.source
    lesson.cells = [code[0], tagged(lesson, "parameters")[0], settings, *tagged(lesson, "quiz")]
    lesson.cells.append(
        nbformat.v4.new_code_cell('print("package", ac.__file__, "quizzes", ac.quiz.QUIZ_DIR)')
    )
    nbformat.write(lesson, notebook)
    env = {**env, "AMP_COURSE_SMOKE": "1", "AMP_COURSE_QUIZ_MODE": "text"}
    _run(
        str(python), "-m", "papermill", str(notebook), str(outside / "out.ipynb"),
        "--cwd", str(outside), "-k", "python3", "--execution-timeout", "300",
        cwd=outside, env=env, timeout=600,
    )  # fmt: skip
    out = nbformat.read(outside / "out.ipynb", as_version=4)
    text = "".join(printed(cell) for cell in out.cells)
    assert "Quiz:" in text  # the lesson's quiz was found and shown
    (where,) = [line for line in text.splitlines() if line.startswith("package ")]
    assert where.count("site-packages") == 2 and str(ROOT) not in where, where
