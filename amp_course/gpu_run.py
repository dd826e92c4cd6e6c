"""The whole course on the GPU it finds: every notebook in full mode (papermill and nbval), then the
benchmark matrix, all written under ``reports/gpu/<device-name>/`` with device, driver, versions
and date.

Run as ``make gpu`` or ``python -m amp_course.gpu_run``. It refuses to run without a CUDA GPU.
A run can be split into parts (``--notebooks``, ``--skip-nbval``, ``--nbval-only``, ``--tag``,
which names each part's ``report-<tag>.json`` and ``nbval-<tag>.*``); ``--merge FOLDER`` then
writes the folder's ``report.json`` from its parts, on any machine. ``--amp-dtype fp16`` runs
lessons with that AMP_DTYPE parameter, into ``<device-name>-fp16/``. ``--emulate t4`` rehearses a
Colab T4 on this GPU (``ac.emulation``: 15 GiB, fp16 with a GradScaler, no TF32, no flash or cuDNN
attention) in every lesson kernel, into ``<device-name>-t4-emulated/``. ``--fetch-wheels .whl``
(on a machine with an index) fills ``.whl/`` with what the GPU machine lacks and prints the line
that installs it there (``amp_course.gpu_wheels``); ``--check-wheels .whl`` only checks the set.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from . import emulation
from .device import device_slug, machine_record
from .paths import lesson_notebooks

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
    notebooks: list[Path],
    out_dir: Path,
    timeout_s: int,
    *,
    smoke: bool = False,
    device="cuda",
    parameters: dict | None = None,
) -> list[dict]:
    """Execute each notebook with papermill (solutions filled in, full mode unless ``smoke``,
    ``parameters`` added) on ``device``; keep the stamped copies in ``out_dir``. Each result's
    ``seconds`` is papermill's duration of the run (kernel start included, the copy and the stamp
    not)."""
    import nbformat

    from .executed import run_lesson

    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for path in notebooks:
        out = out_dir / path.name
        out.unlink(missing_ok=True)  # a failed run must not report an earlier run's copy
        status, error, seconds = "passed", "", None
        try:
            run_lesson(
                path, out, smoke=smoke, device=device, timeout_s=timeout_s, parameters=parameters
            )
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
    return lesson_notebooks(ROOT)


def run_folder(device_name: str, amp_dtype: str | None = None, emulate: str | None = None) -> str:
    """The run's folder name under reports/gpu/: the device, then what the run changed."""
    suffixes = [f"{emulate}-emulated"] if emulate else []
    suffixes += [amp_dtype] if amp_dtype else []
    return "-".join([device_slug(device_name), *suffixes])


def part_name(stem: str, tag: str, suffix: str) -> str:
    """``report.json``, or ``report-<tag>.json`` for a tagged part of the run."""
    return f"{stem}-{tag}{suffix}" if tag else f"{stem}{suffix}"


def run_nbval(executed: list[Path], out_dir: Path, timeout_s: int, tag: str = "") -> int:
    """``pytest --nbval-lax`` over these executed copies, in full mode; JUnit XML and the log kept
    in ``out_dir`` (named for ``tag``)."""
    env = {**os.environ, "AMP_COURSE_SMOKE": "0"}
    from .executed import nbval_command

    result = subprocess.run(
        nbval_command(sorted(executed), timeout_s, out_dir / part_name("nbval", tag, ".xml")),
        cwd=ROOT / "notebooks",
        env=env,
        capture_output=True,
        text=True,
    )
    (out_dir / part_name("nbval", tag, ".log")).write_text(result.stdout + result.stderr)
    return result.returncode


def run_bench(out_dir: Path) -> str:
    """The benchmark matrix at full size, with torch.compile and fused AdamW variants."""
    from . import cli

    code = cli.main(["bench", "--full", "--compile", "--fused", "--out", str(out_dir / "bench")])
    return "passed" if code == 0 else f"failed (exit {code})"


def nbval_results(folder: Path) -> dict[str, str]:
    """Each notebook's nbval verdict ("passed"/"failed") from the JUnit files of every part; a
    notebook failing in any part failed."""
    import xml.etree.ElementTree as ET

    verdicts: dict[str, str] = {}
    for xml in sorted(folder.glob("nbval*.xml")):
        for case in ET.parse(xml).getroot().iter("testcase"):
            # classname: reports.gpu.<device>.notebooks.<lesson>.ipynb
            name = case.get("classname", "").rsplit(".notebooks.", 1)[-1]
            failed = any(child.tag in ("failure", "error") for child in case)
            if failed or verdicts.get(name) != "failed":
                verdicts[name] = "failed" if failed else "passed"
    return verdicts


