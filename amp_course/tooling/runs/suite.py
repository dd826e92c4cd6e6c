"""How long the test suite takes on this machine: the benchmark behind the course's target of
240 s of pytest for ``make test`` on a 2-core CPU without native bf16. The tests are not timed (a
timed test would fail on a busy machine); this records.

Run as ``make bench-suite`` or ``amp-course suite-bench``: the README's test command (pytest on
every test, as ``make test`` runs it after the lint) ``--passes`` times. With ``--rehearse-cpu
avx2`` the passes alternate between the rehearsal (``ac.cpu``'s caps, in every process the tests
start) and this machine as it is, so a change in the machine's load touches both alike and the
report gives the rehearsal's cost beside the native time measured with it. Each pass starts with
an empty torch.compile cache, as a fresh clone's first run does (the lessons that compile pay
for it; a cache left by earlier runs made them faster). pytest's own duration of each pass is
kept, its counts of passed and failed tests, and its slowest tests, and before the passes the
smoke benchmark's CPU step (``cpu_step``) is timed for each kind, and after each pass the
native one again, so a slower machine or hour can be told from a slower suite. While each pass
runs, every process it starts is sampled (``processes``): how many, their CPU time, and which of
them imported torch, beside what a fresh ``import torch`` costs here.
``reports/suite/<device>.json`` and ``.md`` keep them with the machine they were measured on,
``<device>-rehearsing-<kind>`` a rehearsal's.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ... import cpu, env_vars
from ...device import machine_record
from ...paths import ROOT, SUITE_REPORTS
from .. import machine_reports
from .. import rehearse as rehearsing
from . import cpu_step, processes

TARGET_S = 240.0  # make test's pytest, on a 2-core CPU without native bf16
# What the Makefile's test recipe sets: the shipped digits, no plot windows, and bytecode caches
# written even where the environment turns them off (containers, CI). Without them every pytest
# worker rewrites and compiles the test modules anew: its collection took 5.3 s here, 2.0 s from
# the second run on.
ENVIRONMENT = {env_vars.OFFLINE: "1", "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": ""}
PASSES = 2
SLOWEST = 10  # the slowest tests kept from each pass
# pytest's last line, "2894 passed, 17 skipped, 4 warnings in 231.68s (0:03:51)" (between rows of
# "=" without -q), and its --durations lines, "45.93s setup    tests/test_grading.py::test_...".
SUMMARY = re.compile(
    r"^(?:=+ )?(?P<counts>\d+ (?:passed|failed|skipped|errors?|deselected)\b.*?) "
    r"in (?P<seconds>[\d.]+)s\b",
    re.MULTILINE,
)
DURATION = re.compile(r"^(?P<seconds>[\d.]+)s (?P<when>setup|call|teardown)\s+(?P<test>\S+)")


def command(workers: str = "logical") -> list[str]:
    """The Makefile's test command (``make test`` after its lint), slowest tests listed."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "-n",
        workers,
        "--dist",
        "loadgroup",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--durations={SLOWEST}",
    ]


def parse(output: str) -> dict:
    """One pass's pytest output as a record: its seconds, its counts, its slowest tests."""
    summaries = list(SUMMARY.finditer(output))
    if not summaries:
        tail = output.strip().splitlines()[-1:] or ["no output"]
        raise ValueError(f"pytest's output has no summary line; it ended: {tail[0][:200]}")
    last = summaries[-1]
    counts = {
        word: int(number)
        for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last["counts"])
    }
    slowest = [
        {"seconds": float(m["seconds"]), "when": m["when"], "test": m["test"]}
        for m in map(DURATION.match, output.splitlines())
        if m
    ][:SLOWEST]
    return {"seconds": float(last["seconds"]), "counts": counts, "slowest": slowest}


def run_pass(rehearse: str | None, workers: str = "logical") -> dict:
    """One pass of the suite from the course's root, as the README's command runs it, with an
    empty torch.compile cache of its own."""
    env = {**os.environ, **ENVIRONMENT}
    env.update(cpu.rehearsal_environment(rehearse))
    with (
        tempfile.TemporaryDirectory(prefix="amp-suite-inductor-") as cache,
        processes.Account() as account,  # every process the pass starts, and its CPU time
    ):
        env[cpu.INDUCTOR_CACHE_VARIABLE] = cache
        done = subprocess.run(
            command(workers), cwd=ROOT, env=env, capture_output=True, text=True, check=False
        )
    record = parse(done.stdout + done.stderr)
    kind = rehearse or "native"
    return {**record, "kind": kind, "returncode": done.returncode, "processes": account.summary()}


def report(passes: list[dict], record: dict, target_s: float = TARGET_S) -> dict:
    """The benchmark record: the machine, the target, every pass, and the median per kind."""
    kinds = {}
    for one in passes:
        kinds.setdefault(one["kind"], []).append(one["seconds"])
    medians = {kind: round(statistics.median(times), 1) for kind, times in kinds.items()}
    timed = record.get("rehearsal", {}).get("key") or "native"
    failed = [p for p in passes if p["returncode"] != 0]
    return {
        "cpu_count": os.cpu_count(),
        **record,
        "target_s": target_s,
        "passes": passes,
        "median_s": medians,
        "met": not failed and medians[timed] <= target_s,
    }


