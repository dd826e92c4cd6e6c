"""Every notebook executes on CPU in smoke mode: papermill with the exercises solved, nbval as is.

papermill runs a copy whose blanks hold the reference solutions (every check passes); nbval runs
the lesson as a learner opens it, blanks untouched (Run All must reach the quiz without an error).
"""

import os
import subprocess

import nbformat
import pytest
from conftest import NOTEBOOKS, ROOT

from amp_course.device import pick_device
from amp_course.runs import execute as _executed

# Each lesson must run in well under a minute in smoke mode: a benchmark measures it (make
# bench-smoke, reports/smoke/); here the budget is only the guard against a hanging cell.
SMOKE_BUDGET_S = 60


def _errors(nb):
    return [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]


@pytest.mark.notebook
@pytest.mark.executes_lessons
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_papermill_smoke(path, tmp_path, monkeypatch):
    # The quiz writes its answer file (with the learner's choice order) when it is shown: keep it
    # out of notebooks/, where a concurrent run of the same lesson would share it.
    monkeypatch.setenv("AMP_COURSE_ANSWERS_DIR", str(tmp_path))
    out = ROOT / "executed" / path.name
    out.parent.mkdir(exist_ok=True)
    # The device DEVICE="auto" picks; the site shows the executed copies' figures.
    executed = _executed.run_lesson(
        path, out, smoke=True, device=pick_device("auto"), timeout_s=2 * SMOKE_BUDGET_S
    )
    assert not _errors(executed)
    # The lesson computed and showed something: printed text, and a figure where it plots.
    code = [c for c in executed.cells if c.cell_type == "code"]
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert any(o.get("output_type") == "stream" for o in outputs)
    if any("matplotlib" in c.source for c in code):
        figures = [o for o in outputs if "image/png" in o.get("data", {})]
        assert figures, f"{path.name} imports matplotlib but showed no figure"


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_run_all_with_blanks_untouched(path, tmp_path):
    """Run All before answering: unfinished exercises say so and the lesson reaches its quiz."""
    env = {
        **os.environ,
        "AMP_COURSE_SMOKE": "1",
        "MPLBACKEND": "Agg",
        "AMP_COURSE_ANSWERS_DIR": str(tmp_path),
    }
    nb = nbformat.read(path, as_version=4)
    code_cells = sum(c.cell_type == "code" for c in nb.cells)
    assert nb.cells[-1].cell_type == "code" and "ac.quiz.show" in nb.cells[-1].source
    result = subprocess.run(
        _executed.nbval_command([path], 120),
        cwd=path.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # One test per code cell: every cell ran without an error, the quiz (the last cell) included.
    assert f"{code_cells} passed" in result.stdout, result.stdout[-2000:]