def merge_reports(folder: Path) -> dict:
    """One ``report.json`` for a run made in parts: the newest part's machine record, each
    notebook's newest papermill result with its nbval verdict, and which checks are missing."""
    parts = [json.loads(p.read_text()) for p in sorted(folder.glob("report-*.json"))]
    if not parts:
        raise FileNotFoundError(f"no report-*.json in {folder}: nothing to merge")
    parts.sort(key=lambda record: record.get("date", ""))
    notebooks: dict[str, dict] = {}
    for record in parts:
        for run in record.get("notebooks", []):
            notebooks[run["notebook"]] = dict(run)
    verdicts = nbval_results(folder)
    for name, run in notebooks.items():
        run["nbval"] = verdicts.get(name, "not run")
    unchecked = {
        verdict: [name for name, run in sorted(notebooks.items()) if run["nbval"] == verdict]
        for verdict in ("failed", "not run")
    }
    merged = {k: v for k, v in parts[-1].items() if k not in ("notebooks", "nbval", "bench")}
    merged["parts"] = len(parts)
    merged["notebooks"] = sorted(notebooks.values(), key=lambda run: run["notebook"])
    merged["nbval"] = (
        "; ".join(
            f"{verdict} for {', '.join(names)}" for verdict, names in unchecked.items() if names
        )
        or "passed"
    )
    benches = sorted(p.parent.name for p in folder.glob("bench*/bench.json"))
    merged["bench"] = ", ".join(benches) if benches else "not run"
    (folder / "report.json").write_text(json.dumps(merged, indent=2) + "\n")
    return merged


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
    parser.add_argument(
        "--nbval-only",
        action="store_true",
        help="run nbval over the executed copies an earlier part left (no papermill)",
    )
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument(
        "--amp-dtype",
        choices=["bf16", "fp16"],
        default=None,
        help="the lessons' AMP_DTYPE parameter; fp16 is what a GPU without bf16 (T4) runs",
    )
    parser.add_argument(
        "--emulate",
        choices=sorted(emulation.PROFILES),
        default=None,
        help="rehearse this smaller GPU in every lesson kernel (memory cap, its dtype, no TF32, "
        "its attention kernels); implies --skip-bench",
    )
    parser.add_argument("--tag", default="", help="names this part's report and nbval files")
    parser.add_argument(
        "--merge",
        type=Path,
        metavar="FOLDER",
        help="write FOLDER/report.json from its report-*.json parts (needs no GPU), then stop",
    )
    wheels = parser.add_mutually_exclusive_group()
    wheels.add_argument(
        "--fetch-wheels",
        type=Path,
        metavar="FOLDER",
        help="download the wheels the GPU machine lacks into FOLDER, check the set, print the "
        "line that installs it (needs an index, no GPU), then stop",
    )
    wheels.add_argument(
        "--check-wheels", type=Path, metavar="FOLDER", help="only check the set in FOLDER"
    )
    args = parser.parse_args(argv)
    if args.fetch_wheels or args.check_wheels:
        from . import gpu_wheels

        return gpu_wheels.main(
            args.fetch_wheels or args.check_wheels, bool(args.fetch_wheels), ROOT
        )
    if args.merge:
        try:
            merged = merge_reports(args.merge)
        except (OSError, ValueError, KeyError) as error:  # a missing folder, a damaged part
            print(f"error: cannot merge the parts in {args.merge}: {error}", file=sys.stderr)
            return 2
        print(
            f"{args.merge / 'report.json'}: {len(merged['notebooks'])} notebooks, "
            f"nbval {merged['nbval']}, bench {merged['bench']}"
        )
        return 0
    try:
        device = require_gpu()
    except NoGPUError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    record = environment_record(device)
    out = args.out / run_folder(record["device"], args.amp_dtype, args.emulate)
    notebooks = args.notebooks or default_notebooks()
    executed = [out / "notebooks" / path.name for path in notebooks]
    record["amp_dtype"] = args.amp_dtype or "lesson default"
    if args.emulate:  # the kernels papermill and nbval start inherit it; ac.lesson.start applies it
        os.environ[emulation.ENV] = args.emulate
        record["emulated"] = emulation.PROFILES[args.emulate].name
    print(
        f"GPU run on {record['device']} (driver {record['driver']}, "
        f"torch {record['versions']['torch']}) -> {out}"
    )
    if args.emulate:
        print(emulation.PROFILES[args.emulate].describe())
    parameters = {"AMP_DTYPE": args.amp_dtype} if args.amp_dtype else None
    record["notebooks"] = (
        []
        if args.nbval_only
        else run_notebooks(notebooks, out / "notebooks", args.cell_timeout, parameters=parameters)
    )
    missing = [str(path) for path in executed if not path.exists()]
    if args.skip_nbval:
        record["nbval"] = "skipped"
    elif missing:  # nbval needs a copy that papermill executed, with its solutions filled in
        record["nbval"] = f"failed: no executed copy of {', '.join(missing)}"
    else:
        code = run_nbval(executed, out, args.cell_timeout, args.tag)
        record["nbval"] = "passed" if code == 0 else "failed"
    if args.emulate:
        record["bench"] = "skipped (an emulated run: the benchmark would time this GPU)"
    else:
        record["bench"] = "skipped" if args.skip_bench else run_bench(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / part_name("report", args.tag, ".json")).write_text(json.dumps(record, indent=2) + "\n")
    failed = [r for r in record["notebooks"] if r["status"] != "passed"]
    print(json.dumps({k: v for k, v in record.items() if k != "notebooks"}, indent=2))
    return 1 if failed or record["nbval"].startswith("failed") else 0


if __name__ == "__main__":
    raise SystemExit(main())
