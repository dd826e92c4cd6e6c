"""Instructor grading: run every submission's notebooks with restored check cells, grade quizzes.

``amp-course grade SUBMISSIONS --key KEY --out gradebook.csv`` (README, "For instructors").
Each folder in SUBMISSIONS is one student (the folder name is the student id) holding lesson
notebooks and quiz answer files. For each student:

1. Each master notebook with check cells (``notebooks/`` by default) is matched by file name.
   The learner's copy is rebuilt with the master's check, parameters and setup cells (matched by
   ``metadata.grading.id``, else by the exercise name a check calls), so editing or deleting a
   check cell gains nothing; the learner's other cells are kept in order.
2. Only the rebuilt notebooks go to a scratch folder (links and anything else the learner put
   beside them stay behind), and each runs in its own ``pytest --nbval-lax`` subprocess with a
   per-cell timeout and its share of a wall-clock limit for the whole submission; the process
   tree, and any process it left behind, is killed. JUnit XML says which check cells passed.
   Reference solutions are refused while grading, and a learner cell that reaches into the
   checking code gets the lesson's items flagged for review.
3. Graded quiz questions are checked against the instructor key.

One row per student, lesson and item goes to the CSV, rewritten atomically after every student,
so a crash, hang or corrupt file in one submission costs only that submission's ungradable items.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import quiz as _quiz
from .exercises import GRADING_ENV

ROOT = Path(__file__).resolve().parents[1]
_RUN_MARKER = "AMP_COURSE_GRADING_RUN"
# Code that reaches into the checking machinery instead of answering the exercise.
_TAMPERING = re.compile(
    r"exercises\s*\.\s*(check|solution|get|fill_solutions|_REGISTRY|_grading)\s*=|_REGISTRY"
    r"|exercises\.solution\(|setattr\(\s*(ac\s*\.\s*)?exercises|GRADING_ENV|AMP_COURSE_GRADING"
)
COLUMNS = ["student", "lesson", "item", "points", "max_points", "status", "message"]
_CHECK_CALL = re.compile(r"""exercises\.check\(\s*["']([^"']+)["']""")


@dataclass(frozen=True)
class CheckItem:
    key: str  # the protected cell's id ("check:<exercise>" unless metadata says otherwise)
    name: str  # the exercise name, the gradebook item
    points: float


# ----------------------------------------------------------------------------- restoring


def cell_key(cell) -> str | None:
    """The stable id of a protected cell (check, parameters, setup), or None for other cells."""
    if cell.cell_type != "code":
        return None
    grading = cell.metadata.get("grading")
    if isinstance(grading, dict) and isinstance(grading.get("id"), str):
        return grading["id"]
    tags = cell.metadata.get("tags", [])
    if "check" in tags:
        found = _CHECK_CALL.search(cell.source)
        return f"check:{found.group(1)}" if found else None
    if "parameters" in tags:
        return "parameters"
    if "import amp_course as ac" in cell.source and "sys.path" in cell.source:
        return "setup"
    return None


def _is_check(cell) -> bool:
    return cell.cell_type == "code" and (
        "check" in cell.metadata.get("tags", []) or bool(_CHECK_CALL.search(cell.source))
    )


def check_items(master) -> list[CheckItem]:
    """The graded check cells of a master notebook, in order."""
    from . import exercises

    items = []
    for cell in master.cells:
        if cell.cell_type != "code" or "check" not in cell.metadata.get("tags", []):
            continue
        found = _CHECK_CALL.search(cell.source)
        key = cell_key(cell)
        if not found or key is None:
            raise ValueError(
                f"check cell without an ac.exercises.check(...) call: {cell.source[:80]!r}"
            )
        points = (cell.metadata.get("grading") or {}).get("points")
        if points is None:
            try:
                points = exercises.get(found.group(1)).points
            except KeyError:
                points = 1
        items.append(CheckItem(key, found.group(1), float(points)))
    return items


def restore(master, learner):
    """The learner's notebook with the master's protected cells put back (a new notebook).

    Learner cells are kept in order; a cell whose id matches a protected master cell is replaced
    by the master's; check cells the master does not have are dropped; protected cells the learner
    deleted are re-inserted after their exercise (checks) or at the top (setup, parameters).
    """
    protected = {}
    for cell in master.cells:
        key = cell_key(cell)
        if key is not None and key not in protected:
            protected[key] = cell
    cells, used = [], set()
    for cell in learner.cells:
        key = cell_key(cell)
        if key in protected:
            if key not in used:
                cells.append(nbformat.from_dict(json.loads(json.dumps(protected[key]))))
                used.add(key)
        elif not _is_check(cell):
            cells.append(cell)
    top = 0
    for key, cell in protected.items():
        if key in used:
            continue
        copy = nbformat.from_dict(json.loads(json.dumps(cell)))
        name = _CHECK_CALL.search(cell.source)
        if name:
            after = [
                i
                for i, c in enumerate(cells)
                if (c.metadata.get("exercise") or {}).get("name") == name.group(1)
            ]
            position = after[-1] + 1 if after else len(cells)
        else:
            position, top = top, top + 1
        cells.insert(position, copy)
    out = nbformat.v4.new_notebook()
    out.metadata = master.metadata
    out.cells = cells
    for number, cell in enumerate(out.cells):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell["id"] = f"graded-{number}"  # unique ids; learners' copies may repeat the master's
    return out


# ----------------------------------------------------------------------------- running


def run_with_timeout(cmd, timeout, **kwargs) -> tuple[int | None, str]:
    """Run ``cmd`` in its own session; past ``timeout`` seconds kill it and every descendant.

    Returns (returncode or None when killed, combined output). Descendants matter because
    Jupyter kernels start in sessions of their own, out of reach of a process-group kill. Every
    process the run started carries a marker in its environment, and whatever is still alive
    with that marker afterwards is killed too, so a learner's detached process cannot outlive
    grading and touch the gradebook.
    """
    marker = uuid.uuid4().hex
    env = {**(kwargs.pop("env", None) or os.environ), _RUN_MARKER: marker}
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env, **kwargs
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            proc.wait()
            code = None
        _kill_marked(marker)
        log.seek(0)
        return code, log.read()


def _kill_marked(marker: str) -> None:
    try:
        import psutil
    except ImportError:  # without psutil, the process-group kill in kill_tree is all we have
        return
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get(_RUN_MARKER) == marker:
                process.kill()
        except (psutil.Error, OSError):
            pass


def kill_tree(pid: int) -> None:
    try:
        import psutil

        children = psutil.Process(pid).children(recursive=True)
    except Exception:  # psutil missing or the process already gone
        children = []
    for target in [pid] + [c.pid for c in children]:
        for kill in (lambda p: os.killpg(p, signal.SIGKILL), lambda p: os.kill(p, signal.SIGKILL)):
            try:
                kill(target)
            except (ProcessLookupError, PermissionError, OSError):
                pass


def parse_junit(path) -> dict[tuple[str, int], tuple[str, str]]:
    """{(JUnit classname, code cell number): (status, message)} from nbval's JUnit XML."""
    results = {}
    for case in ET.parse(path).iter("testcase"):
        found = re.fullmatch(r"Cell (\d+)", case.get("name", ""))
        if not found:
            continue
        notebook = case.get("classname", "")  # e.g. "work.graded-01_formats.ipynb"
        status, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                status = "skipped" if tag == "skipped" else "failed"
                message = _summary(node.get("message", "") + "\n" + (node.text or ""))
                break
        results[(notebook, int(found.group(1)))] = (status, message)
    return results


def _summary(text: str) -> str:
    """The most telling line of a failure: the exercise's own verdict, else the last error line."""
    text = re.sub(r"(\x1b|#x1B)\[[0-9;]*m", "", text)  # colours, raw or as JUnit escapes them
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for marker in ("ExerciseFailed:", "Timeout", "Error:", "Exception:"):
        hits = [line for line in lines if marker in line]
        if hits:
            return hits[-1][:300]
    return (lines[-1] if lines else "failed")[:300]


# ----------------------------------------------------------------------------- grading


def _row(student, lesson, item, points, max_points, status, message=""):
    return {
        "student": student,
        "lesson": lesson,
        "item": item,
        "points": points,
        "max_points": max_points,
        "status": status,
        "message": message,
    }


def _inside(path: Path, folder: Path) -> bool:
    """A regular file of the submission itself: no link, nothing that resolves outside it."""
    return (
        not path.is_symlink() and path.is_file() and path.resolve().is_relative_to(folder.resolve())
    )


def tampering(notebook, protected_keys: set[str]) -> list[str]:
    """Lines of the learner's own cells that reach into the course's checking code."""
    hits = []
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell_key(cell) not in protected_keys:
            hits += [line.strip() for line in cell.source.splitlines() if _TAMPERING.search(line)]
    return hits


def _answer_sets(folder: Path):
    """Merged answers per lesson, and per-lesson (or "*") messages for unreadable files."""
    answers, problems = {}, {}
    files = sorted(folder.rglob("*.answers.json")) + sorted(folder.rglob("amp-course-answers.json"))
    for file in files:
        if not _inside(file, folder):
            lesson = (
                file.name[: -len(".answers.json")] if file.name.endswith(".answers.json") else "*"
            )
            problems[lesson] = f"{file.name} is a link, not a file of this submission; not graded"
            continue
        lesson = file.name[: -len(".answers.json")] if file.name.endswith(".answers.json") else "*"
        try:
            data = _quiz.read_answers(file)
        except (_quiz.AnswerFileError, OSError) as error:
            problems[lesson] = f"unreadable answer file {file.name}: {error}"
            continue
        for name, records in data.get("lessons", {}).items():
            answers.setdefault(name, {}).update(records)
    return answers, problems


def grade_quizzes(student: str, folder: Path, key: dict) -> list[dict]:
    rows = []
    answers, problems = _answer_sets(folder)
    for lesson, entries in sorted(key["lessons"].items()):
        for qid, entry in entries.items():
            if not entry["graded"]:
                continue
            item, maximum = f"quiz:{qid}", float(entry["points"])
            record = answers.get(lesson, {}).get(qid)
            if record is None:
                why = (
                    problems.get(lesson)
                    or problems.get("*")
                    or ("not answered" if lesson in answers else f"no answers for {lesson} found")
                )
                rows.append(_row(student, lesson, item, 0.0, maximum, "missing", why))
                continue
            try:
                value = _quiz.normalize_answer({**entry, "id": qid}, record["value"])
                right = _quiz.is_correct(entry, lesson, qid, value, key["secret"])
            except (ValueError, KeyError, TypeError) as error:
                rows.append(
                    _row(student, lesson, item, 0.0, maximum, "error", f"malformed answer: {error}")
                )
                continue
            rows.append(
                _row(
                    student,
                    lesson,
                    item,
                    maximum if right else 0.0,
                    maximum,
                    "correct" if right else "wrong",
                    "",
                )
            )
    return rows


def grade_exercises(
    student: str, folder: Path, masters: list[Path], cell_timeout: int, submission_timeout: float
) -> list[dict]:
    """Rows for every check cell of every master notebook, for one student's folder.

    Only the learner's notebooks are copied, rebuilt, into a scratch folder (nothing else of the
    submission can land on an import path), and each runs in its own pytest process with its share
    of the submission's time, so one hanging lesson does not cost the others their grades.
    """
    rows, plans = [], []  # plans: (rebuilt notebook path, lesson, {cell number: CheckItem})
    with tempfile.TemporaryDirectory(prefix=f"grade-{student}-") as scratch:
        work = Path(scratch) / "work"
        work.mkdir()
        for master_path in masters:
            lesson = master_path.stem
            master = nbformat.read(master_path, as_version=4)
            items = check_items(master)
            if not items:
                continue

            def zero(status, message, items=items, lesson=lesson):
                return [
                    _row(student, lesson, i.name, 0.0, i.points, status, message[:300])
                    for i in items
                ]

            candidates = sorted(folder.rglob(master_path.name))
            found = [p for p in candidates if _inside(p, folder)]
            if not found:
                why = (
                    f"{master_path.name} is a link, not a file of this submission"
                    if candidates
                    else f"{master_path.name} not in the submission"
                )
                rows += zero("missing", why)
                continue
            try:
                learner = nbformat.read(found[0], as_version=4)
                rebuilt = restore(master, learner)
            except Exception as error:  # any unreadable notebook: zero for its checks only
                rows += zero(
                    "error", f"corrupt notebook {master_path.name}: {type(error).__name__}: {error}"
                )
                continue
            protected = {cell_key(c) for c in master.cells} - {None}
            hits = tampering(learner, protected)
            if hits:
                rows += zero(
                    "flagged",
                    "a cell reaches into the course's checking code; review "
                    f"by hand: {hits[0][:150]}",
                )
                continue
            target = work / f"graded-{master_path.name}"
            nbformat.write(rebuilt, target)
            numbers, code_number = {}, 0
            by_key = {i.key: i for i in items}
            for cell in rebuilt.cells:
                if cell.cell_type == "code":
                    if cell_key(cell) in by_key:
                        numbers[code_number] = by_key[cell_key(cell)]
                    code_number += 1
            plans.append((target, lesson, numbers))
        if not plans:
            return rows
        (Path(scratch) / "pytest.ini").write_text("[pytest]\naddopts =\n")
        env = {
            **os.environ,
            "AMP_COURSE_SMOKE": "1",
            "MPLBACKEND": "Agg",
            "AMP_COURSE_OFFLINE": "1",
            GRADING_ENV: "1",
            _quiz.MODE_ENV: "text",
            _quiz.ANSWERS_ENV: str(Path(scratch) / "answers"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            ),
        }
        deadline = time.monotonic() + submission_timeout
        for target, lesson, numbers in plans:
            remaining = deadline - time.monotonic()
            results, default = (
                {},
                ("timeout", f"submission exceeded {submission_timeout:g} s before this lesson ran"),
            )
            if remaining > 0:
                junit = Path(scratch) / f"{target.stem}.junit.xml"
                cmd = [
                    sys.executable,
                    "-P",
                    "-m",
                    "pytest",
                    "-q",
                    "-c",
                    str(Path(scratch) / "pytest.ini"),
                    "-p",
                    "no:cacheprovider",
                    "--noconftest",
                    "--nbval-lax",
                    f"--nbval-cell-timeout={cell_timeout}",
                    f"--junitxml={junit}",
                    target.name,
                ]
                code, output = run_with_timeout(cmd, remaining, cwd=work, env=env)
                if junit.exists():
                    try:
                        results = parse_junit(junit)
                    except ET.ParseError:
                        results = {}
                if code is None:
                    default = (
                        "timeout",
                        f"submission exceeded {submission_timeout:g} s and was stopped",
                    )
                elif not results:
                    tail = output.strip().splitlines()[-1:] or ["no output"]
                    default = ("error", f"notebook could not be run: {tail[0][:200]}")
                else:
                    default = ("error", "check cell did not run")
            for number, item in numbers.items():
                status, message = next(
                    (
                        v
                        for (cls, n), v in results.items()
                        if n == number and (cls == target.name or cls.endswith("." + target.name))
                    ),
                    default,
                )
                passed = status == "passed"
                rows.append(
                    _row(
                        student,
                        lesson,
                        item.name,
                        item.points if passed else 0.0,
                        item.points,
                        "passed" if passed else status,
                        message,
                    )
                )
    return rows


def write_csv(path, rows: list[dict]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    _quiz.atomic_write_text(path, buffer.getvalue())


def master_notebooks(masters=None) -> list[Path]:
    folder = Path(masters) if masters else ROOT / "notebooks"
    paths = sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))
    if not paths:
        raise FileNotFoundError(f"No master notebooks in {folder}.")
    return paths


