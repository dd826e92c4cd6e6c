"""Grading a folder of submissions: one sandboxed kernel per lesson, verdicts decided here.

For each student (a folder; its name is the student id) and each master notebook graded, the
learner's copy is rebuilt around the master's protected cells, run in the sandbox, and probed at
every check with a seed drawn from the key's secret and the submitted notebook; the verdicts come
from ``verdicts.decide`` in this process. Quizzes are graded against the key. One row per student,
lesson and item goes to the CSV, rewritten atomically after every student; each student gets a
feedback file, and the run ends with a summary table.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import shutil
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path

import nbformat
from nbformat.reader import NotJSONError
from nbformat.warnings import MissingIDFieldWarning

from ... import exercises
from ... import quiz as _quiz
from ...env_vars import DATA, OFFLINE, SMOKE
from ...paths import ROOT
from . import kernel, matching, sandbox, verdicts
from .notebooks import probe_plan, restore
from .quizzes import grade_quizzes, questions
from .reports import Row, bounded, keep_previous, summary, write_csv, write_feedback
from .settings import Master, Settings, SettingsError
from .unsandboxed import Findings, Guard, read_findings


@dataclass(frozen=True)
class Run:
    """A grading run under way: its settings, its scratch folder, and its guard (no sandbox)."""

    settings: Settings
    scratch: Path
    guard: Guard | None = None


def kernel_env(run: Run) -> dict[str, str]:
    """The whole environment of a learner's kernel: nothing of the grader's leaks in.

    With several kernels at once, torch's threads are capped so that they share the cores
    instead of each spreading over all of them.
    """
    env = {
        "HOME": sandbox.HOME,
        "USER": "learner",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{sandbox.HOME}/.matplotlib",
        "PYTHONPATH": str(ROOT),
        SMOKE: "1",
        OFFLINE: "1",
        exercises.GRADING_ENV: "1",
        _quiz.MODE_ENV: "text",
        _quiz.ANSWERS_ENV: f"{sandbox.HOME}/answers",
    }
    data = sandbox.data_path()
    if data is not None:
        env[DATA] = str(data)
    if run.settings.threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(run.settings.threads)
    if run.guard is not None:
        env.update(run.guard.env())
    return env


@functools.lru_cache(maxsize=1)
def _font_cache() -> list[Path]:
    """Matplotlib's font list, built once here: each fresh kernel would otherwise rebuild it."""
    import matplotlib
    import matplotlib.font_manager  # noqa: F401  (builds the list in the cache dir if missing)

    return sorted(Path(matplotlib.get_cachedir()).glob("fontlist-*.json"))


def _prepare(scratch: sandbox.Scratch) -> None:
    (scratch.home / ".matplotlib").mkdir(parents=True)
    for path in _font_cache():
        shutil.copyfile(path, scratch.home / ".matplotlib" / path.name)
    scratch.ipc.mkdir()


def _observe(run: Run, student: str, rebuilt, probes, box, deadline) -> tuple[dict, Findings]:
    """Run the rebuilt notebook in a fresh kernel: what the probes observed, what was refused."""
    with tempfile.TemporaryDirectory(prefix=f"grade-{student}-", dir=run.scratch) as folder:
        scratch = sandbox.Scratch(Path(folder))
        _prepare(scratch)
        canary = None
        if run.guard is not None:
            canary = run.guard.prepare(scratch)
            run.guard.watch.snapshot()
        timeout = run.settings.cell_timeout
        payloads, answered = asyncio.run(
            kernel.run_notebook(
                rebuilt, probes, box, scratch, kernel_env(run), timeout, deadline, canary
            )
        )
        if run.guard is None:
            return payloads, Findings()
        findings = read_findings(scratch.guard_log, canary if answered else None)
    findings.flags += run.guard.watch.check(keep=run.guard.changed / student)
    return payloads, findings


