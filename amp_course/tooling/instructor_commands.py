"""The instructor's ``amp-course`` commands: ``quiz publish`` and ``quiz check`` (the learner's quiz
files and the key), ``grade`` (a folder of submissions into a gradebook: the course's CSV, Canvas's
or Gradescope's results.json) and ``autograder`` (the zip Gradescope takes)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from .. import env_vars
from .output_paths import overwrites, unwritable


def lesson_list(value: str | None) -> list[str] | None:
    """``--lessons``'s comma-separated names (None: not given). Given but naming none (``''``,
    ``','``) is an empty list, which the settings refuse, not every lesson."""
    if value is None:
        return None
    return [name.strip() for name in value.split(",") if name.strip()]


def _quiz_publish(args) -> int:
    from ..quiz import QuizSchemaError, publish

    if os.path.exists(args.out) and not os.path.isdir(args.out):
        print(
            f"error: --out {args.out} is a file; it names the folder of learner files",
            file=sys.stderr,
        )
        return 1
    clash = overwrites(args.out, "--out", {"--sources": args.sources}) or overwrites(
        args.key, "--key", {"--sources": args.sources, "the learners' folder --out": args.out}
    )
    if clash:
        print(f"error: {clash}", file=sys.stderr)
        return 1
    try:
        written, current = publish(args.sources, args.out, args.key, args.secret)
    except QuizSchemaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    if current:
        print(f"{len(current)} learner file(s) in {args.out} already up to date: left as they were")
    return 0


def _quiz_check(args) -> int:
    from ..quiz import (
        QUIZ_DIR,
        SOURCE_DIR,
        QuizSchemaError,
        load_source,
        source_paths,
        stale_learner_files,
    )

    try:
        paths = source_paths(args.sources)
        if not paths:  # checking nothing is no "ok"
            raise QuizSchemaError(f"{args.sources}: no quiz sources (*.yaml) found")
        if not Path(args.out).is_dir():
            raise QuizSchemaError(f"{args.out} is not a folder of learner quiz files (--out)")
        for path in paths:
            load_source(path)
        stale = stale_learner_files(args.sources, args.out)
    except QuizSchemaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if stale:
        rerun = ["amp-course", "quiz", "publish"]
        for option, given, default in (
            ("--sources", args.sources, SOURCE_DIR),
            ("--out", args.out, QUIZ_DIR),
        ):
            rerun += [option, str(given)] if Path(given) != Path(default) else []
        print(f"out of date: {', '.join(stale)}; run `{shlex.join(rerun)}`", file=sys.stderr)
        return 1
    print("ok: quiz sources are valid and learner files are up to date")
    return 0


def grade(args) -> int:
    """``amp-course grade``: also what ``nbval_grading`` runs under pytest."""
    from .grading import Settings, SettingsError, grade_all
    from .grading.platforms import grade_canvas, grade_gradescope

    mistake = _grade_mistake(args)
    if mistake:
        print(f"error: {mistake}", file=sys.stderr)
        return 2
    lessons = lesson_list(args.lessons)
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
        if args.format == "gradescope":
            return grade_gradescope(args.submissions, settings, args.out)
        if args.format == "canvas":
            rows = grade_canvas(args.submissions, settings, args.out, args.roster, args.feedback)
        else:
            rows = grade_all(args.submissions, settings, args.out, feedback=args.feedback)
    except (SettingsError, OSError) as error:  # one line, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    students = sorted({row.student for row in rows})
    print(f"graded {len(students)} submission(s) into {args.out}")
    return 0


def _grade_mistake(args) -> str | None:
    """A mistake of ``grade``'s options found before any grading, or None: an option that does
    nothing here, a memory bound that would kill every kernel as it starts, or an output that
    would replace what grading reads or could not be written once the class is graded."""
    from .grading.run import student_folders
    from .grading.settings import masters_folder

    if not 0 < args.memory_gb < float("inf"):
        return f"--memory-gb {args.memory_gb}: a kernel needs a positive, finite bound"
    if args.roster is not None and args.format != "canvas":
        return "--roster maps folders to Canvas's ids: it goes with --format canvas"
    # The gradebook may sit at the top of the submissions folder (`grade . --out gradebook.csv`),
    # not inside a student's folder.
    students = student_folders(Path(args.submissions)) if os.path.isdir(args.submissions) else []
    inputs = {"--key": args.key, "--masters": masters_folder(args.masters)}
    inputs |= {f"student {folder.name}'s folder": folder for folder in students}
    return (
        overwrites(args.out, "--out", inputs)
        or overwrites(args.feedback, "--feedback", inputs)
        or unwritable(args.out, args.feedback)
    )


def _autograder(args) -> int:
    from .grading import SettingsError
    from .grading.platforms import build_autograder

    clash = overwrites(args.out, "--out", {"--key": args.key})
    if clash:
        print(f"error: {clash}", file=sys.stderr)
        return 2
    lessons = lesson_list(args.lessons)
    try:
        out = build_autograder(args.key, args.out, lessons)
    except (SettingsError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {out}: upload it as the assignment's autograder on Gradescope")
    return 0


def _grade_usage_error(message: str):
    print(f"error: {message} (see amp-course grade --help)", file=sys.stderr)
    raise SystemExit(2)


def quiz(argv: list[str]) -> int:
    """``amp-course quiz publish|check``."""
    import argparse

    from ..quiz import QUIZ_DIR, SOURCE_DIR

    parser = argparse.ArgumentParser(prog="amp-course quiz", description="lesson quizzes")
    quiz = parser.add_subparsers(dest="quiz_command", required=True)
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
    args = parser.parse_args(argv)
    return args.func(args)


def _path(text: str) -> str:
    """A path as given, ``~`` expanded: a shell leaves it as it is inside quotes, as in the
    pytest route's ``--amp-grade "--key ~/..."``, where no shell expands it later either."""
    return os.path.expanduser(text)


