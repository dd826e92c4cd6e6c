"""The grading throughput benchmark's logic on a tiny run (one toy submission, --jobs 1 and 2, in
bubblewrap): what it generates, grades and records, never how fast (a benchmark, not a timed
test)."""

import json

import nbformat
import pytest

from amp_course import cli, exercises, quiz
from amp_course.paths import DOCS, ROOT
from amp_course.tooling.grading import sandbox, throughput

FIXTURES = ROOT / "tests" / "fixtures" / "grading"
MASTERS = FIXTURES / "masters"


def test_every_exercise_has_an_answer_from_the_references_code():
    for name in exercises.names():
        source = throughput.answer_source(name, "answer")
        assert source is not None and source.endswith("answer = " + source.split()[-1] + "\n")
        assert "exercises.solutions" not in source, name  # hidden from the grading sandbox
        assert "solution(" not in source, name  # refused while grading


@pytest.mark.parametrize("name", ["05.mfu", "06.choose_dtype"])  # the toy lesson's
def test_a_generated_answer_passes_its_check(name):
    namespace = {}
    exec(compile(throughput.answer_source(name, "answer"), f"<{name}>", "exec"), namespace)
    assert exercises.verdict(name, namespace["answer"])[0] == "passed"


def test_generated_submissions_answer_every_exercise(tmp_path):
    students = throughput.generate(tmp_path, 3, [MASTERS / "99_toy.ipynb"])
    assert [s.name for s in students] == ["student-0001", "student-0002", "student-0003"]
    nb = nbformat.read(students[0] / "99_toy.ipynb", as_version=4)
    blanks = [c for c in nb.cells if "exercise" in c.metadata.get("tags", [])]
    assert blanks and not any("NotImplementedError" in c.source for c in blanks)


def test_the_arithmetic_per_hour_per_core_and_for_a_class():
    figures = throughput.per_hour(count=10, seconds=60.0, cores=2)
    assert figures["submissions_per_hour"] == 600 and figures["per_hour_per_core"] == 300
    assert figures["class_hours"] == round(throughput.CLASS_SIZE / 600, 2)


def test_a_tiny_run_records_each_jobs_value_and_writes_its_report(tmp_path):
    why = sandbox.bwrap_works()
    if why is not None:  # CI installs bubblewrap; the benchmark never grades unsandboxed
        pytest.skip(f"bubblewrap does not work here: {why}")
    key = tmp_path / "key.json"
    quiz.publish(FIXTURES / "quizzes" / "source", tmp_path / "learner", key, secret="bench")
    bench = throughput.measure(1, [1, 2], key, ["99_toy"], MASTERS, "bwrap", cell_timeout=60)
    assert bench["submissions"] == 1 and bench["lessons"] == ["99_toy"]
    assert bench["isolation"] == "bwrap" and bench["cpu_count"] >= 1
    assert [run["jobs"] for run in bench["runs"]] == [1, 2]
    for run in bench["runs"]:
        assert run["statuses"] == {"passed": 2} and run["passed_share"] == 1
        assert run["seconds"] > 0 and run["per_hour_per_core"] > 0
    paths = throughput.write(bench, tmp_path / "reports")
    assert [p.suffix for p in paths] == [".json", ".md"]
    assert json.loads(paths[0].read_text())["runs"] == bench["runs"]
    table = paths[1].read_text()
    assert "| --jobs |" in table and f"A class of {throughput.CLASS_SIZE:,}" in table
    assert "1 generated submission of 99_toy" in table
    assert "Gradescope" in table


def test_the_command_refuses_a_bad_jobs_value_in_one_line(capsys):
    assert cli.main(["grading-bench", "--jobs", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be positive" in err
    assert cli.main(["grading-bench", "--jobs", "a"]) == 2  # said int()'s words, not the option
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jobs 'a': comma-separated whole numbers" in err


def test_the_instructors_guide_quotes_the_committed_measurement():
    """The guide's throughput figures are the committed report's, not typed in apart from it."""
    guide = (ROOT / DOCS / "instructors.md").read_text()
    for report in sorted((ROOT / "reports" / "grading").glob("*.json")):
        data = json.loads(report.read_text())
        if f"reports/grading/{report.stem}.md" not in guide:
            continue
        best = max(data["runs"], key=lambda run: run["jobs"])
        assert f"{best['per_hour_per_core']} submissions per hour per core" in guide
        assert f"{best['submissions_per_hour']} per hour" in guide
        assert f"{best['class_hours']:.2f} hours" in guide
        break
    else:
        raise AssertionError("the instructors' guide cites no committed grading report")
