"""Which answer of a submission the grader takes for a quiz question (``grading.quizzes``): any
answer file, found by its content whatever a browser named it; of several that answer one question
otherwise, the stated rule, and the gradebook's ``file`` column names the file graded. No kernel
runs here."""

import json
import os

import pytest
from conftest import ROOT

from amp_course import quiz
from amp_course.tooling.grading import quizzes

FIXTURES = ROOT / "tests" / "fixtures" / "grading"
OLD, NEW = 1_000_000_000, 1_000_003_600  # two times an hour apart


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    root = tmp_path_factory.mktemp("key")
    path = root / "key.json"
    quiz.publish(FIXTURES / "quizzes" / "source", root / "learner", path, secret="toy-secret")
    return json.loads(path.read_text())


def _answers(path, saved=NEW, attempts=1, **values):
    """An answer file of the toy lesson at ``path``, saved at ``saved``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    records = {qid: {"value": v, "attempts": attempts} for qid, v in values.items()}
    path.write_text(json.dumps({"format": 1, "lessons": {"99_toy": records}}))
    os.utime(path, (saved, saved))
    return path


def _rows(tmp_path, key):
    rows = quizzes.grade_quizzes("s", tmp_path, key, ["99_toy"])
    return {r.item: r for r in rows}


@pytest.mark.parametrize(
    "name",
    [
        "amp-course-answers (1).json",  # a second ac.quiz.export() in Colab, downloaded again
        "99_toy.answers (1).json",
        "Copy of 99_toy.answers.json",
        "my quiz.json",
        "week 3/answers.json",
    ],
)
def test_an_answer_file_is_found_whatever_it_is_called(tmp_path, key, name):
    _answers(tmp_path / name, pi=3.14)
    row = _rows(tmp_path, key)["quiz:pi"]
    assert (row.status, row.points) == ("correct", 1.0)
    assert row.file == f"graded the answer in `{name}`."


def test_an_older_export_does_not_override_a_later_answer(tmp_path, key):
    """An export made before a wrong answer was fixed in the lesson's answer file."""
    export = _answers(tmp_path / "amp-course-answers.json", OLD, 1, pi=2.72, both=[0, 2])
    fixed = _answers(tmp_path / "99_toy.answers.json", NEW, 2, pi=3.14, both=[0, 2])
    rows = _rows(tmp_path, key)
    assert rows["quiz:pi"].status == "correct"
    assert rows["quiz:pi"].file == (
        "graded the answer in `99_toy.answers.json`; answered otherwise in "
        f"`amp-course-answers.json` (of several, graded is {quizzes.ANSWER_RULE})."
    )
    assert rows["quiz:both"].file == "graded the answer in `99_toy.answers.json`."  # they agree
    # A copy that wrote the export last (cp, an LMS's download): the answer checked more often is
    # still the later one.
    os.utime(export, (NEW + 1, NEW + 1))
    assert _rows(tmp_path, key)["quiz:pi"].status == "correct"
    _answers(fixed, NEW, 1, pi=3.14, both=[0, 2])  # checked as often: the one saved last
    assert _rows(tmp_path, key)["quiz:pi"].status == "wrong"


def test_hidden_copies_and_other_json_files_are_not_answers(tmp_path, key):
    _answers(tmp_path / "99_toy.answers.json", OLD, pi=3.14)
    _answers(tmp_path / ".ipynb_checkpoints" / "99_toy.answers.json", NEW, 5, pi=2.72)
    (tmp_path / "settings.json").write_text('{"theme": "dark"}')
    (tmp_path / "broken.json").write_text("{")
    rows = _rows(tmp_path, key)
    assert rows["quiz:pi"].status == "correct" and rows["quiz:pi"].message == ""
    assert rows["quiz:pick-b"].message == "not answered"


def test_an_unreadable_answer_file_is_named_and_a_huge_one_is_not_read(tmp_path, key):
    (tmp_path / "99_toy.answers (1).json").write_text('{"lessons": {"99_toy": {"pi": ')
    assert (
        "unreadable answer file 99_toy.answers (1).json: "
        in _rows(tmp_path, key)["quiz:pi"].message
    )
    huge = tmp_path / "amp-course-answers.json"
    huge.write_text(" " * (quizzes.ANSWER_FILE_BYTES + 1) + "{}")
    (tmp_path / "99_toy.answers (1).json").unlink()
    message = _rows(tmp_path, key)["quiz:pi"].message
    assert message == (
        "unreadable answer file amp-course-answers.json: over 4 MiB (all of a course's answers "
        "take a few kB)"
    )


def test_a_json_file_nested_past_pythons_stack_is_no_answer_file(tmp_path, key):
    """Every JSON file is read for answers: one nested a million deep (a hostile submission, or a
    data file) is unreadable, named where it is called as an answer file, and costs nothing else."""
    _answers(tmp_path / "99_toy.answers.json", pi=3.14)
    (tmp_path / "data.json").write_text("[" * 1_000_000 + "]" * 1_000_000)
    (tmp_path / "amp-course-answers.json").write_text("[" * 1_000_000 + "]" * 1_000_000)
    rows = _rows(tmp_path, key)
    assert rows["quiz:pi"].status == "correct"
    said = rows["quiz:pick-b"].message  # unanswered, beside an answer file that cannot be read
    assert said.startswith("unreadable answer file amp-course-answers.json: ") and "JSON" in said


def test_the_feedback_names_each_answer_file_once(tmp_path, key):
    """The answer file graded, and the same note naming the file that answers one question
    otherwise: the feedback keeps the longer note only."""
    from amp_course.tooling.grading.reports import feedback_markdown

    _answers(tmp_path / "amp-course-answers.json", OLD, 1, pi=2.72, both=[0, 2])
    _answers(tmp_path / "99_toy.answers.json", NEW, 2, pi=3.14, both=[0, 2])
    text = feedback_markdown("s", quizzes.grade_quizzes("s", tmp_path, key, ["99_toy"]))
    assert text.count("Graded the answer in `99_toy.answers.json`") == 1
    assert "answered otherwise in `amp-course-answers.json`" in text


def test_many_answer_files_under_the_one_file_bound_are_read_up_to_a_folder_bound(
    tmp_path, key, monkeypatch
):
    """A hostile folder of JSON files each just under the one-file bound would hold the grader's
    memory (every record is kept): past the folder's bound (cut to 1 MiB here) the files are not
    read, and named."""
    monkeypatch.setattr(quizzes, "ANSWER_FOLDER_BYTES", 2**20)
    filler = {f"q{i}": 0 for i in range(4_000)}  # ~50 kB of records for no graded question
    for index in range(30):  # ~75 kB each, 2.2 MB in all
        document = {"lessons": {"99_toy": filler, f"lesson_{index}": {"x": "y" * 20_000}}}
        (tmp_path / f"99_toy.answers ({index}).json").write_text(json.dumps(document))
    message = _rows(tmp_path, key)["quiz:pi"].message
    assert "past the 1 MiB of JSON files the grader reads in one submission" in message, message
