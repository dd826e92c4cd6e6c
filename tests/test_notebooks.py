"""Every notebook executes on CPU in smoke mode, under papermill and under nbval."""

import os
import subprocess
import sys
import time

import nbformat
import papermill
import pytest
from conftest import NOTEBOOKS, ROOT

from amp_course import executed as _executed
from amp_course.device import pick_device
from amp_course.exercises import fill_solutions

SMOKE_BUDGET_S = 60  # each lesson must run in well under a minute in smoke mode


def _errors(nb):
    return [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]


def _with_solutions(path, tmp_path):
    """A copy of the notebook beside the original, its exercise blanks filled with solutions."""
    nb = fill_solutions(nbformat.read(path, as_version=4))
    filled = path.parent / f".solved-{tmp_path.name}-{path.name}"
    nbformat.write(nb, filled)
    return filled


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_papermill_smoke(path, tmp_path):
    out = ROOT / "executed" / path.name
    out.parent.mkdir(exist_ok=True)
    filled = _with_solutions(path, tmp_path)
    start = time.perf_counter()
    try:
        with _executed.figures_inline():  # the site shows the executed copies' figures
            papermill.execute_notebook(
                str(filled),
                str(out),
                parameters={"SMOKE": True},
                cwd=str(path.parent),
                kernel_name="python3",
                execution_timeout=2 * SMOKE_BUDGET_S,
                progress_bar=False,
            )
    finally:
        filled.unlink()
    elapsed = time.perf_counter() - start
    _executed.stamp(out, pick_device("auto"), smoke=True)  # the device DEVICE="auto" picks
    executed = nbformat.read(out, as_version=4)
    assert not _errors(executed)
    # The lesson computed and showed something: printed text, and a figure where it plots.
    code = [c for c in executed.cells if c.cell_type == "code"]
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert any(o.get("output_type") == "stream" for o in outputs)
    if any("matplotlib" in c.source for c in code):
        figures = [o for o in outputs if "image/png" in o.get("data", {})]
        assert figures, f"{path.name} imports matplotlib but showed no figure"
    assert elapsed < SMOKE_BUDGET_S, f"{path.name} took {elapsed:.0f} s in smoke mode"


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_nbval_lax(path, tmp_path):
    env = {**os.environ, "AMP_COURSE_SMOKE": "1", "MPLBACKEND": "Agg"}
    filled = _with_solutions(path, tmp_path)
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--nbval-lax",
                "--nbval-cell-timeout=120",
                str(filled),
            ],
            cwd=path.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        filled.unlink()
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
