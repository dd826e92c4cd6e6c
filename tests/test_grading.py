"""Instructor grading on a toy lesson: restored check cells, bounded time, one row per item."""

import csv
import json
import os
import subprocess
import sys
import time

import nbformat
import pytest
from conftest import ROOT

from amp_course import cli, grading, quiz

FIXTURES = ROOT / "tests" / "fixtures" / "grading"
MASTER = FIXTURES / "masters" / "99_toy.ipynb"

RIGHT = {"pick-b": 1, "pi": 3.14, "both": [0, 2]}
WRONG = {"pick-b": 0, "pi": 2.72, "both": [1]}


def _notebook(double="    return 2 * x", clip="    return max(-1.0, min(1.0, x))", edit=None):
    nb = nbformat.read(MASTER, as_version=4)
    for cell in nb.cells:
        name = cell.metadata.get("exercise", {}).get("symbol")
        if name == "double":
            cell.source = f"def double(x):\n{double}"
        elif name == "clip":
            cell.source = f"def clip(x):\n{clip}"
    if edit:
        edit(nb)
    return nb


def _submission(root, student, nb=None, answers=None, raw_answers=None, raw_notebook=None):
    folder = root / student
    folder.mkdir(parents=True)
    if nb is not None:
        nbformat.write(nb, folder / MASTER.name)
    if raw_notebook is not None:
        (folder / MASTER.name).write_text(raw_notebook)
    if answers is not None:
        records = {qid: {"value": value, "attempts": 1} for qid, value in answers.items()}
        (folder / "99_toy.answers.json").write_text(json.dumps({"lessons": {"99_toy": records}}))
    if raw_answers is not None:
        (folder / "99_toy.answers.json").write_text(raw_answers)


def _fake_check(nb):
    for cell in nb.cells:
        if "check" in cell.metadata.get("tags", []):
            cell.source = 'print("✓ all correct")'  # an edited check cell


def _raise_first(nb):
    blank = next(c for c in nb.cells if c.metadata.get("exercise", {}).get("symbol") == "double")
    blank.source = "raise RuntimeError('boom')\n" + blank.source  # double is never defined


def _delete_checks(nb):
    nb.cells = [c for c in nb.cells if "check" not in c.metadata.get("tags", [])]


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory):
    root = tmp_path_factory.mktemp("grading")
    key = root / "key.json"
    quiz.publish(FIXTURES / "quizzes" / "source", root / "learner", key, secret="toy-secret")
    subs = root / "submissions"
    _submission(subs, "alice", _notebook(), RIGHT)
    _submission(subs, "bob", _notebook(double="    return x + 2", clip="    return x"), WRONG)
    _submission(subs, "carol", _notebook())  # no answer file
    _submission(subs, "dave", answers=None, raw_answers='{"lessons": {"99_toy": {"pick-b": ')
    _submission(subs, "erin", _notebook(edit=_raise_first), RIGHT)
    _submission(subs, "frank", _notebook(clip="    while True:\n        pass\nclip(0)"), RIGHT)
    _submission(subs, "gina", _notebook(double="    return x", edit=_fake_check), RIGHT)
    _submission(subs, "hank", raw_notebook='{"cells": [', answers=RIGHT)
    _submission(subs, "ivan", _notebook(edit=_delete_checks), RIGHT)
    # A conftest.py in a submission must not change how it is graded.
    (subs / "ivan" / "conftest.py").write_text(
        "import pytest\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
    )
    (subs / "bob" / "conftest.py").write_text((subs / "ivan" / "conftest.py").read_text())
    # Links to another student's work are not this student's work.
    (subs / "kim").mkdir()
    (subs / "kim" / MASTER.name).symlink_to(subs / "alice" / MASTER.name)
    (subs / "kim" / "99_toy.answers.json").symlink_to(subs / "alice" / "99_toy.answers.json")
    # A planted pytest.py or amp_course package must not replace the grader's own code.
    _submission(subs, "liam", _notebook(double="    return x", clip="    return x"), WRONG)
    (subs / "liam" / "pytest.py").write_text("import sys\nsys.exit(0)\n")
    (subs / "liam" / "amp_course").mkdir()
    (subs / "liam" / "amp_course" / "__init__.py").write_text(
        "class exercises:\n    @staticmethod\n    def check(*a):\n        return True\n"
    )
    # The course's reference solution is not the learner's answer.
    _submission(
        subs, "mia", _notebook(double="    return ac.exercises.solution('99.double')(x)"), RIGHT
    )
    out = root / "gradebook.csv"
    start = time.perf_counter()
    code = cli.main(
        [
            "grade",
            str(subs),
            "--key",
            str(key),
            "--out",
            str(out),
            "--masters",
            str(MASTER.parent),
            "--cell-timeout",
            "30",
            "--timeout",
            "120",
            "--jobs",
            "4",
        ]
    )
    elapsed = time.perf_counter() - start
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return code, elapsed, rows


