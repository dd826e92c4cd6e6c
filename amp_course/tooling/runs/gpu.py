"""The whole course on the GPU it finds: every notebook in full mode (papermill and nbval), then the
benchmark matrix, all written under ``reports/gpu/<device-name>/`` with device, driver, versions
and date.

Run as ``make gpu`` or ``amp-course gpu``. It refuses to run without a CUDA GPU.
A run can be split into parts (``--notebooks``, ``--skip-nbval``, ``--nbval-only``, ``--tag``,
which names each part's ``report-<tag>.json`` and ``nbval-<tag>.*``); ``--merge FOLDER`` then
writes the folder's ``report.json`` from its parts, on any machine. ``--plan`` prints what a run
of the current notebooks still lacks, as parts with their minutes, and ``--next MINUTES`` runs the
parts that fit and merges them (``amp_course.tooling.runs.plan``). ``--amp-dtype fp16`` runs
lessons with that AMP_DTYPE parameter, into ``<device-name>-fp16/``. ``--emulate t4`` rehearses a
Colab T4 on this GPU (``ac.emulation``: 15 GiB, fp16 with a GradScaler, no TF32, no flash or cuDNN
attention) in every lesson kernel, into ``<device-name>-t4-emulated/``. ``--fetch-wheels .whl``
(on a machine with an index) fills ``.whl/`` with what the GPU machine lacks and prints the line
that installs it there (``amp_course.tooling.runs.wheels``); ``--check-wheels .whl`` only checks
the set.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

from ... import emulation
from ...device import device_slug, machine_record
from ...lesson import SMOKE_ENV
from ...paths import GPU_REPORTS, ROOT, lesson_notebooks
from . import execute as executor
from .execute import environment, run_notebooks
from .parts import part_name


class NoGPUError(RuntimeError):
    """The GPU run was asked for on a machine without a visible CUDA GPU."""


def require_gpu() -> torch.device:
    """The CUDA device, or NoGPUError saying what to run instead."""
    if not torch.cuda.is_available():
        raise NoGPUError(
            "The GPU run needs a CUDA GPU, and none is visible here (torch.cuda.is_available() is "
            f"False; torch {torch.__version__}, CUDA build {torch.version.cuda}). On a CPU, run "
            "`make test`, which executes every notebook in smoke mode."
        )
    return torch.device("cuda")


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return (
            out.stdout.strip().splitlines()[0]
            if out.returncode == 0 and out.stdout.strip()
            else "unknown"
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def environment_record(device: torch.device) -> dict:
    """The machine record (device, capability, memory, versions, date) plus the NVIDIA driver."""
    return {**machine_record(device), "driver": _driver_version()}


def run_folder(device_name: str, amp_dtype: str | None = None, emulate: str | None = None) -> str:
    """The run's folder name under reports/gpu/: the device, then what the run changed."""
    suffixes = [f"{emulate}-emulated"] if emulate else []
    suffixes += [amp_dtype] if amp_dtype else []
    return "-".join([device_slug(device_name), *suffixes])


@dataclass(frozen=True)
class GpuRun:
    """One GPU run, or one part of it: which lessons, what it changes, what it skips, where it
    writes."""

    out: Path = ROOT / GPU_REPORTS  # the run's folder (``run_folder``) goes under it
    notebooks: tuple[Path, ...] = ()  # none: every lesson (ac.paths.lesson_notebooks)
    cell_timeout: int = 1800  # seconds one cell may run, under papermill and nbval
    skip_nbval: bool = False
    nbval_only: bool = False  # nbval over the copies an earlier part left (no papermill)
    skip_bench: bool = False
    amp_dtype: str | None = None  # the lessons' AMP_DTYPE parameter ("bf16" or "fp16")
    emulate: str | None = None  # an ac.emulation profile every lesson kernel rehearses ("t4")
    tag: str = ""  # names this part's report and nbval files

    @property
    def lessons(self) -> list[Path]:
        return list(self.notebooks) or lesson_notebooks()

    @property
    def parameters(self) -> dict | None:
        """What papermill adds to the lessons' parameters."""
        return {"AMP_DTYPE": self.amp_dtype} if self.amp_dtype else None

    def folder(self, device_name: str) -> Path:
        return Path(self.out) / run_folder(device_name, self.amp_dtype, self.emulate)


