"""What a full-mode GPU run of the current notebooks still lacks, as parts in priority order with
each part's minutes, and the parts that fit a session's minutes run and merged into their run's
folder (``amp-course gpu --plan``, ``--next MINUTES``).

GPU time may come in sessions of minutes, so the course's run is built from parts made by different
sessions, possibly on different days and devices. What is done is read from every committed run
folder under ``reports/gpu/`` (``amp_course.tooling.gpu_copies``): a lesson is done when a
passing full-mode copy ran it as it is now. Each part runs tagged ``<name>-<date>`` (its
``report-<tag>.json``), and ``parts.merge_reports`` merges it into its folder.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ...paths import GPU_REPORTS, ROOT, lesson_notebooks
from ..gpu_copies import full_copies, run_records, up_to_date
from . import gpu_smoke

# The fp16 pass (docs/gpu-run.md, "fp16 pass"): the lessons whose fp16 recipe a Colab T4 runs, with
# AMP_DTYPE="fp16", into <device>-fp16/.
FP16_PASS = ("00_scenario", "03_grad_scaler", "04_training_loops")
# The bench parts: the ViT-B/16 matrix the GPU results read (as the committed run made it),
# the eager workloads the results show beside it (`amp-course bench --full --workloads
# matmul,mnist_cnn,max_batch`: the results never read them from lesson 05's printout), and lesson
# 10's MFU ladder (`amp-course bench --workloads ladder`).
BENCHES = {
    "bench-vit_b16": {"workloads": ("vit_b16",), "compile": True, "fused": True},
    "bench-eager": {"workloads": ("matmul", "mnist_cnn", "max_batch")},
    "bench-ladder": {"workloads": ("ladder",)},
}
# Seconds a part's lessons (papermill, full mode) or bench workload take where no committed run
# has timed it, or timed it before it grew. Measured in an H200 session after the committed H100
# run: lesson 10 took 260 s, lesson 08 about 140 s with its 100 s
# training budget (the H100 run timed an older 08 at 37 s), the ViT-B/16 bench about 150 s. The
# ladder has not run as a bench part yet: lesson 10 climbs the same ladder. The H100 run's other
# lessons took 12-52 s.
ESTIMATES_S = {
    "08_capstone": 140,
    # Untimed with torchao (the H100 run's 52 s had none), from what it runs with torchao 0.18:
    # its earlier sections (about 50 s there), two compiled ViT-L/16 training graphs for the FP8
    # comparison, bf16 and FP8 (each a compile of a 24-block forward and backward: minutes, as
    # lesson 10's compiles of ViT-B/16 rungs suggest), and torchao's AdamW compiled per
    # parameter shape.
    "09_beyond_autocast": 300,
    "10_where_time_goes": 260,
    # Never run on a GPU; from what it runs there: six compiled GEMM graphs (bf16 and FP8 for
    # each of GEMM_SIZES) timed for half a second each, torchao's AdamW8bit compiled for each of
    # the MNIST CNN's parameter shapes (over twenty) and the MLP's, seven MLP training runs.
    "11_below_bf16": 240,
    "vit_b16": 150,
    # Untimed as a part: guesses within lesson 05's 258.5 s on the committed H100 run, which ran
    # these three, both ViT matrices and its own sections.
    "matmul": 30,
    "mnist_cnn": 30,
    "max_batch": 60,
    "ladder": 260,
    "any other lesson": 60,
}
PART_START_S = 15  # a part's own cost beyond its lessons: the kernel's start, the report
# The CUDA smoke pass (``runs.gpu_smoke``): every lesson twice under nbval, six at a time; lessons
# 09 and 11 compile with torchao for minutes on their own (ESTIMATES_S), so "all" allows more. No
# committed report times the pass: the budget is an estimate, not a measurement.
SMOKE_S = {"all": 300, "each": 15}
# A cell calling the course's timers: such a lesson's figures would be skewed by a kernel beside it.
TIMERS = re.compile(r"\bac\.(timing|bench)\.")


@dataclass(frozen=True)
class Part:
    """One part of the GPU run: what it runs, its minutes and where they come from, and why."""

    name: str  # its tag starts with it: "10_where_time_goes", "bench-ladder", "t4-00_scenario"
    kind: str  # "lesson", "bench", "t4-pass" or "fp16-pass"
    runs: tuple[str, ...]  # the notebooks it executes, or the bench workloads
    minutes: float
    source: str  # "last run on <device> <date>", or "estimate" (ESTIMATES_S)
    why: str
    alone: bool = False  # it times things: nothing else may share the GPU while it runs


def times_things(nb) -> bool:
    """Whether a lesson times something (a code cell calls ``ac.timing`` or ``ac.bench``)."""
    return any(cell.cell_type == "code" and TIMERS.search(cell.source) for cell in nb.cells)


def _records(reports: Path):
    """Each committed part's record: a folder's ``report-*.json``, or its ``report.json`` if it
    has none (a run made in one go); the merged report dates each lesson by its newest part."""
    for folder in sorted(p for p in Path(reports).iterdir() if p.is_dir()):
        paths = sorted(folder.glob("report-*.json")) or sorted(folder.glob("report.json"))
        for path in paths:
            try:
                yield json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                continue  # an interrupted part: nothing to time by


def last_runs(reports: Path) -> dict[str, tuple[float, str]]:
    """Each lesson's (by stem) and bench workload's seconds in the newest committed run of it on
    any device, with "last run on <device> <date>"; failed runs left out."""
    found: dict[str, tuple[str, float, str]] = {}

    def keep(name: str, seconds, record: dict) -> None:
        date = str(record.get("date", ""))
        if seconds and date >= found.get(name, ("",))[0]:
            found[name] = (date, float(seconds), record.get("device", "an unnamed GPU"))

    if not Path(reports).is_dir():
        return {}
    for record in _records(reports):
        for run in record.get("notebooks", []):
            if run.get("status") == "passed":
                keep(Path(run["notebook"]).stem, run.get("seconds"), record)
    for path in sorted(Path(reports).glob("*/bench*/bench.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        for workload, seconds in record.get("seconds", {}).items():
            if record.get("results", {}).get(workload):
                keep(workload, seconds, record)
    return {
        name: (seconds, f"last run on {device} {date[:10]}")
        for name, (date, seconds, device) in found.items()
    }


def _minutes(name: str, runs: dict) -> tuple[float, str]:
    """A part's minutes from the last run of ``name`` (``last_runs``) or ESTIMATES_S, and which:
    an estimate larger than the last run wins, since it timed the part after it grew."""
    seconds, source = runs.get(name, (0.0, ""))
    estimate = ESTIMATES_S.get(name, 0 if seconds else ESTIMATES_S["any other lesson"])
    if estimate > seconds:
        seconds, source = estimate, "estimate"
    seconds += PART_START_S
    return round(seconds / 60, 1), source


def _lacking(committed, lesson: str, folders: list[Path], what: str) -> str | None:
    """Why ``lesson`` needs a run into ``folders``' kind of run (None: a copy there is current)."""
    current, stale = up_to_date(committed, full_copies(lesson, folders))
    if current is not None:
        return None
    if stale is None:
        return f"no passing {what} copy"
    copy, changed = stale
    when = f"{copy.stamp['device']} {copy.stamp['date'][:10]}"
    return f"changed since its {what} run on {when} ({changed} cell(s) differ)"


