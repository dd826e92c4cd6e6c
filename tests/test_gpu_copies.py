"""The committed GPU runs, read in one place: a lesson shows what a GPU run printed, only results,
labelled with the run, from the same copies the website and the GPU guide's results count."""

import json
import subprocess
import sys

import nbformat

from amp_course import gpu_runs
from amp_course.tooling import gpu_copies

STAMP = {
    "device": "NVIDIA H100 80GB HBM3",
    "hardware": "NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)",
    "torch": "2.11.0+cu130",
    "date": "2026-11-23T07:51:26+00:00",
    "mode": "full",
}


def _notebook(path, source, printed, stamp=True):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "c1"
    if printed is not None:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    nb.cells = [cell]
    if stamp:
        nb.metadata["amp_course"] = dict(STAMP)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _run(reports, name, source, printed, *, date, status="passed", report="ok", **record):
    """A committed run's folder holding lesson 09's copy and its report.json."""
    _notebook(reports / name / "notebooks" / "09.ipynb", source, printed)
    notebooks = [{"notebook": "09.ipynb", "status": status}]
    text = json.dumps({"date": date, "notebooks": notebooks, **record})
    (reports / name / "report.json").write_text(text if report == "ok" else text[:20])


def _found(reports, notebooks):
    found = gpu_runs.committed_outputs(
        "09.ipynb", "c1", containing="FP8 / bf16", reports=reports, notebooks=notebooks
    )
    return [(f.run, f.same_code) for f in found], found


def test_finds_results_newest_first_and_says_whether_the_code_was_the_same(tmp_path):
    reports, notebooks = tmp_path / "reports", tmp_path / "notebooks"
    _notebook(notebooks / "09.ipynb", "run()", None, stamp=False)
    _run(reports, "h100", "run()", "FP8 / bf16 step time: 0.8x\n", date="2026-11-23")
    _run(reports, "old", "run_old()", "FP8 / bf16 step time: 1x\n", date="2026-10-01")
    _run(reports, "skipped", "run()", "torchao is not installed\n", date="2026-11-24")
    runs, found = _found(reports, notebooks)
    assert runs == [("h100", True), ("old", False)]
    assert found[0].where == "NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, 2026-11-23"
    assert found[0].text == "FP8 / bf16 step time: 0.8x\n"


def test_the_copies_no_other_reader_counts_are_not_shown(tmp_path):
    """A rehearsal of a smaller GPU, an interrupted run and a run that failed the lesson print
    nothing a lesson shows, as the website and the GPU guide's results show none of them."""
    reports, notebooks = tmp_path / "reports", tmp_path / "notebooks"
    _notebook(notebooks / "09.ipynb", "run()", None, stamp=False)
    _run(reports, "h100", "run()", "FP8 / bf16 step time: 0.8x\n", date="2026-11-23")
    printed = "FP8 / bf16 step time: 0.9x\n"
    _run(reports, "h100-t4-emulated", "run()", printed, date="2026-11-25", emulated="Tesla T4")
    _run(reports, "cut", "run()", printed, date="2026-11-26", report="truncated")
    _run(reports, "failed", "run()", printed, date="2026-11-27", status="failed")
    assert _found(reports, notebooks)[0] == [("h100", True)]
    assert gpu_copies.gpu_reports(reports=reports) == [reports / "failed", reports / "h100"]


def test_no_committed_run_gives_nothing(tmp_path):
    assert gpu_runs.committed_outputs("09.ipynb", "c1", containing="x", reports=tmp_path) == []


def test_a_cell_of_several_lines_is_the_same_code_and_a_lesson_reads_without_nbformat(tmp_path):
    """Notebook files keep a multi-line source as a list of lines: compared whole. A lesson's
    kernel reads the copies as plain JSON: importing nbformat (its schema validator pulls in
    jsonschema's format checkers) cost seconds of lesson 09's run on a slow CPU."""
    reports, notebooks = tmp_path / "reports", tmp_path / "notebooks"
    code = "x = 1\nprint('FP8 / bf16', x)"
    _notebook(notebooks / "09.ipynb", code, None, stamp=False)
    _run(reports, "h100", code, "FP8 / bf16 1\n", date="2026-11-23")
    assert isinstance(json.loads((notebooks / "09.ipynb").read_text())["cells"][0]["source"], list)
    assert _found(reports, notebooks)[0] == [("h100", True)]
    probe = (
        "import sys, pathlib; from amp_course import gpu_runs; "
        f"found = gpu_runs.committed_outputs('09.ipynb', 'c1', containing='FP8', "
        f"reports=pathlib.Path({str(reports)!r}), notebooks=pathlib.Path({str(notebooks)!r})); "
        "print(len(found), 'nbformat' in sys.modules, 'jsonschema' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.split() == ["1", "False", "False"], done.stdout + done.stderr
