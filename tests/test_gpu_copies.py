"""A lesson shows what a committed GPU run printed: only results, labelled with the run."""

import nbformat

from amp_course import gpu_copies


def _notebook(path, source, printed, stamp=True):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "c1"
    if printed is not None:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    nb.cells = [cell]
    if stamp:
        nb.metadata["amp_course"] = {
            "device": "NVIDIA H100 80GB HBM3",
            "hardware": "NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)",
            "torch": "2.11.0+cu130",
            "date": "2026-11-23T07:51:26+00:00",
            "mode": "full",
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def test_finds_results_and_says_whether_the_code_was_the_same(tmp_path):
    reports, notebooks = tmp_path / "reports", tmp_path / "notebooks"
    _notebook(notebooks / "09.ipynb", "run()", None, stamp=False)
    _notebook(reports / "h100" / "notebooks" / "09.ipynb", "run()", "FP8 / bf16 step time: 0.8x\n")
    _notebook(reports / "old" / "notebooks" / "09.ipynb", "run_old()", "FP8 / bf16 step time: 1x\n")
    _notebook(reports / "skipped" / "notebooks" / "09.ipynb", "run()", "torchao is not installed\n")
    found = gpu_copies.committed_outputs(
        "09.ipynb", "c1", containing="FP8 / bf16", reports=reports, notebooks=notebooks
    )
    assert [(f.run, f.same_code) for f in found] == [("h100", True), ("old", False)]
    assert found[0].where == "NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, 2026-11-23"
    assert found[0].text == "FP8 / bf16 step time: 0.8x\n"


def test_no_committed_run_gives_nothing(tmp_path):
    assert gpu_copies.committed_outputs("09.ipynb", "c1", containing="x", reports=tmp_path) == []
