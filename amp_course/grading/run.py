"""Grading a folder of submissions: one sandboxed kernel per lesson, verdicts decided here.

For each student (a folder; its name is the student id) and each master notebook with check
cells, the learner's copy is rebuilt around the master's protected cells, run in the sandbox, and
probed at every check with a secret seed; the verdicts come from ``verdicts.decide`` in this
process. Quizzes are graded against the key. One row per student, lesson and item goes to the
CSV, rewritten atomically after every student, and each student gets a feedback file.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat

from .. import exercises
from .. import quiz as _quiz
from . import kernel, sandbox, verdicts
from .notebooks import check_items, probe_plan, restore
from .quizzes import grade_quizzes, inside
from .reports import row, write_csv, write_feedback

ROOT = sandbox.PACKAGE.parent


def master_notebooks(masters=None) -> list[Path]:
    folder = Path(masters) if masters else ROOT / "notebooks"
    paths = sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))
    if not paths:
        raise FileNotFoundError(f"No master notebooks in {folder}.")
    return paths


def kernel_env(threads: int = 0) -> dict[str, str]:
    """The whole environment of a learner's kernel: nothing of the grader's leaks in.

    ``threads`` caps torch's threads, so that kernels graded side by side share the cores
    instead of each spreading over all of them (0: torch's default).
    """
    env = {
        "HOME": sandbox.HOME,
        "USER": "learner",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{sandbox.HOME}/.matplotlib",
        "PYTHONPATH": str(ROOT),
        "AMP_COURSE_SMOKE": "1",
        "AMP_COURSE_OFFLINE": "1",
        exercises.GRADING_ENV: "1",
        _quiz.MODE_ENV: "text",
        _quiz.ANSWERS_ENV: f"{sandbox.HOME}/answers",
    }
    data = sandbox.data_path()
    if data is not None:
        env["AMP_COURSE_DATA"] = str(data)
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


@functools.lru_cache(maxsize=1)
def _font_cache() -> list[Path]:
    """Matplotlib's font list, built once here: each fresh kernel would otherwise rebuild it."""
    import matplotlib
    import matplotlib.font_manager  # noqa: F401  (builds the list in the cache dir if missing)

    return sorted(Path(matplotlib.get_cachedir()).glob("fontlist-*.json"))


def _prepare_home(home: Path) -> None:
    (home / ".matplotlib").mkdir(parents=True)
    for path in _font_cache():
        shutil.copyfile(path, home / ".matplotlib" / path.name)


def grade_lesson(
    student, lesson, learner_path, master, box, secret, cell_timeout, deadline, threads=0
):
    """Rows for the check items of one lesson of one student."""
    items = check_items(master)

    def zero(status, message):
        return [row(student, lesson, i.name, 0.0, i.points, status, message[:300]) for i in items]

    try:
        rebuilt = restore(master, nbformat.read(learner_path, as_version=4))
    except Exception as error:  # any unreadable notebook: zero for its checks only
        return zero(
            "error", f"corrupt notebook {learner_path.name}: {type(error).__name__}: {error}"
        )
    plan = probe_plan(rebuilt, items)
    seeds = {item.name: verdicts.secret_seed(secret, item.name) for item in items}
    probes = {i: (it.key, it.name, it.symbol, seeds[it.name]) for i, it in plan.items()}
    payloads = {}
    if probes and deadline - time.monotonic() > 1:
        with tempfile.TemporaryDirectory(prefix=f"grade-{student}-") as scratch:
            home, ipc = Path(scratch) / "home", Path(scratch) / "ipc"
            _prepare_home(home)
            ipc.mkdir()
            env = kernel_env(threads)
            payloads = asyncio.run(
                kernel.run_notebook(rebuilt, probes, box, home, ipc, env, cell_timeout, deadline)
            )
    rows = []
    for item in items:
        payload = payloads.get(item.key, {"timeout": "the submission's time ran out first"})
        points, status, message = verdicts.decide(item, payload, seeds[item.name])
        rows.append(row(student, lesson, item.name, points, item.points, status, message))
    return rows


def grade_exercises(
    student, folder, masters, box, secret, cell_timeout, timeout, threads=0
) -> list[dict]:
    """Rows for every check cell of every master notebook, for one student's folder."""
    rows = []
    deadline = time.monotonic() + timeout
    for master_path in masters:
        master = nbformat.read(master_path, as_version=4)
        items = check_items(master)
        if not items:
            continue
        candidates = sorted(folder.rglob(master_path.name))
        found = [p for p in candidates if inside(p, folder)]
        if not found:
            why = (
                f"{master_path.name} is a link, not a file of this submission"
                if candidates
                else f"{master_path.name} not in the submission"
            )
            rows += [
                row(student, master_path.stem, i.name, 0.0, i.points, "missing", why) for i in items
            ]
            continue
        rows += grade_lesson(
            student,
            master_path.stem,
            found[0],
            master,
            box,
            secret,
            cell_timeout,
            deadline,
            threads,
        )
    return rows


def grade_submission(
    folder: Path, key: dict, masters, box, cell_timeout, timeout, threads=0
) -> list[dict]:
    """Every row of one student; an unexpected grader error becomes one error row, never a crash."""
    student = folder.name
    rows = []
    for part, grade in (
        ("quiz", lambda: grade_quizzes(student, folder, key)),
        (
            "exercises",
            lambda: grade_exercises(
                student, folder, masters, box, key["secret"], cell_timeout, timeout, threads
            ),
        ),
    ):
        try:
            rows += grade()
        except Exception as error:  # never let one submission stop the others
            message = f"grader failed on this submission's {part}: {type(error).__name__}: {error}"
            rows.append(row(student, "*", f"{part}:*", 0.0, 0.0, "error", message[:300]))
    for entry in rows:
        entry["isolation"] = box.label
    return rows


def grade_all(
    submissions,
    key_path,
    out,
    masters=None,
    cell_timeout=120,
    submission_timeout=900.0,
    jobs=1,
    sandbox_kind="auto",
    memory=sandbox.DEFAULT_MEMORY,
    image=sandbox.DEFAULT_IMAGE,
    feedback=None,
) -> list[dict]:
    """Grade every student folder in ``submissions``; rewrite ``out`` as each one finishes.

    ``jobs`` submissions run at once, each lesson in its own sandboxed kernel. ``feedback`` is
    the folder for the per-student Markdown files (default: next to ``out``). Returns all rows.
    """
    key = _quiz.load_key(key_path)
    submissions = Path(submissions)
    if not submissions.is_dir():
        raise NotADirectoryError(f"{submissions} is not a folder of submissions.")
    master_paths = master_notebooks(masters)
    out = Path(out)
    feedback = Path(feedback) if feedback else out.with_name(f"{out.stem}-feedback")
    box_kind = sandbox.choose(sandbox_kind, memory, image)
    if out.exists():  # a previous gradebook is kept, never silently lost
        shutil.copyfile(out, out.with_name(f"{out.name}.bak"))
    folders = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    done: dict[str, list[dict]] = {}
    threads = max(1, (os.cpu_count() or 1) // max(1, jobs)) if jobs > 1 else 0

    def one(folder):
        # Each submission gets its own Sandbox object: containers are cleaned up per lesson.
        box = sandbox.Sandbox(box_kind.kind, box_kind.memory, box_kind.image)
        return grade_submission(
            folder, key, master_paths, box, cell_timeout, submission_timeout, threads
        )

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(one, folder): folder.name for folder in folders}
        for future in as_completed(futures):
            student = futures[future]
            done[student] = future.result()
            write_feedback(feedback, student, done[student])
            write_csv(out, [r for name in sorted(done) for r in done[name]])
            print(f"graded {student} ({len(done)}/{len(folders)})", flush=True)
    if not folders:
        write_csv(out, [])
    return [r for name in sorted(done) for r in done[name]]
