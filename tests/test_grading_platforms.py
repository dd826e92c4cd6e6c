"""Grading where courses grade: Gradescope's results.json for one submission (against the
autograder specification's schema), the autograder zip run in a temporary /autograder, and the
gradebook Canvas imports. The toy lesson of tests/fixtures/grading keeps each run short."""

import csv
import io
import json
import os
import subprocess
import sys
import zipfile

import jsonschema
import nbformat
import pytest
from test_grading import (
    MASTER,
    RIGHT,
    WRONG,
    WRONG_CHOOSE,
    WRONG_MFU,
    _masters,
    _notebook,
    _submission,
    two_lesson_key,
)

from amp_course import cli, quiz
from amp_course.paths import ROOT
from amp_course.tooling.grading import platforms, sandbox

pytestmark = pytest.mark.timeout(600)
FIXTURES = ROOT / "tests" / "fixtures" / "grading"
# Gradescope's autograder results (its specification): what this course writes must fit it.
RESULTS_SCHEMA = {
    "type": "object",
    "required": ["tests"],
    "properties": {
        "score": {"type": "number"},
        "output": {"type": "string"},
        "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["score", "max_score", "name"],
                "properties": {
                    "score": {"type": "number"},
                    "max_score": {"type": "number"},
                    "status": {"enum": ["passed", "failed"]},
                    "name": {"type": "string"},
                    "output": {"type": "string"},
                    "visibility": {
                        "enum": ["hidden", "after_due_date", "after_published", "visible"]
                    },
                },
                "additionalProperties": False,
            },
        },
    },
}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("platforms")
    key = root / "key.json"
    quiz.publish(FIXTURES / "quizzes" / "source", root / "learner", key, secret="toy-secret")
    return root, key, _masters(root)


def _cli(*args):
    err = io.StringIO()
    out = io.StringIO()
    from contextlib import redirect_stderr, redirect_stdout

    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def test_one_submission_graded_for_gradescope_fits_its_schema_and_points(course):
    root, key, masters = course
    folder = _submission(root / "one", "submission", _notebook(WRONG_CHOOSE), RIGHT)
    out = root / "results" / "results.json"
    code, _, err = _cli(
        "grade",
        folder,
        "--format",
        "gradescope",
        "--key",
        key,
        "--out",
        out,
        "--masters",
        masters,
        "--cell-timeout",
        "60",
        "--timeout",
        "300",
    )
    assert code == 0, err
    results = json.loads(out.read_text())
    jsonschema.validate(results, RESULTS_SCHEMA)
    tests = {t["name"]: t for t in results["tests"]}
    # 05.mfu right (its points), 06.choose_dtype wrong (0 and the check's message), quiz right.
    assert tests["99_toy: 05.mfu"]["status"] == "passed"
    assert tests["99_toy: 05.mfu"]["score"] == tests["99_toy: 05.mfu"]["max_score"] > 0
    choose = tests["99_toy: 06.choose_dtype"]
    assert choose["status"] == "failed" and choose["score"] == 0
    output = choose["output"]  # the status, then the check's message
    assert output.startswith("failed: ") and "you chose torch." in output, output
    assert ", the reference torch." in output, output
    assert tests["99_toy: quiz:pick-b"]["score"] == 2
    assert results["score"] == sum(t["score"] for t in results["tests"])
    assert results["output"].startswith(f"{results['score']:g} of ")


def test_a_folder_without_notebooks_shows_the_student_why_and_exits_0(course):
    """Gradescope reads results.json, not the exit status (platforms.grade_gradescope): the
    student sees the reason, the instructor's stdout says it too."""
    root, key, masters = course
    folder = root / "empty" / "submission"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("forgot the notebook")
    out = root / "empty-results.json"
    code, printed, err = _cli(
        "grade", folder, "--format", "gradescope", "--key", key, "--out", out, "--masters", masters
    )
    # Where bubblewrap is missing, grading warns that it runs without a sandbox (first and last);
    # nothing else may warn.
    said = (printed + err).replace(sandbox.warning(sandbox.choose()), "")
    assert code == 0 and "holds no notebook" in printed and "WARNING" not in said
    results = json.loads(out.read_text())
    jsonschema.validate(results, RESULTS_SCHEMA)
    assert results["score"] == 0 and "holds no notebook" in results["output"]
    assert "could not be graded as submitted" in results["output"]


def test_a_notebook_that_is_not_json_shows_the_student_why_and_exits_0(course):
    root, key, masters = course
    folder = root / "broken" / "submission"
    folder.mkdir(parents=True)
    (folder / f"Copy of {MASTER.name}").write_text('{"cells": [')
    out = root / "broken.json"
    code, printed, _ = _cli(
        "grade", folder, "--format", "gradescope", "--key", key, "--out", out, "--masters", masters
    )
    assert code == 0 and f"not a notebook (not JSON): Copy of {MASTER.name}" in printed
    results = json.loads(out.read_text())
    jsonschema.validate(results, RESULTS_SCHEMA)
    assert f"not a notebook (not JSON): Copy of {MASTER.name}" in results["output"]
    assert f"99_toy: graded `Copy of {MASTER.name}`." in results["output"]
    tests = {t["name"]: t for t in results["tests"]}
    assert "corrupt notebook" in tests["99_toy: 05.mfu"]["output"]


