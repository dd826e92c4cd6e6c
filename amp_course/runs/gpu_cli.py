"""``python -m amp_course.gpu_run``: the GPU run's command line, a thin shell over the library
(``runs.gpu`` runs lessons and the benchmark, ``runs.parts`` merges parts, ``runs.wheels`` is the
offline machine's bootstrap)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import emulation
from . import gpu
from .parts import merge_reports


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m amp_course.gpu_run", description=gpu.__doc__)
    default = gpu.GpuRun()
    parser.add_argument("--out", type=Path, default=default.out)
    parser.add_argument(
        "--notebooks",
        nargs="*",
        type=Path,
        default=None,
        help="notebooks to run (default: all in notebooks/)",
    )
    parser.add_argument("--cell-timeout", type=int, default=default.cell_timeout)
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
    try:
        device = gpu.require_gpu()
    except gpu.NoGPUError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    run = gpu.GpuRun(
        out=args.out,
        notebooks=tuple(args.notebooks or ()),
        cell_timeout=args.cell_timeout,
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
