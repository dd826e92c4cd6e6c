"""``amp-course gpu``: the GPU run's command line, a thin shell over the library
(``runs.gpu`` runs lessons and the benchmark, ``runs.parts`` merges parts, ``runs.plan`` lists and
runs the parts a run of the current notebooks lacks, ``runs.wheels`` is the offline machine's
bootstrap)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ... import emulation
from . import gpu, gpu_smoke
from .parts import merge_reports


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="amp-course gpu", description=gpu.__doc__)
    default = gpu.GpuRun()
    parser.add_argument("--out", type=Path, default=default.out)
    parser.add_argument(
        "--notebooks",
        nargs="*",
        type=Path,
        default=None,
        help="notebooks to run (default: all in notebooks/)",
    )
    parser.add_argument(
        "--cell-timeout",
        type=int,
        default=None,
        help=f"seconds one cell may run (default {default.cell_timeout}; "
        f"{gpu_smoke.CELL_TIMEOUT_S} with --smoke)",
    )
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
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the CUDA smoke pass: every lesson (or --notebooks) at smoke sizes under nbval, "
        "plainly and rehearsing a T4, --workers at a time; verdicts and logs under "
        "--out/<device>-smoke/; exit 1 if any lesson failed",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=gpu_smoke.WORKERS,
        help="lessons at a time in the smoke pass",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print what a full-mode run of the current notebooks still lacks, as parts with "
        "their minutes, read from the runs under --out (needs no GPU), then stop",
    )
    parser.add_argument(
        "--next",
        type=float,
        metavar="MINUTES",
        help="run the parts of --plan that fit MINUTES (keep the time for the copies to come "
        "back aside), each tagged with its name and date, and merge them into their run's folder",
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.fetch_wheels or args.check_wheels:
        from . import wheels

        return wheels.bootstrap(args.fetch_wheels or args.check_wheels, bool(args.fetch_wheels))
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
    if args.plan:
        from . import plan

        print(plan.format_plan(plan.plan(reports=args.out)), end="")
        return 0
    try:
        device = gpu.require_gpu()
    except gpu.NoGPUError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.smoke:
        return _smoke(args, device)
    if args.next is not None:
        from . import run_parts

        done = run_parts.run_next(args.next, device, out=args.out)
        for part in done["ran"]:
            print(f"{part['part']}: {'passed' if part['passed'] else 'FAILED'} -> {part['folder']}")
        print(f"left for a later session: {', '.join(done['left']) or 'none'}")
        return 0 if all(part["passed"] for part in done["ran"]) else 1
    run = gpu.GpuRun(
        out=args.out,
        notebooks=tuple(args.notebooks or ()),
        cell_timeout=args.cell_timeout or gpu.GpuRun().cell_timeout,
        skip_nbval=args.skip_nbval,
        nbval_only=args.nbval_only,
        skip_bench=args.skip_bench,
        amp_dtype=args.amp_dtype,
        emulate=args.emulate,
        tag=args.tag,
    )
    record = gpu.execute(run, device)
    print(json.dumps({k: v for k, v in record.items() if k != "notebooks"}, indent=2))
    return 0 if gpu.passed(record) else 1


def _smoke(args, device) -> int:
    """``--smoke``: run the pass, print each failure's first error, the exit status."""
    record = gpu.environment_record(device)
    folder = gpu_smoke.folder_for(record["device"], args.out)
    jobs = gpu_smoke.jobs_for(args.notebooks or None)
    print(f"CUDA smoke pass on {record['device']}: {len(jobs)} runs -> {folder}", flush=True)
    summary = gpu_smoke.run(
        jobs,
        folder,
        record,
        workers=args.workers,
        cell_timeout=args.cell_timeout or gpu_smoke.CELL_TIMEOUT_S,
    )
    failed = [v for v in summary["verdicts"] if v["status"] != "passed"]
    for verdict in failed:
        name = verdict["notebook"].removesuffix(".ipynb")
        rehearsal = "" if verdict["rehearsal"] == "plain" else f"-{verdict['rehearsal']}"
        print(f"FAILED {name}{rehearsal}: {verdict['error']}", file=sys.stderr)
    print(
        f"{len(summary['verdicts']) - len(failed)} of {len(summary['verdicts'])} passed in "
        f"{summary['seconds']} s ({folder / gpu_smoke.SUMMARY})"
    )
    return 0 if summary["passed"] else 1