def grade_lesson(run: Run, student, master: Master, learner_path: Path, box, deadline):
    """Rows for the check items of one lesson of one student."""

    def zero(status, message):
        return [
            Row(student, master.lesson, i.name, i.points, status, bounded(message))
            for i in master.items
        ]

    if too_large := matching.too_large(learner_path):
        return zero("error", f"{too_large}: not graded")
    try:
        data = learner_path.read_bytes()
        with warnings.catch_warnings():
            # A cell without an id (a notebook saved by an older Jupyter) gets one as it is read;
            # the warning would name no student, and nothing is lost.
            warnings.simplefilter("ignore", MissingIDFieldWarning)
            learner = nbformat.reads(data.decode(), as_version=4)
        rebuilt = restore(master.notebook, learner)
    except Exception as error:  # any unreadable notebook: zero for its checks only
        # nbformat's NotJSONError quotes the file's first bytes, which tell a student nothing.
        said = f"{type(error).__name__}: {error}"
        if isinstance(error, (NotJSONError, UnicodeDecodeError)):
            said = "not JSON, as a notebook file cut short or saved in another format is"
        return zero("error", f"corrupt notebook {learner_path.name}: {said}")
    # Hidden inputs drawn for this very notebook: feedback that shows one tells nothing about
    # another submission's, or about a resubmission's.
    submitted = hashlib.sha256(data).hexdigest()
    seeds = {
        i.name: verdicts.secret_seed(run.settings.secret, i.name, submitted) for i in master.items
    }
    plan = probe_plan(rebuilt, list(master.items))
    probes = {i: (it.key, it.name, it.symbol, seeds[it.name]) for i, it in plan.items()}
    payloads, findings = {}, Findings()
    if probes and deadline - time.monotonic() > 1:
        payloads, findings = _observe(run, student, rebuilt, probes, box, deadline)
    rows = []
    for item in master.items:
        payload = payloads.get(item.key, {"timeout": "the submission's time ran out first"})
        status, message = findings.amend(*verdicts.decide(item, payload, seeds[item.name]))
        rows.append(Row(student, master.lesson, item.name, item.points, status, message))
    return rows


def grade_exercises(run: Run, student: str, folder: Path, box) -> list[Row]:
    """Rows for every check cell of every master notebook graded, for one student's folder: each
    lesson's file found by what it is (``matching.find``), the file graded named in the rows."""
    rows = []
    deadline = time.monotonic() + run.settings.submission_timeout
    lessons = {m.lesson: matching.shipped(m.notebook) for m in run.settings.masters}
    found = matching.find(folder, lessons)
    for master in run.settings.masters:
        match = found[master.lesson]
        if match.path is not None:
            graded = grade_lesson(run, student, master, match.path, box, deadline)
            rows += [replace(r, file=match.note(folder)) for r in graded]
            continue
        why = (
            f"{match.links[0].name} is a link, not a file of this submission"
            if match.links
            else f"no notebook of {master.lesson} in the submission (looked for one whose "
            f"metadata names it, or named {master.path.name}, in any folder)"
            + matching.unclaimed(folder, found)
        )
        rows += [
            Row(student, master.lesson, i.name, i.points, "missing", why) for i in master.items
        ]
    return rows


def planned(settings: Settings, part: str) -> list[tuple[str, str, float]]:
    """(lesson, item, points) of every item ``part`` ("quiz" or "exercises") grades in a run."""
    if part == "quiz":
        return [entry[:3] for entry in questions(settings.key, settings.lessons)]
    return [(m.lesson, i.name, i.points) for m in settings.masters for i in m.items]


def grade_submission(run: Run, folder: Path) -> list[Row]:
    """Every row of one student; an unexpected grader error becomes error rows, never a crash."""
    student, settings = folder.name, run.settings
    box = settings.sandbox.fresh()
    rows = []
    for part, grade in (
        ("quiz", lambda: grade_quizzes(student, folder, settings.key, settings.lessons)),
        ("exercises", lambda: grade_exercises(run, student, folder, box)),
    ):
        try:
            rows += grade()
        except Exception as error:  # never let one submission stop the others
            message = f"grader failed on this submission's {part}: {type(error).__name__}: {error}"
            # Each item it would have graded, at its worth: this student's total is out of the
            # same points as everyone else's, and the zero shows.
            rows += [
                Row(student, *item, "error", bounded(message)) for item in planned(settings, part)
            ]
    return [replace(r, isolation=box.label) for r in rows]


