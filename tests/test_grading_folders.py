"""What an instructor's submissions folder holds besides students' folders, and the files the
grader writes: a Mac zip's leftovers, stray files, the grader's own output inside the folder, a
roster typed on another system, a second run over the Canvas gradebook, a shared server's
permissions. No kernel runs here (the grading itself is test_grading's)."""

import os
import unicodedata

import nbformat
import pytest
from test_grading import MASTER, _notebook

from amp_course.quiz import atomic_write_text
from amp_course.tooling.grading import platforms, run
from amp_course.tooling.grading.exports import canvas_csv, check_roster
from amp_course.tooling.grading.reports import Row


def _class(root):
    """Two students, a Mac zip's __MACOSX, a hidden folder, stray files and a notebook handed in
    without a folder."""
    for student in ("alice", "bob"):
        (root / student).mkdir(parents=True)
        nbformat.write(_notebook(), root / student / MASTER.name)
    (root / "__MACOSX" / "alice").mkdir(parents=True)
    (root / "__MACOSX" / "alice" / f"._{MASTER.name}").write_bytes(b"\x00\x05\x16\x07")
    (root / ".Trash").mkdir()
    (root / "README.txt").write_text("the class")
    nbformat.write(_notebook(), root / f"zoe_{MASTER.name}")


def test_only_students_folders_are_graded_and_the_rest_is_named(tmp_path):
    _class(tmp_path)
    assert [p.name for p in run.student_folders(tmp_path)] == ["alice", "bob"]
    said = run.left_out(tmp_path)
    assert said == (
        "not graded, as no student's folder (one folder per student, named by the student): "
        f"README.txt, __MACOSX/, zoe_{MASTER.name}"
    )


def test_the_graders_own_output_in_the_submissions_folder_is_no_student(tmp_path):
    """`amp-course grade . --out gradebook.csv` run twice from the submissions folder: its
    feedback folder is not graded as a student the second time, nor named as left out."""
    _class(tmp_path)
    out = tmp_path / "gradebook.csv"
    feedback = tmp_path / "gradebook-feedback"
    feedback.mkdir()
    out.write_text("student\n")
    outputs = (out, tmp_path / "gradebook.csv.bak", feedback)
    assert [p.name for p in run.student_folders(tmp_path, outputs)] == ["alice", "bob"]
    assert "gradebook" not in run.left_out(tmp_path, outputs)
    assert [p.name for p in run.student_folders(tmp_path)] == ["alice", "bob", "gradebook-feedback"]


def test_gradescope_takes_no_hidden_or_mac_zip_notebook(tmp_path):
    (tmp_path / "__MACOSX").mkdir()
    (tmp_path / "__MACOSX" / f"._{MASTER.name}").write_bytes(b"\x00\x05\x16\x07")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    nbformat.write(_notebook(), tmp_path / ".ipynb_checkpoints" / "99_toy-checkpoint.ipynb")
    assert platforms.gradable_notebooks(tmp_path) == []  # "holds no notebook", no junk named
    nbformat.write(_notebook(), tmp_path / MASTER.name)
    assert platforms.gradable_notebooks(tmp_path) == [tmp_path / MASTER.name]


def test_a_roster_typed_composed_matches_a_folder_a_mac_wrote_decomposed():
    typed = unicodedata.normalize("NFC", "Zoë")
    folder = unicodedata.normalize("NFD", "Zoë")
    assert folder != typed
    identity = {
        "Student": "Zoë Z",
        "ID": "7",
        "SIS User ID": "z7",
        "SIS Login ID": "zz",
        "Section": "",
    }
    roster = {typed: identity}
    check_roster([folder], roster)  # no refusal
    rows = [Row(folder, "99_toy", "05.mfu", 1, "passed")]
    lines = canvas_csv(rows, ["99_toy"], roster).splitlines()
    assert lines[-1] == "Zoë Z,7,z7,zz,,1"


def test_a_second_canvas_run_keeps_the_first_gradebook(tmp_path, monkeypatch):
    rows = {"first": [Row("alice", "99_toy", "05.mfu", 1, "passed")]}
    monkeypatch.setattr(platforms, "grade_all", lambda *args, **kwargs: rows["now"])
    settings = type("Settings", (), {"lessons": ["99_toy"]})()
    out = tmp_path / "canvas.csv"
    rows["now"] = rows["first"]
    platforms.grade_canvas(tmp_path, settings, out)
    first = out.read_text()
    rows["now"] = []  # a run over the wrong folder
    platforms.grade_canvas(tmp_path, settings, out)
    assert (tmp_path / "canvas.csv.bak").read_text() == first and "alice" in first


def test_a_written_file_is_as_readable_as_any_new_file(tmp_path):
    """Atomic writes go through mkstemp (mode 0600); the file gets open()'s mode under the
    umask, or keeps the mode it had."""
    before = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "quiz.yaml", "a")
        assert (tmp_path / "quiz.yaml").stat().st_mode & 0o777 == 0o644
        os.chmod(tmp_path / "quiz.yaml", 0o640)
        atomic_write_text(tmp_path / "quiz.yaml", "b")
        assert (tmp_path / "quiz.yaml").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(before)


