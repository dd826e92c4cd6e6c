"""How many submissions an hour the grader gets through: generated submissions graded with the
sandbox on, once per ``--jobs`` value, as a benchmark (a timed test would fail on a busy machine).

Each generated submission holds the lessons of the assignment with every exercise answered by the
source of the course's reference (``answer_source``), so every check cell runs its probe, as for
a learner who finished the lessons. Run as ``make bench-grading`` or ``amp-course grading-bench``;
``reports/grading/<cpu>.json`` and ``.md`` keep the figures with the machine they were measured on.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nbformat

from ... import exercises, quiz
from ...device import machine_record
from ...paths import GRADING_REPORTS, ROOT
from .. import machine_reports
from .reports import EARNED
from .run import grade_all
from .settings import Settings, SettingsError, master_paths

DEFAULT_LESSONS = ("01_number_formats",)
CLASS_SIZE = 1000  # the class the report's arithmetic is for


def answer_source(name: str, symbol: str) -> str | None:
    """An exercise cell that defines ``symbol`` with the reference's own code: its module's source,
    relative imports made absolute (the grading sandbox hides the module itself). None where the
    reference is not a function its module names."""
    reference = exercises.solution(name)
    module = importlib.import_module(f"{exercises.SOLUTIONS_PACKAGE}.{exercises.get(name).module}")
    bound = next((key for key, value in vars(module).items() if value is reference), None)
    if bound is None:
        return None
    tree = ast.parse(inspect.getsource(module))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            dots = "." * node.level + (node.module or "")
            node.module = importlib.util.resolve_name(dots, module.__package__)
            node.level = 0
    return f"{ast.unparse(tree)}\n{symbol} = {bound}\n"


def answered(master: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``master`` as a learner who answered every exercise hands it in."""
    notebook = nbformat.from_dict(master)
    for cell in notebook.cells:
        meta = cell.get("metadata", {}).get("exercise", {})
        if cell.cell_type == "code" and "exercise" in cell.metadata.get("tags", []):
            source = answer_source(meta["name"], meta["symbol"])
            cell.source = source if source is not None else cell.source
    return notebook


def generate(folder: Path, count: int, masters: list[Path]) -> list[Path]:
    """``count`` student folders in ``folder``, each holding every master, answered."""
    notebooks = {path.name: answered(nbformat.read(path, as_version=4)) for path in masters}
    students = []
    for number in range(1, count + 1):
        student = folder / f"student-{number:04d}"
        student.mkdir(parents=True)
        for name, notebook in notebooks.items():
            nbformat.write(notebook, student / name)
        students.append(student)
    return students


def per_hour(count: int, seconds: float, cores: int) -> dict:
    """Submissions per hour, and per hour and core, for ``count`` graded in ``seconds``."""
    hourly = count * 3600 / seconds if seconds > 0 else float("inf")
    return {
        "seconds": round(seconds, 1),
        "submissions_per_hour": round(hourly, 1),
        "per_hour_per_core": round(hourly / cores, 1),
        "class_hours": round(CLASS_SIZE / hourly, 2),  # CLASS_SIZE submissions on this machine
    }


def measure(
    count: int,
    jobs: list[int],
    key: Path | None = None,
    lessons=DEFAULT_LESSONS,
    masters=None,
    sandbox_kind: str = "bwrap",
    **limits,
) -> dict:
    """Grade ``count`` generated submissions once for each of ``jobs``; the benchmark record.

    ``key``: the instructor's quiz key (None: one published for this run); ``limits``: the rest
    of ``Settings.load``'s arguments (``cell_timeout``...)."""
    cores = os.cpu_count() or 1
    runs, label = [], ""
    lessons = list(lessons)
    with tempfile.TemporaryDirectory(prefix="amp-grading-bench-") as tmp:
        tmp = Path(tmp)
        if key is None:  # a fresh key for the course's quizzes (no quiz is answered here)
            key = tmp / "key.json"
            quiz.publish(quiz.SOURCE_DIR, tmp / "learner-quizzes", key)
        paths = [p for p in master_paths(masters) if p.stem in lessons]
        generate(tmp / "submissions", count, paths)
        for n in jobs:
            settings = Settings.load(
                key, masters, lessons, sandbox_kind=sandbox_kind, jobs=n, **limits
            )
            label = settings.sandbox.label
            start = time.perf_counter()
            rows = grade_all(tmp / "submissions", settings, tmp / f"jobs-{n}.csv")
            seconds = time.perf_counter() - start
            exercise_rows = [r for r in rows if not r.item.startswith("quiz:")]
            runs.append(
                {
                    "jobs": settings.jobs,
                    **per_hour(count, seconds, cores),
                    "statuses": dict(Counter(r.status for r in exercise_rows)),
                    "passed_share": round(
                        sum(r.status in EARNED for r in exercise_rows) / max(len(exercise_rows), 1),
                        3,
                    ),
                }
            )
    return {
        **machine_record("cpu"),
        **machine_reports.provenance(),
        "cpu_count": cores,
        "submissions": count,
        "lessons": lessons,
        "isolation": label,
        "class_size": CLASS_SIZE,
        "runs": runs,
    }


