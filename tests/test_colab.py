"""A Colab-style start: a fresh environment with Jupyter but without the course, a notebook opened
outside the repository, and the setup cell alone must install the package and find data/."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

from amp_course.lesson import SETUP_CELL
from amp_course.tooling.executed import printed

CHECK_CELL = """
import amp_course, pathlib
package_root = pathlib.Path(amp_course.__file__).resolve().parents[1]
assert package_root == pathlib.Path("amp-course").resolve(), package_root
images, labels = ac.data.load_mnist_subset()
print("digits", len(labels))
print("data", ac.data.data_dir())
print("quizzes", ac.quiz.QUIZ_DIR == package_root / "quizzes" and ac.quiz.QUIZ_DIR.is_dir())
"""


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _fresh_env_with_jupyter(tmp_path: Path) -> Path:
    """A new venv that sees this environment's libraries (as Colab has torch and Jupyter, and pip)
    but not the course package: a plain path entry does not run the editable install's .pth hook.
    pip comes from there too (``python -m pip`` in the venv installs into the venv)."""
    env = tmp_path / "colab-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "colab_base.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    missing = subprocess.run(
        [str(python), "-c", "import amp_course"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_clean_env(),
    )
    assert missing.returncode != 0, "the fresh environment must not have the course installed"
    return python


@pytest.mark.notebook
def test_setup_cell_installs_the_course_like_colab(tmp_path):
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True)
    if head.returncode != 0:
        pytest.skip("needs a git checkout to clone from")
    python = _fresh_env_with_jupyter(tmp_path)
    workdir = tmp_path / "content"  # Colab's working folder, far from the repository
    workdir.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP_CELL), nbformat.v4.new_code_cell(CHECK_CELL)]
    notebook = workdir / "lesson.ipynb"
    nbformat.write(nb, notebook)
    env = _clean_env()
    env.update(
        AMP_COURSE_SIMULATE_COLAB="1",
        AMP_COURSE_SOURCE=str(ROOT),
        PATH=f"{python.parent}:{env['PATH']}",
    )
    run = subprocess.run(
        [
            str(python),
            "-m",
            "papermill",
            str(notebook),
            str(workdir / "out.ipynb"),
            "--cwd",
            str(workdir),
            "-k",
            "python3",
            "--execution-timeout",
            "300",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    out = nbformat.read(workdir / "out.ipynb", as_version=4)
    text = "".join(printed(cell) for cell in out.cells)
    assert "digits 5000" in text
    assert f"data {workdir / 'amp-course' / 'data'}" in text
    assert "quizzes True" in text
