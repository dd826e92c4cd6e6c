"""What a benchmark report says it measured: the course's commit, whether the files differed
from it, and the CPU's vector flags; reports written before these fields still render."""

import subprocess

from conftest import ROOT

from amp_course import cpu
from amp_course.device import machine_record
from amp_course.tooling import machine_reports
from amp_course.tooling.grading import throughput
from amp_course.tooling.runs import smoke, suite

FLAGS = "fpu sse2 avx avx2 fma f16c avx512f avx512_bf16 amx_tile amx_bf16 sha_ni"


def _git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)


def test_a_report_names_this_checkouts_commit_and_the_cpus_vector_flags(monkeypatch):
    monkeypatch.setenv(cpu.FAKE_CPU_FLAGS, FLAGS)
    found = machine_reports.provenance()
    assert found["commit"] == _git("rev-parse", "HEAD").stdout.strip()
    changed = bool(_git("status", "--porcelain", "--untracked-files=no").stdout.strip())
    assert found["uncommitted_changes"] is changed
    assert found["cpu_flags"] == sorted(
        ["avx", "avx2", "fma", "f16c", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"]
    )


def test_an_edited_file_is_reported_and_a_folder_outside_git_has_no_commit(tmp_path, monkeypatch):
    monkeypatch.setenv(cpu.FAKE_CPU_FLAGS, "sse2 avx2")
    course = tmp_path / "course"
    _git("clone", "-q", str(ROOT), str(course), cwd=tmp_path)
    assert machine_reports.provenance(course)["uncommitted_changes"] is False
    readme = course / "README.md"
    readme.write_text(readme.read_text() + "\nedited\n")
    edited = machine_reports.provenance(course)
    assert edited["uncommitted_changes"] is True
    line = machine_reports.provenance_line({**machine_record("cpu"), **edited})
    assert line == (
        f"Measured from commit {edited['commit'][:12]} with uncommitted changes. "
        "CPU vector flags: avx2."
    )
    plain = tmp_path / "plain"
    plain.mkdir()
    outside = machine_reports.provenance(plain)
    assert (outside["commit"], outside["uncommitted_changes"]) == (None, None)
    assert machine_reports.provenance_line(outside).startswith("Measured from not a git checkout.")


def test_every_benchmark_prints_it_and_older_reports_render_without_it(monkeypatch):
    monkeypatch.setenv(cpu.FAKE_CPU_FLAGS, FLAGS)
    record = {**machine_record("cpu"), **machine_reports.provenance()}
    line = machine_reports.provenance_line(record)
    assert line.startswith("Measured from commit ") and "amx_bf16, amx_tile, avx" in line
    row = {"notebook": "a.ipynb", "status": "passed", "seconds": 10.0, "error": ""}
    one = {"seconds": 200.0, "counts": {"passed": 3}, "slowest": [], "kind": "native"}
    graded = {"jobs": 1, "seconds": 9.0, "submissions_per_hour": 400.0, "passed_share": 1.0}
    graded.update(per_hour_per_core=200.0, class_hours=0.5)
    assignment = {"cpu_count": 2, "submissions": 1, "lessons": ["99_toy"], "isolation": "bwrap"}
    for record_of, render in (
        (lambda r: smoke.report([[row]], r), smoke.markdown),
        (lambda r: suite.report([{**one, "returncode": 0}], r), suite.markdown),
        (lambda r: {**r, **assignment, "class_size": 200, "runs": [graded]}, throughput.markdown),
    ):
        assert line in render(record_of(record))
        older = render(record_of(machine_record("cpu")))  # a report from before the fields
        assert "Measured from" not in older