def markdown(bench: dict) -> str:
    """The record as a table, with the machine, the assignment and a class's arithmetic."""
    best = max(bench["runs"], key=lambda run: run["submissions_per_hour"])
    lines = [
        f"# Grading throughput on {bench['device']}",
        "",
        f"{bench['cpu_count']} cores, torch {bench['versions']['torch']}, measured "
        f"{bench['date']}. {bench['submissions']} generated "
        f"submission{'' if bench['submissions'] == 1 else 's'} of "
        f"{', '.join(bench['lessons'])}, every exercise answered; isolation: {bench['isolation']}.",
    ]
    if provenance := machine_reports.provenance_line(bench):
        lines += ["", provenance]
    lines += [
        "",
        "| --jobs | seconds | submissions per hour | per hour per core "
        f"| hours for {bench['class_size']:,} | exercise items passed |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in bench["runs"]:
        lines.append(
            f"| {run['jobs']} | {run['seconds']:.1f} | {run['submissions_per_hour']:.0f} "
            f"| {run['per_hour_per_core']:.0f} | {run['class_hours']:.1f} "
            f"| {run['passed_share']:.0%} |"
        )
    lines += [
        "",
        f"A class of {bench['class_size']:,} on this machine: {bench['class_size']:,} / "
        f"{best['submissions_per_hour']:.0f} per hour = {best['class_hours']:.1f} hours with "
        f"--jobs {best['jobs']}. Beyond one machine, Gradescope grades each submission in its own "
        "container (`amp-course autograder`).",
        "",
    ]
    return "\n".join(lines)


def write(bench: dict, out: Path) -> list[Path]:
    """``<cpu>.json`` and ``<cpu>.md`` in ``out``, for the machine the record names."""
    return machine_reports.write(bench, markdown(bench), out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amp-course grading-bench", description=__doc__)
    parser.add_argument(
        "--key", type=Path, default=None, help="an instructor quiz key (default: a fresh one)"
    )
    parser.add_argument("--submissions", type=int, default=4, help="generated submissions")
    parser.add_argument("--jobs", default="1,2", help="comma-separated --jobs values to time")
    parser.add_argument("--lessons", default=",".join(DEFAULT_LESSONS), help="the assignment")
    parser.add_argument("--masters", default=None, help="master notebooks (default: notebooks/)")
    parser.add_argument("--sandbox", default="bwrap", choices=["bwrap", "docker", "podman"])
    parser.add_argument("--out", type=Path, default=ROOT / GRADING_REPORTS)
    args = parser.parse_args(argv)
    try:
        if not all(n.strip().isdigit() for n in args.jobs.split(",")):
            raise ValueError(f"--jobs {args.jobs!r}: comma-separated whole numbers, e.g. 1,2")
        jobs = [int(n) for n in args.jobs.split(",")]
        lessons = [name.strip() for name in args.lessons.split(",")]
        if args.submissions <= 0 or min(jobs) <= 0:
            raise ValueError("--submissions and --jobs must be positive")
        bench = measure(args.submissions, jobs, args.key, lessons, args.masters, args.sandbox)
    except (ValueError, SettingsError, OSError) as error:  # one line, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    paths = write(bench, args.out)
    print(markdown(bench))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
