"""The ``amp-course`` command. Every subcommand is one row of ``COMMANDS``: what it does, and the
function that runs it on the arguments after its name, which parses them itself. That function is
imported only when its command runs, so ``amp-course info`` loads neither papermill nor Sphinx. The
course's own commands (hardware info, the bit inspector, the precision benchmark) are here, the
data check is ``amp_course.data_check``'s, the instructor's (quizzes, grading) are
``amp_course.tooling.instructor_commands``'s, and the tooling's (the GPU run, the smoke
benchmark, the website...) its modules' ``main``."""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import warnings
from dataclasses import dataclass

from . import cpu  # imports no torch
from .precisions import NAMES  # the course's precisions; imports no torch


@dataclass(frozen=True)
class Command:
    summary: str  # what it does, for ``amp-course --help``
    main: str  # "module:function", called with the arguments after the command's name


TOOLING = "amp_course.tooling"
COMMANDS = {
    "info": Command("describe this machine's device and its AMP dtype", "amp_course.cli:info"),
    "check-data": Command(
        "verify the shipped MNIST files' checksums", "amp_course.data_check:main"
    ),
    "inspect": Command(
        f"show a number's bits in {', '.join(NAMES)} and fp8", "amp_course.cli:inspect_number"
    ),
    "quiz": Command("publish and check lesson quizzes", f"{TOOLING}.instructor_commands:quiz"),
    "grade": Command(
        "grade a folder of submissions into a CSV gradebook",
        f"{TOOLING}.instructor_commands:grade_command",
    ),
    "autograder": Command(
        "build the zip a Gradescope autograder takes", f"{TOOLING}.instructor_commands:autograder"
    ),
    "bench": Command(
        f"time {'/'.join(NAMES)} on matmuls, the MNIST CNN and ViTs", "amp_course.cli:bench"
    ),
    "gpu": Command(
        "the GPU run: every lesson in full mode, nbval, the benchmark matrix (reports/gpu/)",
        f"{TOOLING}.runs.gpu_cli:main",
    ),
    "gpu-results": Command(
        "a committed GPU run's figures as docs/gpu-run.md's results section",
        f"{TOOLING}.runs.results:main",
    ),
    "smoke-bench": Command(
        "each lesson's smoke-mode time on this CPU (reports/smoke/)", f"{TOOLING}.runs.smoke:main"
    ),
    "suite-bench": Command(
        "the test suite's time on this CPU, or rehearsing another (reports/suite/)",
        f"{TOOLING}.runs.suite:main",
    ),
    "grading-bench": Command(
        "grading throughput: generated submissions, sandboxed, per --jobs (reports/grading/)",
        f"{TOOLING}.grading.throughput:main",
    ),
    "rehearse-cpu": Command(
        "run a command as on another kind of CPU (avx2: no native bf16), e.g. the tests",
        f"{TOOLING}.rehearse:main",
    ),
    "workspace": Command(
        "your copy of the lessons in workspace/ (make course); --fresh LESSON gets one back",
        f"{TOOLING}.workspace:main",
    ),
    "website": Command(
        "the course's website from the executed copies (site/_build/html)",
        f"{TOOLING}.website.build:main",
    ),
}


def _parser(command: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog=f"amp-course {command}", description=COMMANDS[command].summary
    )


def info(argv: list[str]) -> int:
    parser = _parser("info")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    args = parser.parse_args(argv)
    from .device import DeviceFallbackWarning, pick_precision
    from .lesson import describe_hardware

    # The course's notes (no GPU visible, bf16 emulated on this CPU) are part of this report, so
    # they are printed as plain lines rather than as warnings with a file path and source line.
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always", DeviceFallbackWarning)
        device = _pick_device(parser, args.device)
        precision = pick_precision(device)
    print(describe_hardware(device))
    print(f"autocast dtype for this device: {precision.name}")
    _print_notes(notes)
    return 0


def _print_notes(notes) -> None:
    """The course's device notes as plain lines ("note: ..."); other warnings as they came."""
    from .device import DeviceFallbackWarning

    for note in notes:
        if issubclass(note.category, DeviceFallbackWarning):
            print(f"note: {note.message}")
        else:
            warnings.warn_explicit(note.message, note.category, note.filename, note.lineno)


def _pick_device(parser: argparse.ArgumentParser, name: str):
    """``--device``'s device, or the parser's one-line error for a name it does not know."""
    from .device import pick_device

    try:
        return pick_device(name)
    except ValueError as error:
        parser.error(f"--device: {error}")


