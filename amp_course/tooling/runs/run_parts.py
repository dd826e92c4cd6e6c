"""The next parts of the GPU run, run on a lent GPU (``amp-course gpu --next
MINUTES``): the parts of ``plan.plan`` that fit the minutes given, one after another, each tagged
``<name>-<date>`` in its run's folder, then merged (``parts.merge_reports``)."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path

from ...paths import GPU_REPORTS, NOTEBOOKS, ROOT, lesson_notebooks
from . import gpu, gpu_smoke
from .parts import merge_reports, part_name
from .plan import BENCHES, Part, plan


def select_next(parts: list[Part], minutes: float) -> list[Part]:
    """The parts, in priority order, that fit ``minutes`` together: each is taken if it fits what
    is left, and one too big is passed over for smaller ones after it. Time for the copies to come
    back (about 2 minutes on a lent GPU) is the caller's to keep aside: pass what is left after it.
    """
    chosen, left = [], minutes
    for part in parts:
        if part.minutes <= left:
            chosen.append(part)
            left -= part.minutes
    return chosen


def run_part(part: Part, device, out: Path, root: Path, tag: str) -> tuple[dict, Path]:
    """Run ``part`` on ``device`` as the tagged part ``tag`` of its run under ``out``: lessons
    through ``gpu.execute`` (without nbval: the smoke pass executes every lesson under nbval), a
    bench through ``gpu.run_bench``, the smoke pass through ``gpu_smoke.run``; its report (the
    smoke pass's summary) and its run's folder."""
    if part.kind == "smoke":
        record = gpu.environment_record(device)
        folder = gpu_smoke.folder_for(record["device"], out)
        names = set(part.runs)
        jobs = [job for job in gpu_smoke.jobs_for(lesson_notebooks(root)) if job.name in names]
        return gpu_smoke.run(jobs, folder, record), folder
    if part.kind == "bench":
        from ... import bench

        record = {**gpu.environment_record(device), "amp_dtype": "lesson default"}
        record |= {"notebooks": [], "nbval": "skipped"}
        folder = Path(out) / gpu.run_folder(record["device"])
        config = bench.BenchConfig.full(**BENCHES[part.name])
        record["bench"] = gpu.run_bench(folder, device, config, part.name)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / part_name("report", tag, ".json")).write_text(json.dumps(record, indent=2) + "\n")
        return record, folder
    run = gpu.GpuRun(
        out=Path(out),
        notebooks=tuple(Path(root) / NOTEBOOKS / name for name in part.runs),
        skip_nbval=True,  # the smoke pass runs nbval: it need not double a full-mode run's time
        skip_bench=True,
        amp_dtype="fp16" if part.kind == "fp16-pass" else None,
        emulate="t4" if part.kind == "t4-pass" else None,
        tag=tag,
    )
    record = gpu.execute(run, device)
    return record, run.folder(record["device"])


def _keep_whole_run(folder: Path) -> None:
    """A run made in one go left only its report.json (no ``parts`` count, which a merge writes):
    keep it as a part, or merging the new parts would drop its lessons."""
    report = folder / "report.json"
    if report.exists():
        record = json.loads(report.read_text(encoding="utf-8"))
        if "parts" not in record:
            stamp = re.sub(r"\D", "", str(record.get("date", "")))[:14] or "undated"
            report.replace(folder / part_name("report", f"whole-{stamp}", ".json"))


def run_next(
    minutes: float, device, out: Path | None = None, root: Path = ROOT, clock=time.monotonic
) -> dict:
    """Run the parts of the plan that fit ``minutes`` (``select_next``) on ``device``, one after
    another (a timed part never shares the GPU), each tagged ``<name>-<UTC date>`` in its run's
    folder under ``out`` (the checkout's ``reports/gpu``); a part is not started once its minutes
    would pass ``minutes`` from the start. Then each folder's parts are merged into its
    report.json. Returns the parts run (name, passed, folder), those left, and the merged reports.
    """
    out = Path(root) / GPU_REPORTS if out is None else Path(out)
    start = clock()
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d")
    ran, left, folders = [], [], []
    for part in select_next(plan(root, out), minutes):
        if (clock() - start) / 60 + part.minutes > minutes:
            left.append(part.name)  # the parts before it ran longer than their minutes
            continue
        print(f"part {part.name} ({part.minutes} min): {part.why}", flush=True)
        record, folder = run_part(part, device, out, root, f"{part.name}-{date}")
        if part.kind == "smoke":
            ran.append({"part": part.name, "passed": record["passed"], "folder": str(folder)})
            continue
        passed = record["bench"] == "passed" if part.kind == "bench" else gpu.passed(record)
        ran.append({"part": part.name, "passed": passed, "folder": str(folder)})
        folders += [folder] if folder not in folders else []
    for folder in folders:
        _keep_whole_run(folder)
    merged = {str(folder): merge_reports(folder) for folder in folders}
    return {"ran": ran, "left": left, "merged": merged}
