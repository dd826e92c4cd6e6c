"""How long each lesson takes in smoke mode on this machine: the benchmark behind the course's
targets on a 2-core CPU, each lesson in 30 s or less and all of them in 240 s or less. The tests
only guard against a hanging cell; a timed test would fail on a busy machine, a benchmark records.

Run as ``make bench-smoke`` or ``amp-course smoke-bench``: every lesson runs once per pass, one
after another (every core to each), and the passes follow each other, so a change in the machine's
load touches every lesson alike; each lesson's median over the passes and their range are kept.
Each pass starts with an empty torch.compile cache, as a learner's first run of the course does.
``--rehearse-cpu avx2`` runs the lessons (and the CPU step beside them) with the caps of a CPU
without native bf16 (``ac.cpu``). ``reports/smoke/<device>.json`` and ``.md`` keep the times with
the machine they were measured on, ``<device>-rehearsing-<kind>`` a rehearsal's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from ... import cpu
from ...device import machine_record
from ...paths import ROOT, SMOKE_REPORTS, lesson_notebooks
from .. import machine_reports
from .. import rehearse as rehearsing
from . import cpu_step
from .execute import environment, run_notebooks

TARGET_S = 30.0  # each lesson's smoke run, on a 2-core CPU without native bf16
TOTAL_TARGET_S = 240.0  # all of them
HANG_GUARD_S = 300  # a cell running longer than this is stopped and its lesson marked failed
PASSES = 3


def _lesson_row(runs: list[dict], target_s: float) -> dict:
    """One lesson's passes as one row: the median of its times, their range, its status."""
    times = [r["seconds"] for r in runs if r["seconds"] is not None]
    failed = [r for r in runs if r["status"] != "passed"]
    seconds = round(statistics.median(times), 1) if times else None
    return {
        "notebook": runs[0]["notebook"],
        "status": "failed" if failed else "passed",
        "seconds": seconds,
        "runs": times,
        "error": failed[0]["error"] if failed else "",
        "met": not failed and seconds is not None and seconds <= target_s,
    }


def report(
    passes: list[list[dict]],
    record: dict,
    target_s: float = TARGET_S,
    total_target_s: float = TOTAL_TARGET_S,
    *,
    step: dict | None = None,
) -> dict:
    """The benchmark record: the machine, the targets, each lesson's median time over the
    ``passes`` (each a list of ``run_notebooks`` results in the same lesson order), its range, and
    whether each lesson and the whole course met their targets; ``step`` is ``cpu_step``'s."""
    rows = [_lesson_row(list(runs), target_s) for runs in zip(*passes, strict=True)]
    timed = [r["seconds"] for r in rows if r["seconds"] is not None]
    totals = [round(sum(r["seconds"] or 0 for r in one), 1) for one in passes]
    total = round(sum(timed), 1)
    return {
        "cpu_count": os.cpu_count(),
        **record,
        "target_s": target_s,
        "total_target_s": total_target_s,
        "passes": len(passes),
        "total_s": total,
        "pass_totals_s": totals,
        "slowest_s": max(timed, default=None),
        "all_met": all(r["met"] for r in rows) and total <= total_target_s,
        "cpu_step": step,
        "notebooks": rows,
    }


def _range(runs: list[float]) -> str:
    return f"{min(runs):.1f}-{max(runs):.1f}" if len(runs) > 1 else "-"