def run_nbval(executed: list[Path], out_dir: Path, timeout_s: int, tag: str = "") -> int:
    """``pytest --nbval-lax`` over these executed copies, in full mode; JUnit XML and the log kept
    in ``out_dir`` (named for ``tag``)."""
    code, output = executor.run_nbval(
        sorted(executed),
        timeout_s,
        junitxml=out_dir / part_name("nbval", tag, ".xml"),
        env={**os.environ, SMOKE_ENV: "0"},
    )
    (out_dir / part_name("nbval", tag, ".log")).write_text(output)
    return code


def run_bench(out_dir: Path, device, config=None, name: str = "bench") -> str:
    """The benchmark matrix at full size, with torch.compile and fused AdamW variants (or
    ``config``, a ``BenchConfig``), written to ``out_dir/<name>``; "passed", or what failed (the
    lessons' results are kept either way)."""
    from ... import bench

    try:
        report = bench.run(config or bench.BenchConfig.full(compile=True, fused=True), device)
        paths = bench.write_report(report, out_dir / name)
    except Exception as error:  # noqa: BLE001 - any failure is recorded in the run's report
        return f"failed ({type(error).__name__}: {str(error)[:300]})"
    print(bench.format_report(report))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return "passed"


def execute(run: GpuRun, device: torch.device) -> dict:
    """Run ``run`` on ``device``: the lessons with papermill, nbval over their copies, then the
    benchmark; writes the part's report (``report.json`` or ``report-<tag>.json``) in the run's
    folder and returns it."""
    record = environment_record(device)
    out = run.folder(record["device"])
    executed = [out / "notebooks" / path.name for path in run.lessons]
    record["amp_dtype"] = run.amp_dtype or "lesson default"
    if run.emulate:
        record["emulated"] = emulation.PROFILES[run.emulate].name
    print(
        f"GPU run on {record['device']} (driver {record['driver']}, "
        f"torch {record['versions']['torch']}) -> {out}"
    )
    if run.emulate:
        print(emulation.PROFILES[run.emulate].describe())
    # The kernels papermill and nbval start inherit it; ac.lesson.start applies it.
    with environment(**{emulation.ENV: run.emulate}):
        record["notebooks"] = (
            []
            if run.nbval_only
            else run_notebooks(
                run.lessons, out / "notebooks", run.cell_timeout, parameters=run.parameters
            )
        )
        missing = [str(path) for path in executed if not path.exists()]
        if run.skip_nbval:
            record["nbval"] = "skipped"
        elif missing:  # nbval needs a copy that papermill executed, with its solutions filled in
            record["nbval"] = f"failed: no executed copy of {', '.join(missing)}"
        else:
            code = run_nbval(executed, out, run.cell_timeout, run.tag)
            record["nbval"] = "passed" if code == 0 else "failed"
    if run.emulate:
        record["bench"] = "skipped (an emulated run: the benchmark would time this GPU)"
    else:
        record["bench"] = "skipped" if run.skip_bench else run_bench(out, device)
    out.mkdir(parents=True, exist_ok=True)
    (out / part_name("report", run.tag, ".json")).write_text(json.dumps(record, indent=2) + "\n")
    return record


def passed(record: dict) -> bool:
    """Whether every lesson ran, nbval passed or was skipped, and the benchmark did not fail."""
    return (
        all(r["status"] == "passed" for r in record["notebooks"])
        and not record["nbval"].startswith("failed")
        and not record["bench"].startswith("failed")
    )
