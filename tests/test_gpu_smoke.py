"""The CUDA smoke pass (``amp-course gpu --smoke``) on a CPU: small notebooks stand in for the
lessons, and nbval really executes them, several at a time, plainly and under the T4 rehearsal."""

import json

import nbformat
import pytest
import torch
from conftest import PYTHON_KERNEL

from amp_course import cli, emulation
from amp_course.lesson import SMOKE_ENV
from amp_course.paths import ROOT
from amp_course.tooling.runs import gpu, gpu_smoke


def _notebook(path, *sources):
    cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=PYTHON_KERNEL), path)
    return path


@pytest.fixture
def lessons(tmp_path, monkeypatch):
    """A lesson that records the settings its kernel saw, one that fails, one that hangs."""
    seen = tmp_path / "seen"
    seen.mkdir()
    monkeypatch.setenv("SMOKE_TEST_SEEN", str(seen))
    record = (
        "import os, pathlib, json, ipykernel\n"
        f"rehearsal = os.environ.get({emulation.ENV!r}) or 'plain'\n"
        "pathlib.Path(os.environ['SMOKE_TEST_SEEN'], rehearsal).write_text(\n"
        f"    os.environ[{SMOKE_ENV!r}] + ' ' + os.environ['MPLBACKEND'] + ' '\n"
        "    + os.environ['PYTHONPATH'].split(os.pathsep)[0] + ' '\n"
        "    + json.loads(ipykernel.get_connection_info())['transport'])"
    )
    folder = tmp_path / "lessons"
    folder.mkdir()
    return {
        "ok": _notebook(folder / "01_ok.ipynb", "x = 1", record),
        "broken": _notebook(folder / "02_broken.ipynb", "x = 1", "1 / 0  # the GPU-only crash"),
        "hangs": _notebook(folder / "03_hangs.ipynb", "import time\ntime.sleep(60)"),
        "seen": seen,
    }


def test_each_lesson_runs_under_nbval_plainly_and_rehearsed(tmp_path, lessons):
    jobs = gpu_smoke.jobs_for([lessons["ok"], lessons["broken"]])
    jobs.append(gpu_smoke.SmokeJob(lessons["hangs"]))
    folder = tmp_path / "smoke"
    summary = gpu_smoke.run(jobs, folder, {"device": "a stand-in"}, workers=5, cell_timeout=3)
    # The kernels ran at smoke sizes, without figures' windows, with and without the rehearsal.
    # The checkout is on the kernel's path: the filled copy runs outside it. The kernels talk over
    # Unix sockets: six lessons at a time racing for TCP ports left one hung (.runs.kernels).
    assert (lessons["seen"] / "plain").read_text() == f"1 Agg {ROOT} ipc"
    assert (lessons["seen"] / "t4").read_text() == f"1 Agg {ROOT} ipc"
    verdicts = {(v["notebook"], v["rehearsal"]): v for v in summary["verdicts"]}
    assert set(verdicts) == {
        ("01_ok.ipynb", "plain"),
        ("01_ok.ipynb", "t4"),
        ("02_broken.ipynb", "plain"),
        ("02_broken.ipynb", "t4"),
        ("03_hangs.ipynb", "plain"),
    }
    assert verdicts[("01_ok.ipynb", "t4")]["status"] == "passed"
    broken = verdicts[("02_broken.ipynb", "t4")]
    assert broken["status"] == "failed" and "ZeroDivisionError" in broken["error"]
    hung = verdicts[("03_hangs.ipynb", "plain")]
    assert hung["status"] == "failed" and "Timeout" in hung["error"], hung["error"]
    assert hung["seconds"] < 40  # stopped by the cell timeout, not left to sleep
    assert summary["passed"] is False and summary["device"] == "a stand-in"
    # One verdict, log and JUnit file per lesson and rehearsal; the summary is on disk too.
    for name in ("01_ok", "01_ok-t4", "02_broken", "02_broken-t4", "03_hangs"):
        assert json.loads((folder / f"{name}.json").read_text())["sha256"]
        assert (folder / f"{name}.log").read_text()
    assert json.loads((folder / gpu_smoke.SUMMARY).read_text())["passed"] is False


def _fake_jobs(monkeypatch, failing=()):
    """run_job replaced: each lesson's verdict written as the real one would, failing or not."""
    ran = []

    def run_job(job, folder, cell_timeout, threads=2):
        ran.append((job.name, cell_timeout))
        verdict = {
            "notebook": job.lesson.name,
            "rehearsal": job.rehearsal,
            "status": "failed" if job.name in failing else "passed",
            "seconds": 1.0,
            "sha256": gpu_smoke.sha256(job.lesson),
            "error": "",
        }
        (folder / f"{job.name}.json").write_text(json.dumps(verdict))
        return verdict

    monkeypatch.setattr(gpu_smoke, "run_job", run_job)
    monkeypatch.setattr(gpu, "require_gpu", lambda: torch.device("cpu"))
    record = {"device": "NVIDIA H200", "driver": "x", "versions": {"torch": "2.11"}}
    monkeypatch.setattr(gpu, "environment_record", lambda device: dict(record))
    return ran


def test_the_command_runs_every_lesson_twice_and_fails_on_any_failure(
    tmp_path, monkeypatch, lessons, capsys
):
    ran = _fake_jobs(monkeypatch, failing={"02_broken-t4"})
    chosen = [str(lessons["ok"]), str(lessons["broken"])]
    args = ["--smoke", "--out", str(tmp_path), "--notebooks", *chosen]
    assert cli.main(["gpu", *args]) == 1
    assert sorted(ran) == [
        ("01_ok", 300),
        ("01_ok-t4", 300),
        ("02_broken", 300),
        ("02_broken-t4", 300),
    ]
    assert "02_broken-t4" in capsys.readouterr().err
    # Rerunning only what failed keeps the other verdicts: the folder passes as a whole.
    _fake_jobs(monkeypatch)  # nothing fails now
    args = ["--smoke", "--out", str(tmp_path), "--notebooks", str(lessons["broken"])]
    assert cli.main(["gpu", *args, "--cell-timeout", "60"]) == 0
    summary = json.loads((tmp_path / "nvidia-h200-smoke" / gpu_smoke.SUMMARY).read_text())
    assert summary["passed"] and len(summary["verdicts"]) == 4
    assert summary["ran"] == ["02_broken", "02_broken-t4"]


def test_stale_names_the_lessons_without_a_passing_verdict_for_their_current_text(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    ok = _notebook(notebooks / "01_ok.ipynb", "x = 1")
    changed = _notebook(notebooks / "02_changed.ipynb", "x = 2")
    folder = tmp_path / "reports" / "gpu" / "nvidia-h100-80gb-hbm3-smoke"
    folder.mkdir(parents=True)
    for job in gpu_smoke.jobs_for([ok, changed]):
        status = "failed" if job.name == "01_ok-t4" else "passed"
        verdict = {"notebook": job.lesson.name, "rehearsal": job.rehearsal, "status": status}
        (folder / f"{job.name}.json").write_text(
            json.dumps({**verdict, "sha256": gpu_smoke.sha256(job.lesson)})
        )
    _notebook(changed, "x = 3")  # edited after its smoke pass
    assert gpu_smoke.stale(tmp_path) == ["01_ok-t4", "02_changed", "02_changed-t4"]