def grade_submission(
    folder: Path, key: dict, master_paths: list[Path], cell_timeout: int, submission_timeout: float
) -> list[dict]:
    """Every row of one student; an unexpected grader error becomes one error row, never a crash."""
    student = folder.name
    rows = []
    for part, grade in (
        ("quiz", lambda: grade_quizzes(student, folder, key)),
        (
            "exercises",
            lambda: grade_exercises(
                student, folder, master_paths, cell_timeout, submission_timeout
            ),
        ),
    ):
        try:
            rows += grade()
        except Exception as error:  # never let one submission stop the others
            rows.append(
                _row(
                    student,
                    "*",
                    f"{part}:*",
                    0.0,
                    0.0,
                    "error",
                    f"grader failed on this submission's {part}: {type(error).__name__}: {error}"[
                        :300
                    ],
                )
            )
    return rows


def grade_all(
    submissions, key_path, out, masters=None, cell_timeout=120, submission_timeout=900.0, jobs=1
) -> list[dict]:
    """Grade every student folder in ``submissions``; rewrite ``out`` as each one finishes.

    ``jobs`` submissions run at once (each in its own subprocess and kernel). Returns all rows.
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    key = _quiz.load_key(key_path)
    submissions = Path(submissions)
    if not submissions.is_dir():
        raise NotADirectoryError(f"{submissions} is not a folder of submissions.")
    master_paths = master_notebooks(masters)
    if Path(out).exists():  # a previous gradebook is kept, never silently lost
        shutil.copyfile(out, f"{out}.bak")
    folders = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    done: dict[str, list[dict]] = {}
    write_csv(out, [])
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {
            pool.submit(
                grade_submission, folder, key, master_paths, cell_timeout, submission_timeout
            ): folder.name
            for folder in folders
        }
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            print(f"graded {futures[future]} ({len(done)}/{len(folders)})", flush=True)
            write_csv(out, [row for student in sorted(done) for row in done[student]])
    return [row for student in sorted(done) for row in done[student]]
