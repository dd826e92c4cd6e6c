"""The CUDA smoke pass: every lesson at smoke sizes on the GPU, plainly and under the T4 rehearsal,
each notebook executed by nbval (``pytest --nbval-lax``) with its exercise blanks holding the
reference solutions, several at a time. It finds the crashes that only a GPU reaches (a torch.cuda
call a CPU never makes) in minutes, without doubling a full-mode run's time.

Each lesson and rehearsal leaves a JSON verdict and nbval's log and JUnit XML under
``reports/gpu/<device>-smoke/``, and ``smoke.json`` sums them up; a verdict names the SHA-256 of
the notebook it ran, so ``stale`` tells which lessons changed since their last passing verdict.
A rerun of some lessons (``--notebooks``) replaces their verdicts and keeps the others'.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import re
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from ... import emulation
from ...lesson import SMOKE_ENV
from ...paths import GPU_REPORTS, ROOT, lesson_notebooks
from .execute import prepare, run_nbval
from .gpu import run_folder

REHEARSALS = (None, "t4")  # plainly, then as a Colab T4 (``ac.emulation``)
WORKERS = 6  # lessons at a time: smoke sizes leave a big GPU's memory and 16 cores to spare
CELL_TIMEOUT_S = 300  # a smoke cell runs seconds; a hung one is stopped
JOB_TIMEOUT_S = 480  # one lesson's whole nbval run, kernel start included
SUMMARY = "smoke.json"
# Terminal colours in nbval's messages (the JUnit XML writes the escape character as "#x1B").
ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-9;]*m")


@dataclass(frozen=True)
class SmokeJob:
    """One lesson executed by nbval at smoke sizes, plainly or rehearsing ``emulate``."""

    lesson: Path
    emulate: str | None = None

    @property
    def name(self) -> str:
        return self.lesson.stem + (f"-{self.emulate}" if self.emulate else "")

    @property
    def rehearsal(self) -> str:
        return self.emulate or "plain"


def folder_for(device_name: str, out: Path = ROOT / GPU_REPORTS) -> Path:
    """``reports/gpu/<device>-smoke/``: beside the device's full-mode runs, never read as one."""
    return Path(out) / f"{run_folder(device_name)}-smoke"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def jobs_for(notebooks: list[Path] | None = None, rehearsals=REHEARSALS) -> list[SmokeJob]:
    """Every lesson (or ``notebooks``) under every rehearsal."""
    lessons = lesson_notebooks() if notebooks is None else list(notebooks)
    return [SmokeJob(Path(path), emulate) for emulate in rehearsals for path in lessons]


def _environment(job: SmokeJob, threads: int) -> dict[str, str]:
    """The kernel's variables: smoke sizes, no figure windows, its share of the cores and the
    rehearsal (``run_nbval`` puts this checkout on the path: the filled copy lies outside it,
    where the setup cell's ``../amp_course`` finds nothing)."""
    env = {**os.environ, SMOKE_ENV: "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": str(threads)}
    env.pop(emulation.ENV, None)
    if job.emulate:
        env[emulation.ENV] = job.emulate
    return env


def first_failure(junit: Path, output: str) -> str:
    """The first failing cell as nbval reported it (which cell and why, then the traceback's last
    lines), else the log's end."""
    for case in ET.parse(junit).getroot().iter("testcase") if junit.exists() else ():
        for child in case:
            if child.tag in ("failure", "error"):
                text = ANSI.sub("", child.get("message") or child.text or "")
                lines = [line for line in text.splitlines() if line.strip()]
                head = next((line for line in lines if line.startswith("Cell ")), "")
                return "\n".join([head, *lines[-3:]]).strip()
    return "\n".join(ANSI.sub("", output).strip().splitlines()[-12:])


def run_job(job: SmokeJob, folder: Path, cell_timeout: int, threads: int = 2) -> dict:
    """Execute one lesson with nbval; write and return its verdict."""
    junit = folder / f"{job.name}.xml"
    junit.unlink(missing_ok=True)  # a verdict never reads an earlier run's XML
    start = time.monotonic()
    # The filled copy is not kept: the verdict, the log and the JUnit XML say what ran.
    with tempfile.TemporaryDirectory(prefix="amp-course-smoke-") as tmp:
        try:
            copy = prepare(job.lesson, tmp, name=f"{job.name}.ipynb")  # solutions filled in
            env = _environment(job, threads)
            code, output = run_nbval(
                [copy], cell_timeout, junitxml=junit, env=env, timeout_s=JOB_TIMEOUT_S
            )
        except Exception as error:  # noqa: BLE001 - a lesson that cannot start is a failed lesson
            code, output = 1, f"{type(error).__name__}: {error}"
    (folder / f"{job.name}.log").write_text(output)
    verdict = {
        "notebook": job.lesson.name,
        "rehearsal": job.rehearsal,
        "status": "passed" if code == 0 else "failed",
        "seconds": round(time.monotonic() - start, 1),
        "sha256": sha256(job.lesson),
        "error": "" if code == 0 else first_failure(junit, output),
    }
    (folder / f"{job.name}.json").write_text(json.dumps(verdict, indent=2) + "\n")
    print(f"{job.name}: {verdict['status']} in {verdict['seconds']} s", flush=True)
    return verdict


def verdicts(folder: Path) -> list[dict]:
    """Every verdict in a smoke folder (this run's and earlier ones' alike)."""
    found = []
    for path in sorted(Path(folder).glob("*.json")):
        if path.name != SUMMARY:
            found.append(json.loads(path.read_text()))
    return found


def run(
    jobs: list[SmokeJob],
    folder: Path,
    record: dict,
    *,
    workers: int = WORKERS,
    cell_timeout: int = CELL_TIMEOUT_S,
) -> dict:
    """Run ``jobs`` ``workers`` at a time (the slowest last time first), then write
    ``smoke.json`` from every verdict in ``folder``; returns it (``passed``: all of them did)."""
    folder.mkdir(parents=True, exist_ok=True)
    before = {(v["notebook"], v["rehearsal"]): v.get("seconds") or 0 for v in verdicts(folder)}
    jobs = sorted(jobs, key=lambda j: -before.get((j.lesson.name, j.rehearsal), 0))
    threads = max(1, (os.cpu_count() or 2) // max(1, workers))
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(lambda job: run_job(job, folder, cell_timeout, threads), jobs))
    every = verdicts(folder)
    summary = {
        **record,
        "workers": workers,
        "seconds": round(time.monotonic() - start, 1),
        "ran": sorted(job.name for job in jobs),
        "passed": bool(every) and all(v["status"] == "passed" for v in every),
        "verdicts": every,
    }
    (folder / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def stale(root: Path = ROOT, reports: Path | None = None, rehearsals=REHEARSALS) -> list[str]:
    """``<lesson>`` or ``<lesson>-<rehearsal>`` for each of ``root``'s lessons and each rehearsal
    with no passing verdict for the notebook as it is now, in any device's smoke folder under
    ``reports`` (``root``'s reports/gpu)."""
    reports = Path(root) / GPU_REPORTS if reports is None else Path(reports)
    current = set()
    for folder in reports.glob("*-smoke"):
        for verdict in verdicts(folder):
            if verdict.get("status") == "passed":
                current.add((verdict["notebook"], verdict["rehearsal"], verdict.get("sha256")))
    missing = []
    for job in jobs_for(lesson_notebooks(root), rehearsals):
        if (job.lesson.name, job.rehearsal, sha256(job.lesson)) not in current:
            missing.append(job.name)
    return sorted(missing)