def inspect_number(argv: list[str]) -> int:
    from .inspector import INSPECTED_FORMATS, describe, inspect

    parser = _parser("inspect")
    parser.add_argument("value", help="the number, e.g. 0.1, 65520 or inf")
    parser.add_argument(
        "--format",
        action="append",
        default=[],
        help="a format to show (repeatable; default: all), e.g. --format fp16",
    )
    args = parser.parse_args(argv)
    try:
        value = float(args.value)
    except ValueError:
        parser.error(f"argument value: invalid float value: {args.value!r}")
    chosen = {name: _formats_named(name, INSPECTED_FORMATS) for name in args.format}
    unknown = [repr(name) for name, formats in chosen.items() if not formats]  # "" shows
    if unknown:
        print(
            f"error: unknown format {', '.join(unknown)}; "
            f"choose from {', '.join(INSPECTED_FORMATS)} (or fp8 for both)",
            file=sys.stderr,
        )
        return 2
    if math.isinf(value) and "inf" not in args.value.lower():  # 1e400: no float64 holds it
        print(f"note: {args.value} is beyond float64's range (±{sys.float_info.max:.4g}): inf")
    formats = list(dict.fromkeys(f for formats in chosen.values() for f in formats))
    for fields in inspect(value, formats or INSPECTED_FORMATS):
        print(describe(fields))
    return 0


def _formats_named(name: str, known) -> list[str]:
    """The formats ``name`` stands for: in any case, with _ or - for its space ("FP8_E4M3"), and
    "fp8" for both fp8 formats."""
    key = " ".join(name.lower().replace("_", " ").replace("-", " ").split())
    return [f for f in known if f == key or (key == "fp8" and f.startswith("fp8 "))]


def bench(argv: list[str]) -> int:
    parser = bench_parser()
    args = parser.parse_args(argv)
    from .bench import BenchConfig, format_report, run, write_report
    from .bench.ladder import LadderConfig
    from .device import DeviceFallbackWarning, device_slug
    from .lesson import resolve_smoke
    from .paths import REPORTS

    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        parser.error(f"--out {args.out} is a file; it names the folder the results go to")
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always", DeviceFallbackWarning)
        device = _pick_device(parser, args.device)
    _print_notes(notes)
    smoke = resolve_smoke(args.smoke, device)  # the lessons' rule, env_vars.SMOKE included
    changes = {"compile": args.compile, "fused": args.fused}
    for key in ("precisions", "workloads"):
        if getattr(args, key):  # each once, in the order given
            changes[key] = tuple(dict.fromkeys(getattr(args, key).split(",")))
    if args.rounds is not None:
        changes["rounds"] = args.rounds
    if args.rungs:
        if "ladder" not in changes.get("workloads", ()):
            parser.error("--rungs picks the ladder's rungs: add --workloads ladder")
        changes["ladder_rungs"] = tuple(name.strip() for name in args.rungs.split(","))
    try:
        config = (BenchConfig.smoke_config if smoke else BenchConfig.full)(**changes)
        config.validate()
        if "ladder" in config.workloads:  # its rungs, before any other workload runs
            LadderConfig.from_bench(config, device, {}).check_rungs()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    report = run(config, device)
    print(format_report(report))
    out = args.out or REPORTS / f"{device_slug(report['device'])}{'-smoke' if smoke else ''}"
    paths = write_report(report, out)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def bench_parser() -> argparse.ArgumentParser:
    bench = _parser("bench")
    bench.add_argument("--device", default="auto", help="auto, cpu or cuda")
    size = bench.add_mutually_exclusive_group()
    size.add_argument(
        "--smoke",
        dest="smoke",
        action="store_true",
        default=None,
        help="tiny sizes (the default on a CPU)",
    )
    size.add_argument("--full", dest="smoke", action="store_false", help="full sizes (GPU default)")
    bench.add_argument("--precisions", help=f"comma-separated subset of {','.join(NAMES)}")
    bench.add_argument(
        "--workloads",
        help="comma-separated subset of matmul,mnist_cnn,vit_b16,vit_l16,max_batch (the default), "
        "or ladder: lesson 10's MFU ladder of a ViT-B/16 step, with the lean ViT's and timm's "
        "beside it",
    )
    bench.add_argument(
        "--rungs", help="the ladder's rungs to run, comma-separated (default: all), e.g. 'eager'"
    )
    bench.add_argument(
        "--compile", action="store_true", help="add a torch.compile variant per precision"
    )
    bench.add_argument(
        "--fused", action="store_true", help="add a fused-AdamW variant per precision"
    )
    bench.add_argument("--rounds", type=int, help="round-robin passes over the modes")
    bench.add_argument("--out", help="folder for bench.json/.txt/.png (default: reports/<device>)")
    return bench


def build_parser() -> argparse.ArgumentParser:
    """``amp-course --help``: every command, each with its summary (``amp-course CMD --help``
    shows its own arguments)."""
    parser = argparse.ArgumentParser(
        prog="amp-course",
        description="The course's commands; `amp-course COMMAND --help` shows one's arguments.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        sub.add_parser(name, help=command.summary, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    cpu.separate_inductor_cache()  # before any command's torch.compile (the bench's --compile)
    if argv and argv[0] in COMMANDS:
        module, function = COMMANDS[argv[0]].main.split(":")
        return getattr(importlib.import_module(module), function)(argv[1:])
    build_parser().parse_args(argv)  # --help, or no or an unknown command: argparse says so
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
