"""The ``amp-course`` command: hardware info, data checks, the bit inspector, quizzes, grading
and the precision benchmark."""

from __future__ import annotations

import argparse
import sys
import warnings

from . import env_vars


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


def _quiz_publish(args) -> int:
    from .quiz import QuizSchemaError, publish

    try:
        written = publish(args.sources, args.out, args.key, args.secret)
    except QuizSchemaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


def _quiz_check(args) -> int:
    from .quiz import QuizSchemaError, load_source, source_paths, stale_learner_files

    try:
        for path in source_paths(args.sources):
            load_source(path)
        stale = stale_learner_files(args.sources, args.out)
    except QuizSchemaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if stale:
        print(f"out of date: {', '.join(stale)}; run `amp-course quiz publish`", file=sys.stderr)
        return 1
    print("ok: quiz sources are valid and learner files are up to date")
    return 0


def _grade(args) -> int:
    from .tooling.grading import Settings, SettingsError, grade_all

    lessons = [name.strip() for name in args.lessons.split(",")] if args.lessons else None
    try:
        settings = Settings.load(
            args.key,
            masters=args.masters,
            lessons=lessons,
            sandbox_kind=args.sandbox,
            memory=int(args.memory_gb * 2**30),
            image=args.image,
            cell_timeout=args.cell_timeout,
            submission_timeout=args.timeout,
            jobs=args.jobs,
        )
        rows = grade_all(args.submissions, settings, args.out, feedback=args.feedback)
    except (SettingsError, OSError) as error:  # one line, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    students = sorted({row.student for row in rows})
    print(f"graded {len(students)} submission(s) into {args.out}")
    return 0


def _grade_usage_error(message: str):
    print(f"error: {message} (see amp-course grade --help)", file=sys.stderr)
    raise SystemExit(2)


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
    config = (BenchConfig.smoke_config if smoke else BenchConfig.full)(**changes)
    try:
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

    from .quiz import QUIZ_DIR, SOURCE_DIR

    quiz = sub.add_parser("quiz", help="publish and check lesson quizzes").add_subparsers(
        dest="quiz_command", required=True
    )
    publish = quiz.add_parser("publish", help="write learner quiz files (and the instructor key)")
    publish.add_argument(
        "--sources", default=SOURCE_DIR, help="plaintext sources (default: quizzes/source)"
    )
    publish.add_argument(
        "--out", default=QUIZ_DIR, help="where learner files go (default: quizzes/)"
    )
    publish.add_argument(
        "--key", default=None, help="write the instructor key here (keep it private)"
    )
    publish.add_argument(
        "--secret",
        default=None,
        help=f"the key's secret salt (default: ${env_vars.QUIZ_SECRET}, the key's own, "
        "or a fresh random one)",
    )
    publish.set_defaults(func=_quiz_publish)
    qcheck = quiz.add_parser(
        "check", help="validate sources; fail if learner files are out of date"
    )
    qcheck.add_argument("--sources", default=SOURCE_DIR)
    qcheck.add_argument("--out", default=QUIZ_DIR)
    qcheck.set_defaults(func=_quiz_check)

    grade = sub.add_parser("grade", help="grade a folder of submissions into a CSV gradebook")
    grade.error = _grade_usage_error  # one line, as for every other mistake of `grade`
    grade.add_argument(
        "submissions", help="folder holding one folder per student (name = student id)"
    )
    grade.add_argument("--key", required=True, help="the instructor quiz key (JSON)")
    grade.add_argument("--out", default="gradebook.csv", help="the gradebook CSV to write")
    grade.add_argument("--masters", default=None, help="master notebooks (default: notebooks/)")
    grade.add_argument(
        "--lessons",
        default=None,
        help="comma-separated lessons of this assignment, e.g. 00_scenario,01_number_formats "
        "(default: every lesson of the masters and the key)",
    )
    grade.add_argument("--cell-timeout", type=int, default=120, help="seconds per notebook cell")
    grade.add_argument("--timeout", type=int, default=900, help="seconds per submission, in all")
    grade.add_argument("--jobs", type=int, default=1, help="submissions graded at once")
    grade.add_argument(
        "--sandbox",
        default="auto",
        choices=["auto", "bwrap", "docker", "podman", "none"],
        help="where students' code runs (auto: bubblewrap, else none with a warning)",
    )
    grade.add_argument(
        "--memory-gb", type=float, default=8.0, help="memory bound of a student's kernel"
    )
    grade.add_argument(
        "--image", default="debian:bookworm-slim", help="container image for docker/podman"
    )
    grade.add_argument(
        "--feedback", default=None, help="folder for per-student feedback (default: OUT-feedback)"
    )
    grade.set_defaults(func=_grade)

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
        "or ladder: lesson 10's MFU ladder of a ViT-B/16 step, with timm's beside it",
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
