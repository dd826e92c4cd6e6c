"""The whole course on the GPU it finds: every notebook in full mode (papermill and nbval), then the
benchmark matrix, all written under ``reports/gpu/<device-name>/`` with device, driver, versions
and date.

Run as ``make gpu`` or ``python -m amp_course.gpu_run``. It refuses to run without a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from .device import device_slug, machine_record

ROOT = Path(__file__).resolve().parents[1]


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


def run_notebooks(
    notebooks: list[Path], out_dir: Path, timeout_s: int, *, smoke: bool = False, device="cuda"
) -> list[dict]:
    """Execute each notebook with papermill (solutions filled in, full mode unless ``smoke``) on
    ``device``; keep the stamped copies in ``out_dir``. Each result's ``seconds`` is papermill's
    duration of the run (kernel start included, the copy and the stamp not)."""
    import nbformat

    from .executed import run_lesson

    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for path in notebooks:
        out = out_dir / path.name
        out.unlink(missing_ok=True)  # a failed run must not report an earlier run's copy
        status, error, seconds = "passed", "", None
        try:
            run_lesson(path, out, smoke=smoke, device=device, timeout_s=timeout_s)
        except Exception as exc:  # noqa: BLE001 - one failing lesson must not stop the others
            status, error = "failed", f"{type(exc).__name__}: {str(exc)[:500]}"
        if out.exists():  # papermill keeps a failed run's partial copy too
            duration = nbformat.read(out, as_version=4).metadata.get("papermill", {})
            seconds = round(duration.get("duration") or 0.0, 1) or None
        results.append(
            {"notebook": path.name, "status": status, "seconds": seconds, "error": error}
        )
        print(f"{path.name}: {status} in {seconds} s", flush=True)
    return results


def default_notebooks() -> list[Path]:
    """Every lesson and lab in notebooks/ (their GPU-only cells run in full mode)."""
    return sorted(p for p in (ROOT / "notebooks").glob("*.ipynb") if not p.name.startswith("."))


def run_nbval(executed_dir: Path, out_dir: Path, timeout_s: int) -> int:
    """``pytest --nbval-lax`` over the executed copies, in full mode; JUnit XML kept."""
    env = {**os.environ, "AMP_COURSE_SMOKE": "0"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--nbval-lax",
            f"--nbval-cell-timeout={timeout_s}",
            f"--junitxml={out_dir / 'nbval.xml'}",
            *sorted(str(p) for p in executed_dir.glob("*.ipynb")),
        ],
        cwd=ROOT / "notebooks",
        env=env,
        capture_output=True,
        text=True,
    )
    (out_dir / "nbval.log").write_text(result.stdout + result.stderr)
    return result.returncode


def run_bench(out_dir: Path) -> str:
    """The benchmark matrix at full size, with torch.compile and fused AdamW variants."""
    from . import cli

    code = cli.main(["bench", "--full", "--compile", "--fused", "--out", str(out_dir / "bench")])
    return "passed" if code == 0 else f"failed (exit {code})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amp-course gpu-run", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "gpu")
    parser.add_argument(
        "--notebooks",
        nargs="*",
        type=Path,
        default=None,
        help="notebooks to run (default: all in notebooks/)",
    )
    parser.add_argument("--cell-timeout", type=int, default=1800)
    parser.add_argument("--skip-nbval", action="store_true")
    parser.add_argument("--skip-bench", action="store_true")
    args = parser.parse_args(argv)
    try:
        device = require_gpu()
    except NoGPUError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    record = environment_record(device)
    out = args.out / device_slug(record["device"])
    notebooks = args.notebooks or default_notebooks()
    print(
        f"GPU run on {record['device']} (driver {record['driver']}, "
        f"torch {record['versions']['torch']}) -> {out}"
    )
    record["notebooks"] = run_notebooks(notebooks, out / "notebooks", args.cell_timeout)
    record["nbval"] = (
        "skipped"
        if args.skip_nbval
        else "passed"
        if run_nbval(out / "notebooks", out, args.cell_timeout) == 0
        else "failed"
    )
    record["bench"] = "skipped" if args.skip_bench else run_bench(out)
    (out / "report.json").write_text(json.dumps(record, indent=2) + "\n")
    failed = [r for r in record["notebooks"] if r["status"] != "passed"]
    print(json.dumps({k: v for k, v in record.items() if k != "notebooks"}, indent=2))
    return 1 if failed or record["nbval"] == "failed" else 0


if __name__ == "__main__":
    raise SystemExit(main())