def markdown(bench: dict) -> str:
    """The record as a table, with the machine, the rehearsal and the versions it was measured
    with, and the noise its passes show."""
    rehearsal = bench.get("rehearsal")
    title = f"# Lessons in smoke mode on {bench['device']}"
    lines = [title + (f", rehearsing {rehearsal['kind']}" if rehearsal else ""), ""]
    lines.append(
        f"{bench['cpu_count']} cores, torch {bench['versions']['torch']}, measured "
        f"{bench['date']}. Targets: each lesson in {bench['target_s']:.0f} s or less, all of them "
        f"in {bench['total_target_s']:.0f} s or less. Papermill's duration of each run, kernel "
        f"start included; {bench['passes']} pass(es) over the lessons, one lesson at a time, each "
        "with an empty torch.compile cache; each lesson's median and the range of its passes."
    )
    if provenance := machine_reports.provenance_line(bench):
        lines += ["", provenance]
    if rehearsal:
        lines += ["", rehearsing.paragraph(rehearsal, "every lesson's kernel")]
    lines += [
        "",
        "| lesson | seconds (median) | range | target met |",
        "| --- | ---: | ---: | --- |",
    ]
    for row in bench["notebooks"]:
        seconds = "-" if row["seconds"] is None else f"{row['seconds']:.1f}"
        met = "yes" if row["met"] else f"**no** ({row['status']})"
        lines.append(
            f"| {Path(row['notebook']).stem} | {seconds} | {_range(row['runs'])} | {met} |"
        )
    totals = bench["pass_totals_s"]
    within = "yes" if bench["total_s"] <= bench["total_target_s"] else "**no**"
    lines += [
        "",
        f"Total {bench['total_s']:.1f} s (target met: {within}); the passes took "
        f"{', '.join(f'{t:.1f}' for t in totals)} s, a spread of "
        f"{(max(totals) - min(totals)) / max(min(totals), 1e-9):.0%}; slowest lesson "
        f"{bench['slowest_s']} s.",
    ]
    if step := bench.get("cpu_step"):
        lines += ["", f"What this CPU kind does to bf16: {cpu_step.sentence(step)}"]
    return "\n".join(lines + [""])


def measure(
    notebooks: list[Path] | None = None, *, passes: int = PASSES, rehearse: str | None = None
) -> dict:
    """Each lesson (every one by default) run in smoke mode on the CPU, ``passes`` times, with
    rehearsal ``rehearse``'s caps if given; the benchmark record (``report``)."""
    env = cpu.rehearsal_environment(rehearse)
    record = {**machine_record("cpu"), **machine_reports.provenance()}
    if rehearse:
        record["rehearsal"] = rehearsing.record(rehearse)
        record["cpu_capability"] = cpu.REHEARSALS[rehearse].caps[cpu.ATEN_CAP_VARIABLE].upper()
    notebooks = notebooks or lesson_notebooks()
    runs = []
    with tempfile.TemporaryDirectory() as tmp, environment(**env):
        step = cpu_step.measure_in_child()
        for index in range(passes):
            out = Path(tmp) / f"pass-{index + 1}"
            # Each pass compiles afresh, as a learner's first run does: torch.compile's one-time
            # checks and kernels are cached on disk, in a folder of the pass's own.
            with environment(TORCHINDUCTOR_CACHE_DIR=str(out / "inductor-cache")):
                runs.append(run_notebooks(notebooks, out, HANG_GUARD_S, smoke=True, device="cpu"))
    return report(runs, record, step=step)


name = rehearsing.report_name


def write(bench: dict, out: Path) -> list[Path]:
    """``<name>.json`` and ``<name>.md`` in ``out`` (``name``)."""
    return machine_reports.write(bench, markdown(bench), out, name=name(bench))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amp-course smoke-bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help=f"default: {SMOKE_REPORTS}/")
    parser.add_argument("--notebooks", nargs="*", type=Path, default=None)
    parser.add_argument("--passes", type=int, default=PASSES, help="passes over the lessons")
    rehearsing.add_option(parser, "the lessons")
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error("--passes must be 1 or more")
    missing = [str(path) for path in args.notebooks or () if not path.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    if args.notebooks and args.out is None:  # a part would replace the report of every lesson
        parser.error(
            f"--notebooks times some lessons only: give an --out of its own, not {SMOKE_REPORTS}/"
        )
    bench = measure(args.notebooks, passes=args.passes, rehearse=args.rehearse_cpu)
    write(bench, args.out or ROOT / SMOKE_REPORTS)
    print(markdown(bench))
    return 0 if bench["all_met"] else 1
