"""The smoke-mode benchmark: what it records, what it marks as missing the target, and the
committed result for the course's CI machine."""

import json

from conftest import ROOT

from amp_course.device import machine_record
from amp_course.paths import lesson_notebooks
from amp_course.tooling.runs import smoke


def _row(name, status, seconds):
    return {"notebook": f"{name}.ipynb", "status": status, "seconds": seconds, "error": ""}


def test_report_marks_slow_and_failed_lessons():
    rows = [
        _row("fast", "passed", 12.0),
        _row("slow", "passed", 75.0),
        _row("broken", "failed", 3.0),
    ]
    bench = smoke.report(rows, machine_record("cpu"), target_s=60)
    assert [r["met"] for r in bench["notebooks"]] == [True, False, False]
    assert not bench["all_met"]
    assert bench["total_s"] == 90.0 and bench["slowest_s"] == 75.0
    table = smoke.markdown(bench)
    assert "| fast | 12.0 | yes |" in table
    assert "| slow | 75.0 | **no** (passed) |" in table
    assert "| broken | 3.0 | **no** (failed) |" in table
    assert bench["device"] in table and bench["versions"]["torch"] in table


def test_committed_result_covers_every_lesson():
    """Each committed benchmark names its machine and times every lesson in notebooks/."""
    results = sorted((ROOT / "reports" / "smoke").glob("*.json"))
    assert results, "no committed smoke benchmark: run make bench-smoke"
    lessons = {p.name for p in lesson_notebooks()}
    for result in results:
        bench = json.loads(result.read_text())
        assert {r["notebook"] for r in bench["notebooks"]} == lessons, result.name
        assert bench["device"] and bench["versions"]["torch"] and bench["date"]
        assert all(r["status"] == "passed" and r["seconds"] > 0 for r in bench["notebooks"])