def _points(rows, student):
    return {
        r["item"]: (float(r["points"]), float(r["max_points"]), r["status"], r["message"])
        for r in rows
        if r["student"] == student
    }


def test_every_student_graded_in_bounded_time(gradebook):
    code, elapsed, rows = gradebook
    assert code == 0
    assert list(rows[0]) == grading.COLUMNS
    students = {r["student"] for r in rows}
    assert students == {
        "alice",
        "bob",
        "carol",
        "dave",
        "erin",
        "frank",
        "gina",
        "hank",
        "ivan",
        "kim",
        "liam",
        "mia",
    }
    for student in students:  # the same items for everyone, whatever went wrong
        assert set(_points(rows, student)) == {
            "99.double",
            "99.clip",
            "quiz:pick-b",
            "quiz:pi",
            "quiz:both",
        }, student
    assert elapsed < 180  # about 40 s on an idle 2-core machine


def test_all_right_gets_full_marks(gradebook):
    got = _points(gradebook[2], "alice")
    assert {k: v[0] for k, v in got.items()} == {
        "99.double": 2,
        "99.clip": 1,
        "quiz:pick-b": 2,
        "quiz:pi": 1,
        "quiz:both": 1,
    }
    assert all(v[0] == v[1] for v in got.values())


def test_all_wrong_gets_zero_with_reasons(gradebook):
    got = _points(gradebook[2], "bob")
    assert all(v[0] == 0 for v in got.values())
    assert "ExerciseFailed: double(0) returned 2, expected 0" in got["99.double"][3]
    assert got["quiz:pi"][2] == "wrong"


def test_missing_answer_file_costs_only_the_quiz(gradebook):
    got = _points(gradebook[2], "carol")
    assert got["99.double"][0] == 2 and got["99.clip"][0] == 1
    assert got["quiz:pick-b"][:3] == (0, 2, "missing") and "no answers" in got["quiz:pick-b"][3]


def test_corrupt_json_is_reported(gradebook):
    got = _points(gradebook[2], "dave")
    assert got["quiz:pi"][0] == 0 and "not valid JSON" in got["quiz:pi"][3]
    assert got["99.double"][2] == "missing"  # no notebook handed in


def test_notebook_that_raises_loses_only_what_fails(gradebook):
    got = _points(gradebook[2], "erin")
    assert got["99.double"][0] == 0 and got["99.clip"][0] == 1 and got["quiz:pick-b"][0] == 2
    assert "NameError" in got["99.double"][3]


def test_endless_loop_is_stopped_by_the_cell_timeout(gradebook):
    got = _points(gradebook[2], "frank")
    assert got["99.double"][0] == 2 and got["99.clip"][0] == 0
    assert got["quiz:pi"][0] == 1


def test_edited_or_deleted_check_cells_are_restored(gradebook):
    gina = _points(gradebook[2], "gina")
    assert gina["99.double"][0] == 0 and "returned" in gina["99.double"][3]
    ivan = _points(gradebook[2], "ivan")
    assert ivan["99.double"][0] == 2 and ivan["99.clip"][0] == 1


def test_corrupt_notebook_gets_zero_and_a_message(gradebook):
    got = _points(gradebook[2], "hank")
    assert got["99.double"][:3] == (0, 2, "error") and "corrupt notebook" in got["99.double"][3]
    assert got["quiz:pick-b"][0] == 2


def test_links_to_other_work_are_not_graded(gradebook):
    got = _points(gradebook[2], "kim")
    assert all(v[0] == 0 for v in got.values())
    assert "link" in got["99.double"][3] and "link" in got["quiz:pick-b"][3]