def markdown(bench: dict) -> str:
    """The record as text: the machine, what was run, each pass, the target met or not."""
    rehearsal = bench.get("rehearsal")
    timed = rehearsal["key"] if rehearsal else "native"
    lines = [
        f"# The test suite on {bench['device']}"
        + (f", rehearsing {rehearsal['kind']}" if rehearsal else ""),
        "",
        f"{bench['cpu_count']} cores, torch {bench['versions']['torch']}, measured "
        f"{bench['date']}. Target: {bench['target_s']:.0f} s or less of pytest for `make test` "
        "on a 2-core CPU without native bf16. pytest's own duration of the whole suite, run as "
        f"`{' '.join(['pytest', *command()[3:]])}` from the course's root"
        + (
            "; the passes alternate between the rehearsal and this machine as it is."
            if rehearsal
            else "."
        ),
    ]
    if provenance := machine_reports.provenance_line(bench):
        lines += ["", provenance]
    if rehearsal:
        lines += ["", rehearsing.paragraph(rehearsal, "every process the tests start")]
    if bench.get("empty_compile_cache"):
        lines += ["", "Each pass started with an empty torch.compile cache, as a fresh clone does."]
    for kind, step in bench.get("cpu_steps", {}).items():
        lines += ["", f"The CPU step before the passes, {kind}: {cpu_step.sentence(step)}"]
    lines += [
        "",
        "| pass | kind | seconds | tests | exit code |",
        "| ---: | --- | ---: | --- | ---: |",
    ]
    for index, one in enumerate(bench["passes"], 1):
        counts = ", ".join(f"{n} {word}" for word, n in one["counts"].items())
        lines.append(
            f"| {index} | {one['kind']} | {one['seconds']:.1f} | {counts} | {one['returncode']} |"
        )
    after = [one.get("step_after_ms") for one in bench["passes"]]
    if None not in after:  # reports from before the field lack it
        lines += [
            "",
            "The CPU step's fp32 time after each pass, in order: "
            f"{', '.join(f'{ms:.0f}' for ms in after)} ms (a pass followed by a slower step ran "
            "on a slower machine).",
        ]
    medians = bench["median_s"]
    said = ", ".join(f"{kind} {seconds:.1f} s" for kind, seconds in medians.items())
    lines += [
        "",
        f"Median: {said}. Target met ({timed}): {'yes' if bench['met'] else '**no**'}.",
        "",
        f"The slowest tests of the last {timed} pass:",
        "",
    ]
    last = [one for one in bench["passes"] if one["kind"] == timed][-1]
    lines += [f"- {t['seconds']:.1f} s {t['when']} `{t['test']}`" for t in last["slowest"]]
    if "processes" in last:  # reports from before the account lack it
        said = processes.sentence(
            last["processes"], last["seconds"], bench["cpu_count"], bench.get("torch_import_s")
        )
        lines += ["", f"Where the CPU time of the last {timed} pass went: {said}"]
    return "\n".join(lines + [""])


def measure(passes: int = PASSES, rehearse: str | None = None) -> dict:
    """``passes`` passes of the suite (with ``rehearse``, each of them beside a native pass)."""
    record = {**machine_record("cpu"), **machine_reports.provenance()}
    if rehearse:
        record["rehearsal"] = rehearsing.record(rehearse)
    kinds = [rehearse, None] if rehearse else [None]
    record["empty_compile_cache"] = True
    record["torch_import_s"] = processes.torch_import_cpu_s()
    record["cpu_steps"] = {
        kind or "native": cpu_step.measure_in_child(cpu.rehearsal_environment(kind))
        for kind in kinds
    }
    runs = []
    for index in range(passes):
        for kind in kinds if index % 2 == 0 else kinds[::-1]:
            runs.append(run_pass(kind))
            # The machine's speed right after the pass (the native step): a host that slowed
            # during a pass shows here, not in the step timed before the passes.
            runs[-1]["step_after_ms"] = round(cpu_step.measure_in_child()["fp32_s"] * 1e3, 1)
            print(f"pass {len(runs)}: {runs[-1]['kind']} {runs[-1]['seconds']:.1f} s", flush=True)
    return report(runs, record)


name = rehearsing.report_name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amp-course suite-bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / SUITE_REPORTS)
    parser.add_argument("--passes", type=int, default=PASSES, help="passes of each kind")
    rehearsing.add_option(parser, "the suite, in passes alternating with this machine as it is,")
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error("--passes must be 1 or more")
    bench = measure(args.passes, args.rehearse_cpu)
    machine_reports.write(bench, markdown(bench), args.out, name=name(bench))
    print(markdown(bench))
    return 0 if bench["met"] else 1
