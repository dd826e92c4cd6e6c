"""Executed copies carry a stamp (device, torch, date, mode) and their figures."""

import datetime as dt
import os
from pathlib import Path

import nbformat
import pytest
import torch
from conftest import PYTHON_KERNEL, processes_with

from amp_course.device import device_name
from amp_course.tooling import executed
from amp_course.tooling.runs import execute


def test_stamp_names_this_machine_and_round_trips(tmp_path):
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), path)
    record = executed.stamp(path, "cpu", smoke=True)
    assert record["device"] == device_name(torch.device("cpu")) and "CPU" in record["device"]
    assert record["torch"] == torch.__version__ and record["mode"] == "smoke"
    assert torch.__version__ in record["hardware"]
    age = dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(record["date"])
    assert dt.timedelta(0) <= age < dt.timedelta(minutes=5)
    assert executed.read_stamp(nbformat.read(path, as_version=4)) == record
    assert executed.stamp_record("cpu", smoke=False)["mode"] == "full"


def test_a_copy_without_a_stamp_is_refused():
    with pytest.raises(ValueError, match="no stamp"):
        executed.read_stamp(nbformat.v4.new_notebook())
    partial = nbformat.v4.new_notebook(metadata={executed.STAMP_KEY: {"device": "x"}})
    with pytest.raises(ValueError, match="torch"):
        executed.read_stamp(partial)


def test_figures_inline_only_inside_the_block(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    with execute.figures_inline():
        assert os.environ["MPLBACKEND"] == execute.INLINE_BACKEND
    assert os.environ["MPLBACKEND"] == "Agg"
    monkeypatch.delenv("MPLBACKEND")
    with execute.figures_inline():
        pass
    assert "MPLBACKEND" not in os.environ


def test_a_rehearsed_gpu_is_named_in_the_stamp(monkeypatch):
    from amp_course import emulation

    monkeypatch.setenv(emulation.ENV, "t4")
    assert "emulated" not in executed.stamp_record("cpu", smoke=True)  # a CPU rehearses nothing
    import amp_course.device as device_module

    monkeypatch.setattr(device_module, "describe_hardware", lambda d: "NVIDIA H100 (sm_90)")
    monkeypatch.setattr(device_module, "device_name", lambda d: "NVIDIA H100")
    assert executed.stamp_record("cuda", smoke=False)["emulated"] == "Tesla T4"


def test_the_stamp_keeps_the_lessons_own_id(tmp_path):
    path = tmp_path / "lesson.ipynb"
    nb = nbformat.v4.new_notebook(metadata={executed.STAMP_KEY: {"lesson": "03_grad_scaler"}})
    nbformat.write(nb, path)
    executed.stamp(path, "cpu", smoke=True)
    record = nbformat.read(path, as_version=4).metadata[executed.STAMP_KEY]
    assert record["lesson"] == "03_grad_scaler" and record["mode"] == "smoke"


def test_a_run_writes_its_copy_whole_at_the_end_not_at_every_cell(tmp_path, monkeypatch):
    """papermill alone writes the whole notebook at every cell's start and end; the course's runs
    write it every few seconds and at the end, every cell's output in it."""
    import papermill.engines

    writes = []
    real = papermill.engines.write_ipynb
    monkeypatch.setattr(
        papermill.engines, "write_ipynb", lambda nb, path: (writes.append(path), real(nb, path))
    )
    cells = [nbformat.v4.new_code_cell(f"print({i} * 7)") for i in range(12)]
    source = tmp_path / "lesson.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=PYTHON_KERNEL), source)
    copy = execute.run_lesson(
        source, tmp_path / "out.ipynb", smoke=True, device="cpu", timeout_s=120
    )
    assert len(writes) <= 2, writes  # 26 with papermill's own manager
    printed = [c.outputs[0]["text"].strip() for c in copy.cells if c.get("outputs")]
    assert printed[-12:] == [str(i * 7) for i in range(12)]
    assert copy.metadata.papermill["duration"] > 0


def test_a_run_ends_with_its_last_cell_and_leaves_no_process_or_socket(monkeypatch):
    """Once the last cell is done the kernel is killed with every process it started: a run does
    not wait for the kernel's teardown (an exit handler here would take a minute; a graceful
    shutdown waits 2.5 s for it before it terminates the kernel), and neither a process nor the
    kernel's Unix sockets outlive the run."""
    import shutil
    import tempfile
    import time
    import uuid

    token = f"amp-run-straggler-{uuid.uuid4().hex}"
    cells = [
        nbformat.v4.new_code_cell(
            "import atexit, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', "
            f"{token!r}])\n"
            "atexit.register(time.sleep, 60)\n"
            "print('started', child.pid)"
        )
    ]
    # A short folder of its own for the kernel's sockets (a Unix socket's path has ~100 bytes).
    folder = Path(tempfile.mkdtemp(prefix="amp-run-"))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    try:
        source = folder / "lesson.ipynb"
        nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=PYTHON_KERNEL), source)
        copy = execute.run_lesson(
            source, folder / "out.ipynb", smoke=True, device="cpu", timeout_s=60
        )
        assert copy.cells[-1].outputs[0]["text"].startswith("started")
        ended = dt.datetime.fromisoformat(copy.cells[-1].metadata.papermill["end_time"])
        teardown = dt.datetime.fromisoformat(copy.metadata.papermill["end_time"]) - ended
        assert teardown.total_seconds() < 1.5, teardown  # graceful: 2.6 s here, 0.1 s killed
        deadline = time.monotonic() + 10
        while processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not processes_with(token)
        assert not list(folder.glob("amp-course-kernel-*"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