def test_planted_pytest_and_package_change_nothing(gradebook):
    got = _points(gradebook[2], "liam")
    assert got["99.double"][0] == 0 and got["99.clip"][0] == 0
    assert "ExerciseFailed" in got["99.double"][3]


def test_using_the_reference_solution_is_flagged(gradebook):
    got = _points(gradebook[2], "mia")
    assert got["99.double"][:3] == (0, 2, "flagged") and got["99.clip"][0] == 0
    assert "checking code" in got["99.double"][3]
    assert got["quiz:pick-b"][0] == 2  # the quiz is graded as usual


def test_grading_refuses_reference_solutions(monkeypatch):
    from amp_course import exercises

    monkeypatch.setenv(exercises.GRADING_ENV, "1")
    name = exercises.names()[0]
    with pytest.raises(exercises.ExerciseFailed, match="not available while grading"):
        exercises.solution(name)
    monkeypatch.delenv(exercises.GRADING_ENV)
    reference = exercises.solution(name)
    monkeypatch.setenv(exercises.GRADING_ENV, "1")
    with pytest.raises(exercises.ExerciseFailed, match="reference solution"):
        exercises.check(name, reference)


def test_leftover_processes_are_killed_after_a_run(tmp_path):
    pid_file = tmp_path / "pid"
    code = (
        "import os, subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
    )
    returncode, _ = grading.run_with_timeout([sys.executable, "-c", code], 30)
    assert returncode == 0
    psutil = pytest.importorskip("psutil")
    pid = int(pid_file.read_text())
    for _ in range(50):
        try:  # a killed orphan may linger as a zombie until init reaps it: that is dead
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        pytest.fail("a detached process outlived the grading run")


def test_restore_keeps_learner_cells_and_drops_fake_checks():
    master = nbformat.read(MASTER, as_version=4)
    learner = _notebook(edit=_fake_check)
    scratch = nbformat.v4.new_code_cell("helper = 1")
    learner.cells.insert(3, scratch)
    rebuilt = grading.restore(master, learner)
    sources = [c.source for c in rebuilt.cells]
    assert "helper = 1" in sources
    assert sources.count('ac.exercises.check("99.double", double)') == 1
    assert not any("all correct" in s for s in sources)


def test_run_with_timeout_kills_the_whole_tree():
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    start = time.perf_counter()
    code, output = grading.run_with_timeout([sys.executable, "-c", script], timeout=3)
    assert code is None and time.perf_counter() - start < 20
    child = int(output.split()[0])
    psutil = pytest.importorskip("psutil")
    time.sleep(0.2)
    # Dead: gone, or a zombie waiting for a parent that does not reap in some containers.
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_bad_key_is_refused(tmp_path):
    (tmp_path / "key.json").write_text("[]")
    (tmp_path / "subs").mkdir()
    with pytest.raises(quiz.QuizSchemaError, match="not a quiz key"):
        grading.grade_all(
            tmp_path / "subs", tmp_path / "key.json", tmp_path / "out.csv", masters=MASTER.parent
        )


def test_a_previous_gradebook_is_kept_as_bak(tmp_path):
    key = tmp_path / "key.json"
    quiz.publish(FIXTURES / "quizzes" / "source", tmp_path / "learner", key, secret="toy-secret")
    (tmp_path / "subs").mkdir()  # no submissions: nothing to grade, only the files change
    out, bak = tmp_path / "gradebook.csv", tmp_path / "gradebook.csv.bak"
    first = "student,item,points,max_points,status,message\nalice,00.quiz,3,3,ok,\n"
    out.write_text(first)
    args = ["grade", str(tmp_path / "subs"), "--key", str(key), "--out", str(out)]
    assert cli.main([*args, "--masters", str(MASTER.parent)]) == 0
    assert bak.read_text() == first  # the instructor's earlier gradebook survives
    second = out.read_text()
    assert "alice" not in second and second.startswith("student")
    assert cli.main([*args, "--masters", str(MASTER.parent)]) == 0
    assert bak.read_text() == second  # each run keeps the gradebook it replaces


def test_cli_entry_point_runs():
    result = subprocess.run(
        [sys.executable, "-m", "amp_course.cli", "grade", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0 and "--key" in result.stdout
