import os
import runpy
import sys

import pytest
import torch
from conftest import PYTHON_KERNEL, ROOT, tagged

from amp_course import cli
from amp_course.tooling.runs import execute, gpu, parts


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the no-GPU refusal")
def test_gpu_run_fails_fast_without_gpu(tmp_path, monkeypatch, capsys):
    # The command line itself (`python -m amp_course gpu`: the package's __main__), run here.
    monkeypatch.setattr(sys, "argv", ["amp-course", "gpu", "--out", str(tmp_path)])
    monkeypatch.delitem(sys.modules, "amp_course.__main__", raising=False)  # as `python -m` does
    with pytest.raises(SystemExit) as exit_status:
        runpy.run_module("amp_course", run_name="__main__")
    assert exit_status.value.code == 2
    stderr = capsys.readouterr().err
    assert "needs a CUDA GPU" in stderr and "make test" in stderr
    assert not any(tmp_path.iterdir()), "nothing is written without a GPU"


@pytest.mark.gpu
def test_environment_record_names_the_device():
    record = gpu.environment_record(torch.device("cuda"))
    assert record["device"] and record["versions"]["torch"] == torch.__version__
    assert record["date"] and record["driver"] and record["capability"][0] >= 3


def test_gpu_run_covers_every_notebook_with_gpu_cells():
    names = {p.name for p in gpu.GpuRun().lessons}
    assert {"09_beyond_autocast.ipynb", "labs_beyond_autocast.ipynb"} <= names
    assert names == {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}


def test_lessons_run_with_their_parameters_and_nbval_judges_each_copy(tmp_path):
    # The fp16 pass (what a Colab T4 runs) reaches the lesson as its AMP_DTYPE parameter; a lesson
    # that fails is reported and does not stop the next; nbval's verdicts are read per notebook.
    # Two small lessons stand in for the course's (tests/test_notebooks.py executes those).
    import nbformat

    from amp_course.tooling.executed import read_stamp

    parameters = nbformat.v4.new_code_cell('SMOKE = False\nDEVICE = "auto"\nAMP_DTYPE = "auto"')
    parameters.metadata["tags"] = ["parameters"]
    broken, lesson = tmp_path / "00_broken.ipynb", tmp_path / "01_lesson.ipynb"
    sources = {
        broken: "raise ValueError('a broken cell')",
        # ... and its kernel talks over a Unix socket: TCP ports race (tooling.runs.kernels)
        lesson: "import ipykernel, json\n"
        "transport = json.loads(ipykernel.get_connection_info())['transport']\n"
        "print(AMP_DTYPE, SMOKE, DEVICE, transport)",
    }
    for path, source in sources.items():
        cells = [parameters, nbformat.v4.new_code_cell(source)]
        nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=PYTHON_KERNEL), path)
    out = tmp_path / "gpu" / "notebooks"  # the run's layout, which its nbval verdicts are read by
    results = execute.run_notebooks(
        [broken, lesson], out, 300, smoke=True, device="cpu", parameters={"AMP_DTYPE": "fp16"}
    )
    assert results[0]["status"] == "failed" and "a broken cell" in results[0]["error"]
    assert results[1]["status"] == "passed", results[1]["error"]
    assert results[1]["seconds"] > 0
    nb = nbformat.read(out / lesson.name, as_version=4)
    injected = tagged(nb, "injected-parameters")
    assert len(injected) == 1 and 'AMP_DTYPE = "fp16"' in injected[0].source
    assert nb.cells[-1].outputs[0]["text"] == "fp16 True cpu ipc\n"
    assert read_stamp(nb)["mode"] == "smoke"
    # nbval then runs the executed copies again (the failed run's partial copy included).
    assert gpu.run_nbval([out / broken.name, out / lesson.name], out, 60) != 0
    assert parts.nbval_results(out) == {broken.name: "failed", lesson.name: "passed"}


def test_parts_of_the_run_name_their_files():
    assert parts.part_name("report", "", ".json") == "report.json"
    assert parts.part_name("nbval", "a", ".xml") == "nbval-a.xml"