def test_a_lesson_not_found_names_the_notebooks_no_lesson_took(tmp_path):
    """A learner's answered Untitled1.ipynb matches no lesson by id or name: the missing rows
    say it is there, so the instructor can see why."""
    from amp_course.tooling.grading import matching

    lessons = {"99_toy": matching.shipped(nbformat.read(MASTER, as_version=4))}
    nb = _notebook()
    del nb.metadata[matching.METADATA_KEY]
    nbformat.write(nb, tmp_path / "Untitled1.ipynb")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    nbformat.write(nb, tmp_path / ".ipynb_checkpoints" / "Untitled1-checkpoint.ipynb")
    found = matching.find(tmp_path, lessons)
    assert found["99_toy"].path is None
    assert matching.unclaimed(tmp_path, found) == (
        "; it holds notebooks that no lesson of this run claims by the id in their metadata or "
        "by their file name: Untitled1.ipynb"
    )
    nbformat.write(_notebook(), tmp_path / MASTER.name)
    assert matching.unclaimed(tmp_path, matching.find(tmp_path, lessons)) == (
        "; it holds notebooks that no lesson of this run claims by the id in their metadata or "
        "by their file name: Untitled1.ipynb"
    )
    # Another lesson handed in under this lesson's file name: its metadata decides, and is named.
    other = _notebook()
    other.metadata[matching.METADATA_KEY] = {"lesson": "03_grad_scaler"}
    nbformat.write(other, tmp_path / MASTER.name)
    found = matching.find(tmp_path, lessons)
    assert found["99_toy"].path is None
    assert matching.unclaimed(tmp_path, found).endswith(
        f"by their file name: {MASTER.name} (its metadata names lesson 03_grad_scaler), "
        "Untitled1.ipynb"
    )


def test_a_canvas_run_names_the_roster_students_who_handed_in_nothing(
    tmp_path, capsys, monkeypatch
):
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "folder,Student,ID,SIS User ID,SIS Login ID,Section\nalice,A,1,a,a,\ncarol,C,3,c,c,\n"
    )
    monkeypatch.setattr(platforms, "grade_all", lambda *args, **kwargs: [])
    settings = type("Settings", (), {"lessons": ["99_toy"]})()
    platforms.grade_canvas(tmp_path / "subs", settings, tmp_path / "canvas.csv", roster)
    assert "note: no submission folder for carol (in the roster)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, says",
    [
        (
            ["grade", "subs", "--out", "key.json"],
            "--out {root}/key.json names the same place as --key",
        ),
        (["grade", "subs", "--out", f"masters/{MASTER.name}"], "is inside --masters"),
        (["grade", "subs", "--out", "subs/bob/gradebook.csv"], "inside student bob's folder"),
        (
            ["grade", "subs", "--out", "gb.csv", "--feedback", "subs/alice"],
            "names the same place as student alice's",
        ),
        (["autograder", "--out", "key.json"], "names the same place as --key"),
    ],
    ids=[
        "gradebook-on-the-key",
        "gradebook-on-a-master",
        "gradebook-in-a-student",
        "feedback-on-a-student",
        "zip-on-the-key",
    ],
)
def test_grade_and_autograder_refuse_to_write_over_what_they_read(tmp_path, capsys, argv, says):
    """A gradebook, feedback folder or autograder zip named like the key, a master notebook or a
    student's folder would destroy it or mix with it: refused in one line before any grading, and
    every file is as it was. At the top of the submissions folder a gradebook is allowed
    (test_the_graders_own_output_in_the_submissions_folder_is_no_student)."""
    from amp_course import cli

    _class(tmp_path / "subs")
    key, masters = tmp_path / "key.json", tmp_path / "masters"
    key.write_text('{"secret": "s", "lessons": {}}')
    masters.mkdir()
    nbformat.write(_notebook(), masters / MASTER.name)
    files = [key, masters / MASTER.name, *(tmp_path / "subs").rglob("*.ipynb")]
    before = {f: f.read_bytes() for f in files}
    argv = [
        a if a.startswith("-") or a in ("grade", "autograder") else str(tmp_path / a) for a in argv
    ]
    argv += ["--key", str(key)] + (["--masters", str(masters)] if argv[0] == "grade" else [])
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert says.format(root=tmp_path) in err and len(err.strip().splitlines()) == 1, err
    assert {f: f.read_bytes() for f in files} == before
    assert sorted(p.name for p in (tmp_path / "subs" / "alice").iterdir()) == [MASTER.name]


def test_a_folder_with_no_students_grades_nothing_and_keeps_the_gradebook(tmp_path, capsys):
    """Grading a folder with no student's folder (a wrong path, an unzipped archive's parent)
    wrote an empty gradebook and moved the last one to .bak; a second such run lost it. Now it
    is refused and the gradebook is as it was."""
    from amp_course import cli

    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.txt").write_text("the class")
    key = tmp_path / "key.json"
    key.write_text('{"secret": "s", "lessons": {}}')
    out = tmp_path / "gradebook.csv"
    out.write_text("student,points\nalice,6\n")
    argv = ["grade", str(tmp_path / "empty"), "--key", str(key), "--out", str(out)]
    for _ in range(2):
        assert cli.main([*argv, "--masters", str(MASTER.parent)]) == 2
    err = capsys.readouterr().err
    assert f"no student's folder in {tmp_path / 'empty'}" in err and "README.txt" in err, err
    assert out.read_text() == "student,points\nalice,6\n"
    assert not out.with_name("gradebook.csv.bak").exists()
