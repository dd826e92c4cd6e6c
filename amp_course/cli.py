"""The ``amp-course`` command: hardware info, data checks, the bit inspector and the precision
benchmark; the instructor's commands (quizzes, grading) from
``amp_course.tooling.instructor_commands``; the course's tooling (the GPU run, its results, the
smoke benchmark, the website) under its own names (``amp_course.tooling.commands``)."""

from __future__ import annotations

import argparse
import sys
import warnings

from .tooling.instructor_commands import add_instructor_commands


def _info(args) -> int:
    from .device import DeviceFallbackWarning, pick_device, pick_precision
    from .lesson import describe_hardware

    # The course's notes (no GPU visible, bf16 emulated on this CPU) are part of this report, so
    # they are printed as plain lines rather than as warnings with a file path and source line.
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always", DeviceFallbackWarning)
        device = pick_device(args.device)
        precision = pick_precision(device)
    print(describe_hardware(device))
    print(f"autocast dtype for this device: {precision.name}")
    for note in notes:
        if issubclass(note.category, DeviceFallbackWarning):
            print(f"note: {note.message}")
        else:
            warnings.warn_explicit(note.message, note.category, note.filename, note.lineno)
    return 0


def _check_data(args) -> int:
    from pathlib import Path

    from .data import (
        FULL_FILE,
        FULL_SHA256,
        SUBSET_FILE,
        DataIntegrityError,
        data_dir,
        load_mnist_subset,
        verify_file,
    )

    try:
        paths = (
            [Path(args.path)] if args.path else [data_dir() / SUBSET_FILE, data_dir() / FULL_FILE]
        )
        for path in paths:
            if path.name == FULL_FILE:
                verify_file(path, FULL_SHA256)
                print(f"ok: full MNIST archive, SHA-256 verified ({path})")
                continue
            images, labels = load_mnist_subset(path)
            print(
                f"ok: {len(labels)} digits, {images.shape[1]}x{images.shape[2]}, "
                f"SHA-256 verified ({path})"
            )
    except DataIntegrityError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _inspect(args) -> int:
    from .inspector import INSPECTED_FORMATS, describe, inspect

    unknown = [name for name in args.format if name not in INSPECTED_FORMATS]
    if unknown:
        print(
            f"error: unknown format {', '.join(unknown)}; "
            f"choose from {', '.join(INSPECTED_FORMATS)}",
            file=sys.stderr,
        )
        return 2
    for fields in inspect(args.value, args.format or INSPECTED_FORMATS):
        print(describe(fields))
    return 0


def _bench(args) -> int:
    from .bench import BenchConfig, format_report, run, write_report
    from .device import device_slug, pick_device
    from .lesson import resolve_smoke
    from .paths import REPORTS

    device = pick_device(args.device)
    smoke = resolve_smoke(args.smoke, device)  # the lessons' rule, env_vars.SMOKE included
    changes = {"compile": args.compile, "fused": args.fused}
    for key in ("precisions", "workloads"):
        if getattr(args, key):
            changes[key] = tuple(getattr(args, key).split(","))
    if args.rounds is not None:
        changes["rounds"] = args.rounds
    if args.rungs:
        changes["ladder_rungs"] = tuple(name.strip() for name in args.rungs.split(","))
    try:
        config = (BenchConfig.smoke_config if smoke else BenchConfig.full)(**changes)
        config.validate()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    report = run(config, device)
    print(format_report(report))
    out = args.out or REPORTS / f"{device_slug(report['device'])}{'-smoke' if smoke else ''}"
    paths = write_report(report, out)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .precisions import NAMES  # the course's precisions; imports no torch

    parser = argparse.ArgumentParser(prog="amp-course", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="describe this machine's device and its AMP dtype")
    info.add_argument("--device", default="auto", help="auto, cpu or cuda")
    info.set_defaults(func=_info)
    check = sub.add_parser("check-data", help="verify the shipped MNIST files' checksums")
    check.add_argument("path", nargs="?", default=None, help="file to check (default: data/)")
    check.set_defaults(func=_check_data)
    bits = sub.add_parser("inspect", help=f"show a number's bits in {', '.join(NAMES)} and fp8")
    bits.add_argument("value", type=float, help="the number, e.g. 0.1, 65520 or inf")
    bits.add_argument(
        "--format",
        action="append",
        default=[],
        help="a format to show (repeatable; default: all), e.g. --format fp16",
    )
    bits.set_defaults(func=_inspect)

    add_instructor_commands(sub)  # quiz publish/check, grade, autograder

    bench = sub.add_parser(
        "bench", help=f"time {'/'.join(NAMES)} on matmuls, the MNIST CNN and ViTs"
    )
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
    bench.set_defaults(func=_bench)

    from .tooling.commands import COMMANDS

    for name, (summary, _) in COMMANDS.items():  # each parses its own arguments
        sub.add_parser(name, help=summary, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .tooling.commands import COMMANDS, run

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:
        return run(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