def test_the_autograder_zip_holds_only_the_chosen_lessons_key_and_prints_no_sandbox_banner(
    tmp_path,
):
    key = two_lesson_key(tmp_path, secret="toy-secret")
    zip_path = tmp_path / "autograder.zip"
    code, printed, err = _cli(
        "autograder", "--key", key, "--lessons", "98_other", "--out", zip_path
    )
    assert code == 0, err
    assert "sandbox" not in (printed + err).lower() and err == ""
    assert printed.strip().startswith(f"wrote {zip_path}")
    with zipfile.ZipFile(zip_path) as archive:
        inside = json.loads(archive.read("key.json"))
        run = archive.read("run_autograder").decode()
    assert set(inside["lessons"]) == {"98_other"} and inside["secret"] == "toy-secret"
    assert inside["lessons"]["98_other"] == json.loads(key.read_text())["lessons"]["98_other"]
    assert "--lessons 98_other" in run


def test_a_key_that_does_not_fit_the_lessons_is_one_line_and_status_2(course, tmp_path):
    root, key, masters = course
    code, _, err = _cli(
        "autograder", "--key", key, "--lessons", "42_nope", "--out", tmp_path / "a.zip"
    )
    assert code == 2 and err.startswith("error:") and err.count("\n") == 1
    assert not (tmp_path / "a.zip").exists()


def test_the_autograder_zip_runs_in_a_temporary_autograder_root(course, tmp_path):
    root, key, masters = course
    zip_path = tmp_path / "autograder.zip"
    code, printed, err = _cli("autograder", "--key", key, "--out", zip_path)
    assert code == 0, err
    with zipfile.ZipFile(zip_path) as archive:
        names = set(archive.namelist())
        assert {"setup.sh", "run_autograder", "key.json", "course/pyproject.toml"} <= names
        assert "course/amp_course/tooling/grading/platforms.py" in names
        setup = archive.read("setup.sh").decode()
        assert " ".join(platforms.TORCH_PIN) in setup and "[grade]" in setup
        autograder = tmp_path / "autograder"
        archive.extractall(autograder / "source")
    # Gradescope copies run_autograder next to source/; the masters here are the toy lesson's.
    (autograder / "source" / "course" / "notebooks").mkdir(parents=True, exist_ok=True)
    for old in (autograder / "source" / "course" / "notebooks").glob("*.ipynb"):
        old.unlink()
    nbformat.write(
        nbformat.read(MASTER, as_version=4),
        autograder / "source" / "course" / "notebooks" / MASTER.name,
    )
    run = autograder / "run_autograder"
    run.write_bytes((autograder / "source" / "run_autograder").read_bytes())
    run.chmod(0o755)
    _submission(autograder, "submission", _notebook(WRONG_CHOOSE, WRONG_MFU), WRONG)
    env = {**os.environ, platforms.ROOT_ENV: str(autograder), platforms.PYTHON_ENV: sys.executable}
    done = subprocess.run([str(run)], env=env, capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((autograder / "results" / "results.json").read_text())
    jsonschema.validate(results, RESULTS_SCHEMA)
    assert results["score"] == 0 and all(t["status"] == "failed" for t in results["tests"])


def test_the_autograder_installs_the_courses_torch_pin():
    makefile = (ROOT / "Makefile").read_text()
    assert f"TORCH_PIN ?= {' '.join(platforms.TORCH_PIN)}" in makefile


def test_canvas_gradebook_has_its_columns_points_and_one_line_per_student(course):
    root, key, masters = course
    subs = root / "class"
    _submission(subs, "alice", _notebook(), RIGHT)
    _submission(subs, "bob", _notebook(WRONG_CHOOSE, WRONG_MFU), WRONG)
    out = root / "canvas.csv"
    code, _, err = _cli(
        "grade",
        subs,
        "--format",
        "canvas",
        "--key",
        key,
        "--out",
        out,
        "--masters",
        masters,
        "--jobs",
        "2",
    )
    assert code == 0, err
    lines = list(csv.reader(out.read_text().splitlines()))
    assert lines[0] == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "amp-course 99_toy",
    ]
    with open(root / "canvas-items.csv", newline="") as handle:
        items = list(csv.DictReader(handle))
    possible = sum(float(r["max_points"]) for r in items if r["student"] == "alice")
    assert lines[1] == ["Points Possible", "", "", "", "", f"{possible:g}"]
    by_login = {line[3]: line for line in lines[2:]}
    assert by_login["alice"][5] == f"{possible:g}" and by_login["bob"][5] == "0"
    assert by_login["alice"][0] == "alice"

    roster = root / "roster.csv"
    roster.write_text('folder,Student,ID,SIS Login ID,Section\nalice,"Liddell, Alice",1001,al,A\n')

    def grade_with_roster():
        return _cli(
            "grade", subs, "--format", "canvas", "--key", key, "--out", root / "c2.csv",
            "--masters", masters, "--roster", roster,
        )  # fmt: skip

    code, _, err = grade_with_roster()
    assert code == 2 and "submission folders not in the roster: bob (add a line for each" in err
    roster.write_text(roster.read_text() + "bob,Bob,1002,bb,A\n")
    code, _, err = grade_with_roster()
    assert code == 0, err
    lines = list(csv.reader((root / "c2.csv").read_text().splitlines()))
    assert lines[2][:5] == ["Liddell, Alice", "1001", "", "al", "A"]