def _top(submissions: Path, outputs) -> tuple[list[Path], list[Path]]:
    """The top of a submissions folder by name, hidden entries and ``outputs`` (the grader's own,
    written there) aside: (the students' folders, everything else, a Mac zip's ``__MACOSX``
    and stray files)."""
    mine = {Path(p).resolve() for p in outputs}
    entries = [
        p
        for p in sorted(submissions.iterdir())
        if not p.name.startswith(".") and p.resolve() not in mine
    ]
    folders = [p for p in entries if p.is_dir() and p.name != matching.MAC_ZIP]
    return folders, [p for p in entries if p not in folders]


def student_folders(submissions: Path, outputs=()) -> list[Path]:
    """The folders of a submissions folder, one per student, by name: not a hidden one, a Mac
    zip's ``__MACOSX``, nor one of ``outputs``."""
    return _top(submissions, outputs)[0]


def left_out(submissions: Path, outputs=()) -> str | None:
    """One line naming what the top of a submissions folder holds besides students' folders (a
    notebook handed in without a folder is not graded: its student is unknown), or None."""
    others = [p.name + ("/" if p.is_dir() else "") for p in _top(submissions, outputs)[1]]
    if not others:
        return None
    return (
        f"not graded, as no student's folder (one folder per student, named by the student): "
        f"{', '.join(others)}"
    )


def grade_all(submissions, settings: Settings, out, feedback=None) -> list[Row]:
    """Grade every student folder in ``submissions``; rewrite ``out`` as each one finishes.

    ``settings.jobs`` submissions run at once, each lesson in its own sandboxed kernel.
    ``feedback`` is the folder for the per-student Markdown files (default: next to ``out``).
    Prints a line per student and a summary table at the end; returns all rows.
    """
    submissions, out = Path(submissions), Path(out)
    if not submissions.is_dir():
        raise SettingsError(f"{submissions} is not a folder of submissions (one per student)")
    feedback = Path(feedback) if feedback else out.with_name(f"{out.stem}-feedback")
    outputs = (out, out.with_name(f"{out.name}.bak"), feedback)
    folders, others = _top(submissions, outputs)
    if not folders:  # an empty gradebook would push the last real one out of its .bak
        held = ", ".join(p.name + ("/" if p.is_dir() else "") for p in others)
        raise SettingsError(
            f"no student's folder in {submissions} (one folder per student, named by the "
            f"student){': ' + held if held else ''}; nothing was graded"
        )
    stray = left_out(submissions, outputs)
    keep_previous(out)  # a previous gradebook is kept, never silently lost
    if stray:
        print(f"note: {stray}", flush=True)
    done: dict[str, list[Row]] = {}
    if settings.sandbox.kind == "none":
        sandbox.warn(settings.sandbox)
    with tempfile.TemporaryDirectory(prefix="amp-grade-") as scratch:
        guard = None
        if settings.sandbox.kind == "none":
            masters = [m.path for m in settings.masters]
            guard = Guard(Path(scratch), settings.key_path, out, feedback, masters, submissions)
        run = Run(settings, Path(scratch), guard)
        try:
            with ThreadPoolExecutor(max_workers=settings.jobs) as pool:
                futures = {pool.submit(grade_submission, run, f): f.name for f in folders}
                for future in as_completed(futures):
                    student = futures[future]
                    done[student] = future.result()
                    write_feedback(feedback, student, done[student])
                    write_csv(out, [r for name in sorted(done) for r in done[name]])
                    print(f"graded {student} ({len(done)}/{len(folders)})", flush=True)
        finally:
            if guard is not None:
                guard.close()
    rows = [r for name in sorted(done) for r in done[name]]
    print(summary(rows, settings.sandbox), flush=True)
    if settings.sandbox.kind == "none":
        sandbox.warn(settings.sandbox)
    return rows