def grade_parser():
    """``amp-course grade``'s arguments (``nbval_grading`` reads ``--amp-grade`` with it too)."""
    import argparse

    grading = argparse.ArgumentParser(
        prog="amp-course grade", description="grade a folder of submissions into a CSV gradebook"
    )
    grading.error = _grade_usage_error  # one line, as for every other mistake of `grade`
    grading.add_argument(
        "submissions", type=_path, help="folder holding one folder per student (name = student id)"
    )
    grading.add_argument("--key", type=_path, required=True, help="the instructor quiz key (JSON)")
    grading.add_argument(
        "--out",
        type=_path,
        default="gradebook.csv",
        help="the gradebook CSV to write (default: gradebook.csv)",
    )
    grading.add_argument(
        "--masters", type=_path, default=None, help="master notebooks (default: notebooks/)"
    )
    grading.add_argument(
        "--lessons",
        default=None,
        help="comma-separated lessons of this assignment, e.g. 00_scenario,01_number_formats "
        "(default: every lesson of the masters and the key)",
    )
    grading.add_argument("--cell-timeout", type=int, default=120, help="seconds per notebook cell")
    grading.add_argument("--timeout", type=int, default=900, help="seconds per submission, in all")
    grading.add_argument("--jobs", type=int, default=1, help="submissions graded at once")
    grading.add_argument(
        "--sandbox",
        default="auto",
        choices=["auto", "bwrap", "docker", "podman", "none"],
        help="where students' code runs (auto: bubblewrap, else none with a warning)",
    )
    grading.add_argument(
        "--memory-gb", type=float, default=8.0, help="memory bound of a student's kernel"
    )
    grading.add_argument(
        "--image", default="debian:bookworm-slim", help="container image for docker/podman"
    )
    grading.add_argument(
        "--feedback",
        type=_path,
        default=None,
        help="folder for per-student feedback (default: OUT-feedback)",
    )
    grading.add_argument(
        "--format",
        default="csv",
        choices=["csv", "canvas", "gradescope"],
        help="csv: the course's gradebook; canvas: a gradebook Canvas imports (items beside it); "
        "gradescope: SUBMISSIONS is one student's files, OUT Gradescope's results.json",
    )
    grading.add_argument(
        "--roster",
        type=_path,
        default=None,
        help="canvas: CSV mapping folder names to Canvas's ids",
    )
    return grading


def grade_command(argv: list[str]) -> int:
    """``amp-course grade``."""
    return grade(grade_parser().parse_args(argv))


def autograder(argv: list[str]) -> int:
    """``amp-course autograder``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="amp-course autograder", description="build the zip a Gradescope autograder takes"
    )
    parser.add_argument("--key", required=True, help="the instructor quiz key (JSON)")
    parser.add_argument("--lessons", default=None, help="comma-separated lessons graded")
    parser.add_argument("--out", default="autograder.zip", help="the zip to write")
    return _autograder(parser.parse_args(argv))
