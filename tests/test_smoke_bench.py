"""The smoke-mode benchmark: what it records, what it marks as missing the target, and the
committed result for the course's CI machine."""

import json

import pytest
from conftest import ROOT

from amp_course import cpu
from amp_course.device import machine_record
from amp_course.paths import SMOKE_REPORTS, lesson_notebooks
from amp_course.tooling.runs import smoke


def _row(name, status, seconds):
    return {"notebook": f"{name}.ipynb", "status": status, "seconds": seconds, "error": ""}


def test_report_marks_slow_and_failed_lessons():
    rows = [
        _row("fast", "passed", 12.0),
        _row("edge", "passed", 30.0),  # 30 s or less meets the target
        _row("slow", "passed", 75.0),
        _row("broken", "failed", 3.0),
    ]
    bench = smoke.report([rows], machine_record("cpu"), target_s=30, total_target_s=240)
    assert [r["met"] for r in bench["notebooks"]] == [True, True, False, False]
    assert not bench["all_met"]
    assert bench["total_s"] == 120.0 and bench["slowest_s"] == 75.0
    table = smoke.markdown(bench)
    assert "| fast | 12.0 | - | yes |" in table
    assert "| slow | 75.0 | - | **no** (passed) |" in table
    assert "| broken | 3.0 | - | **no** (failed) |" in table
    assert bench["device"] in table and bench["versions"]["torch"] in table


def test_passes_give_each_lesson_its_median_and_range_and_the_total_its_target():
    passes = [
        [_row("a", "passed", 10.0), _row("b", "passed", 20.0)],
        [_row("a", "passed", 14.0), _row("b", "passed", 26.0)],
        [_row("a", "passed", 11.0), _row("b", "failed", 22.0)],
    ]
    bench = smoke.report(passes, machine_record("cpu"), target_s=30, total_target_s=30)
    a, b = bench["notebooks"]
    assert (a["seconds"], a["runs"], a["met"]) == (11.0, [10.0, 14.0, 11.0], True)
    assert b["status"] == "failed" and not b["met"]  # one failed pass fails the lesson
    assert bench["total_s"] == 33.0 and bench["pass_totals_s"] == [30.0, 40.0, 33.0]
    assert not bench["all_met"]  # the total is over its target
    table = smoke.markdown(bench)
    assert "| a | 11.0 | 10.0-14.0 | yes |" in table
    assert "the passes took 30.0, 40.0, 33.0 s, a spread of 33%" in table


def test_a_rehearsed_report_says_what_it_rehearsed_in_its_name_and_heading():
    record = {**machine_record("cpu"), "cpu_count": 2}
    rehearsal = cpu.REHEARSALS["avx2"]
    record["rehearsal"] = {"key": "avx2", "kind": rehearsal.kind, "caps": rehearsal.caps}
    step = {
        "step": "a step",
        "fp32_s": 0.05,
        "bf16_s": 0.6,
        "bf16_over_fp32": 12.0,
        "cpu_capability": "AVX2",
        "native_bf16": False,
    }
    bench = smoke.report([[_row("a", "passed", 10.0)]], record, step=step)
    assert smoke.name(bench).endswith("-rehearsing-avx2")
    table = smoke.markdown(bench)
    assert "rehearsing a CPU without native bf16" in table.splitlines()[0]
    assert "`ONEDNN_MAX_CPU_ISA=AVX2`" in table and "`ATEN_CPU_CAPABILITY=avx2`" in table
    assert "fp32 50 ms, bf16 autocast 600 ms, 12.00x (bf16 emulated" in table


def _committed() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (ROOT / "reports" / "smoke").glob("*.json")}


def test_committed_result_covers_every_lesson():
    """Each committed benchmark names its machine and times every lesson in notebooks/."""
    results = _committed()
    assert results, "no committed smoke benchmark: run make bench-smoke"
    lessons = {p.name for p in lesson_notebooks()}
    for name, bench in results.items():
        assert {r["notebook"] for r in bench["notebooks"]} == lessons, name
        assert bench["device"] and bench["versions"]["torch"] and bench["date"]
        assert all(r["status"] == "passed" and r["seconds"] > 0 for r in bench["notebooks"])
        assert smoke.name(bench) == name  # the file says which machine, and what it rehearsed


def test_a_rehearsal_without_native_bf16_is_committed_beside_the_native_run_and_meets_the_targets():
    results = _committed().values()
    native = [b for b in results if not b.get("rehearsal") and b["cpu_step"]["native_bf16"]]
    rehearsed = [b for b in results if (b.get("rehearsal") or {}).get("key") == "avx2"]
    assert native and rehearsed, "run make bench-smoke, with and without REHEARSE_CPU=avx2"
    for bench in native + rehearsed:
        assert bench["all_met"] and bench["passes"] >= 3
        assert bench["target_s"] == smoke.TARGET_S and bench["total_target_s"] == 240
    # The rehearsal reproduces the emulated cost: bf16 far slower than fp32, and said to be.
    for bench in rehearsed:
        assert not bench["cpu_step"]["native_bf16"] and bench["cpu_step"]["bf16_over_fp32"] > 3


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--notebooks", "missing.ipynb"], "no such notebook: missing.ipynb"),
        (["--notebooks", "notebooks/02_autocast.ipynb"], "give an --out of its own"),
    ],
    ids=["missing-notebook", "some-lessons-into-the-committed-reports"],
)
def test_smoke_bench_refuses_before_timing_what_would_replace_the_committed_report(
    argv, says, capsys, monkeypatch
):
    """A mistyped lesson, or some lessons timed into reports/smoke/, would replace the committed
    report of every lesson with a part of one (a missing file was reported as a lesson that
    failed): refused before any lesson runs, and the committed reports stay as they are."""
    monkeypatch.chdir(ROOT)
    reports = {p: p.read_bytes() for p in (ROOT / SMOKE_REPORTS).iterdir()}
    monkeypatch.setattr(smoke, "measure", lambda *a, **k: pytest.fail("a lesson was timed"))
    with pytest.raises(SystemExit) as stopped:
        smoke.main(["--passes", "1", *argv])
    assert stopped.value.code == 2 and says in capsys.readouterr().err
    assert {p: p.read_bytes() for p in (ROOT / SMOKE_REPORTS).iterdir()} == reports