def test_run_folders_say_what_the_run_changed():
    name = "NVIDIA H100 80GB HBM3"
    assert gpu.run_folder(name) == "nvidia-h100-80gb-hbm3"
    assert gpu.run_folder(name, "fp16") == "nvidia-h100-80gb-hbm3-fp16"
    assert gpu.run_folder(name, None, "t4") == "nvidia-h100-80gb-hbm3-t4-emulated"


def test_the_t4_rehearsal_reaches_every_lesson_kernel(tmp_path, monkeypatch):
    # Simulated GPU: the run's own steps are replaced, its choices are checked.
    import json

    from amp_course import emulation

    seen = {}

    def fake_run_notebooks(notebooks, out_dir, timeout_s, parameters=None, **kwargs):
        seen["env"], seen["parameters"] = os.environ.get(emulation.ENV), parameters
        return [
            {"notebook": p.name, "status": "passed", "seconds": 1.0, "error": ""} for p in notebooks
        ]

    monkeypatch.setenv(emulation.ENV, "")  # main() sets it; the test puts it back
    monkeypatch.setattr(gpu, "require_gpu", lambda: torch.device("cpu"))
    record = {"device": "NVIDIA H100 80GB HBM3", "driver": "x", "versions": {"torch": "2.11"}}
    monkeypatch.setattr(gpu, "environment_record", lambda device: dict(record))
    monkeypatch.setattr(gpu, "run_notebooks", fake_run_notebooks)
    monkeypatch.setattr(gpu, "run_bench", lambda *args: pytest.fail("no bench when emulated"))
    lesson = ROOT / "notebooks" / "00_scenario.ipynb"
    args = ["--out", str(tmp_path), "--emulate", "t4", "--skip-nbval", "--notebooks", str(lesson)]
    assert cli.main(["gpu", *args]) == 0
    assert seen == {"env": "t4", "parameters": None}  # AUTO resolves to fp16 in the kernel itself
    assert os.environ[emulation.ENV] == ""  # put back after the run: later kernels rehearse nothing
    report = json.loads(
        (tmp_path / "nvidia-h100-80gb-hbm3-t4-emulated" / "report.json").read_text()
    )
    assert report["emulated"] == "Tesla T4" and report["bench"].startswith("skipped")


def test_a_new_lesson_joins_the_run_and_the_site_without_a_list_to_edit(tmp_path):
    from amp_course.paths import lesson_notebooks
    from amp_course.tooling.website import sources

    (tmp_path / "notebooks").mkdir()
    for name in ("00_scenario", "10_where_time_goes", "labs_bug_hunts", ".hidden"):
        (tmp_path / "notebooks" / f"{name}.ipynb").write_text("{}")
    names = [p.stem for p in lesson_notebooks(tmp_path)]
    assert names == ["00_scenario", "10_where_time_goes", "labs_bug_hunts"]
    assert sources.lessons(tmp_path) == names


def test_the_benchmark_is_called_as_a_library_and_a_failure_is_recorded(tmp_path, monkeypatch):
    # Simulated GPU and benchmark: the run's choices are checked, not the timings.
    import json

    from amp_course import bench

    calls = []

    def fake_run(config, device):
        calls.append((config, device))
        if len(calls) > 1:
            raise RuntimeError("CUDA error: an illegal memory access")
        return {"results": {}}

    monkeypatch.setattr(bench, "run", fake_run)
    monkeypatch.setattr(bench, "format_report", lambda report: "table")
    monkeypatch.setattr(bench, "write_report", lambda report, out: {"json": out / "bench.json"})
    assert gpu.run_bench(tmp_path, torch.device("cpu")) == "passed"
    config, device = calls[0]
    assert config == bench.BenchConfig.full(compile=True, fused=True) and device.type == "cpu"
    monkeypatch.setattr(gpu, "require_gpu", lambda: torch.device("cpu"))
    record = {"device": "NVIDIA H100 80GB HBM3", "driver": "x", "versions": {"torch": "2.11"}}
    monkeypatch.setattr(gpu, "environment_record", lambda device: dict(record))
    # No lesson runs (nbval only, and nbval skipped): only the benchmark, which fails.
    assert cli.main(["gpu", "--out", str(tmp_path), "--nbval-only", "--skip-nbval"]) == 1
    report = json.loads((tmp_path / "nvidia-h100-80gb-hbm3" / "report.json").read_text())
    assert report["bench"] == "failed (RuntimeError: CUDA error: an illegal memory access)"