def _benched(reports: Path, workload: str) -> bool:
    for path in Path(reports).glob("*/bench*/bench.json"):
        if json.loads(path.read_text(encoding="utf-8")).get("results", {}).get(workload):
            return True
    return False


def _pass_parts(lessons: dict, folders: list[Path], runs: dict, kind: str) -> list[Part]:
    """A part for each of ``lessons`` (path: notebook) that no copy in ``folders`` ran as it is."""
    prefix, what = {
        "lesson": ("", "full-mode"),
        "t4-pass": ("t4-", "T4-rehearsed"),
        "fp16-pass": ("fp16-", "fp16"),
    }[kind]
    parts = []
    for path, nb in lessons.items():
        why = _lacking(nb, path.stem, folders, what)
        if why is not None:
            minutes = _minutes(path.stem, runs)
            # Only the lessons' own run gives speed figures; the passes check that each lesson
            # completes (a rehearsed T4 still runs at the big GPU's speed).
            alone = kind == "lesson" and times_things(nb)
            parts.append(Part(prefix + path.stem, kind, (path.name,), *minutes, why, alone))
    return parts


def plan(root: Path = ROOT, reports: Path | None = None) -> list[Part]:
    """What a full-mode run of ``root``'s notebooks lacks, given the runs in ``reports`` (the
    checkout's ``reports/gpu``), in priority order: the CUDA smoke pass of the lessons without a
    passing verdict for their current text, the lessons, the bench and the ladder, the
    T4-rehearsed pass, the fp16 pass."""
    reports = Path(root) / GPU_REPORTS if reports is None else Path(reports)
    smoke = []
    stale = gpu_smoke.stale(root, reports)
    if stale:
        every = len(gpu_smoke.jobs_for(lesson_notebooks(root)))
        seconds = SMOKE_S["all"] if len(stale) == every else SMOKE_S["each"] * len(stale) + 60
        why = f"no passing CUDA smoke verdict for the current text of {len(stale)} of {every}"
        smoke = [Part("smoke", "smoke", tuple(stale), round(seconds / 60, 1), "estimate", why)]
    records = run_records(reports)
    runs = last_runs(reports)
    own, t4, fp16 = [], [], []  # each pass's folders, newest first
    for folder, record in records:
        if record.get("emulated"):
            t4 += [folder] if folder.name.endswith("-t4-emulated") else []
        elif record.get("amp_dtype", "lesson default") == "lesson default":
            own.append(folder)
        elif record.get("amp_dtype") == "fp16":
            fp16.append(folder)
    lessons = {path: nbformat.read(path, as_version=4) for path in lesson_notebooks(root)}
    parts = smoke + _pass_parts(lessons, own, runs, "lesson")
    for name, config in BENCHES.items():
        lacking = [w for w in config["workloads"] if not _benched(reports, w)]
        if lacking:
            keys = ", ".join(f"results[{w!r}]" for w in lacking)
            why = f"no bench*/bench.json with {keys} in any GPU run"
            each = [_minutes(w, runs) for w in config["workloads"]]
            # One part's start, not one per workload.
            start = (len(each) - 1) * PART_START_S / 60
            minutes = round(sum(m for m, _ in each) - start, 1)
            source = "estimate" if any(s == "estimate" for _, s in each) else each[0][1]
            parts.append(Part(name, "bench", config["workloads"], minutes, source, why))
    parts += _pass_parts(lessons, t4, runs, "t4-pass")
    fp16_lessons = {path: nb for path, nb in lessons.items() if path.stem in FP16_PASS}
    return parts + _pass_parts(fp16_lessons, fp16, runs, "fp16-pass")


def format_plan(parts: list[Part]) -> str:
    """The plan as a table: each part's name, minutes, where they come from and why it is needed,
    then the total."""
    if not parts:
        return "Nothing is lacking: every lesson, bench and pass has a current committed copy.\n"
    rows = [("part", "minutes", "from", "why")]
    rows += [
        (p.name + (" *" if p.alone else ""), f"{p.minutes:.1f}", p.source, p.why) for p in parts
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(
            [row[0].ljust(widths[0]), row[1].rjust(widths[1]), row[2].ljust(widths[2]), row[3]]
        )
        for row in rows
    ]
    total = sum(p.minutes for p in parts)
    lines += [
        "",
        f"{len(parts)} part(s), {total:.1f} minutes in all. * times things: runs alone on the GPU. "
        "Minutes count papermill; nbval runs in the smoke pass, at smoke sizes.",
    ]
    return "\n".join(lines) + "\n"
