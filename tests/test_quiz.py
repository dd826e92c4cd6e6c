"""Quizzes: schema errors, publishing, hidden answers, self-check, crash-safe answer files."""

import contextlib
import copy
import io
import json
import os
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT

from amp_course import cli, quiz

SOURCES = sorted((ROOT / "quizzes" / "source").glob("*.yaml"))
TOY = ROOT / "tests" / "fixtures" / "grading" / "quizzes" / "source" / "99_toy.yaml"


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_every_source_is_valid(path):
    source = quiz.load_source(path)
    assert len(source.questions) >= 5
    for question in source.questions:
        assert all(c.explanation for c in question.choices)


def test_committed_learner_files_are_up_to_date():
    assert quiz.stale_learner_files() == [], "run `amp-course quiz publish` and commit quizzes/"


def test_lesson_00_has_the_seed_questions():
    source = quiz.load_source(ROOT / "quizzes" / "source" / "00_scenario.yaml")
    prompts = " ".join(q.prompt for q in source.questions)
    for words in ("main benefit of mixed precision", "need GradScaler", "keep in float32"):
        assert words in prompts


def test_learner_file_hides_answers():
    source = quiz.load_source(ROOT / "quizzes" / "source" / "00_scenario.yaml")
    text = (ROOT / "quizzes" / "00_scenario.yaml").read_text()
    doc = yaml.safe_load(text)
    for question in source.questions:
        for choice in question.choices:
            assert choice.explanation not in text
        if question.explanation:
            assert question.explanation not in text
        entry = next(q for q in doc["questions"] if q["id"] == question.id)
        assert "correct" not in json.dumps(entry.get("choices", []))
        if question.graded:
            assert "hashes" not in entry and "feedback" not in entry
        else:
            assert entry["hashes"]
    assert "correct: true" not in text and "answer:" not in text and "accept:" not in text


def test_publish_is_deterministic_and_key_keeps_its_secret(tmp_path):
    out, key = tmp_path / "out", tmp_path / "key.json"
    quiz.publish(TOY.parent, out, key)
    first = (out / "99_toy.yaml").read_text(), key.read_text()
    quiz.publish(TOY.parent, out, key)  # no secret given: reuses the key's own
    assert ((out / "99_toy.yaml").read_text(), key.read_text()) == first
    other = tmp_path / "other.json"
    quiz.publish(TOY.parent, out, other, secret="instructor-secret")
    assert json.loads(other.read_text())["secret"] == "instructor-secret"
    assert (
        json.loads(other.read_text())["lessons"]["99_toy"]["pick-b"]["hashes"]
        != json.loads(key.read_text())["lessons"]["99_toy"]["pick-b"]["hashes"]
    )


def test_cli_publish_and_check(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["quiz", "publish", "--sources", str(TOY.parent), "--out", str(out)]) == 0
    assert cli.main(["quiz", "check", "--sources", str(TOY.parent), "--out", str(out)]) == 0
    (out / "99_toy.yaml").write_text((out / "99_toy.yaml").read_text() + "# edited\n")
    assert cli.main(["quiz", "check", "--sources", str(TOY.parent), "--out", str(out)]) == 1
    assert "out of date: 99_toy.yaml" in capsys.readouterr().err


def test_cli_publish_names_only_the_files_it_wrote(tmp_path, capsys):
    """A second publish of unchanged sources writes no learner file, and says so (into a
    read-only checkout it claimed to have written every file)."""
    out, key = tmp_path / "out", tmp_path / "key.json"
    argv = ["quiz", "publish", "--sources", str(TOY.parent), "--out", str(out), "--key", str(key)]
    assert cli.main(argv) == 0
    assert f"wrote {out / '99_toy.yaml'}" in capsys.readouterr().out
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out / '99_toy.yaml'}" not in printed and f"wrote {key}" in printed
    assert f"1 learner file(s) in {out} already up to date" in printed


GOOD = yaml.safe_load(TOY.read_text())


def _broken(change):
    data = copy.deepcopy(GOOD)
    change(data)
    return data


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda d: d.pop("title"), "title"),
        (lambda d: d.update(lesson="toy"), "lesson"),
        (lambda d: d["questions"][0].update(type="essay"), "question 'pick-b': type"),
        (lambda d: d["questions"][0].update(id="Pick B"), "question 1: id"),
        (lambda d: d["questions"][1].update(id="pick-b"), "question 'pick-b': id: used twice"),
        (
            lambda d: d["questions"][0]["choices"][0].pop("explanation"),
            "question 'pick-b' choice 1",
        ),
        (lambda d: d["questions"][0]["choices"][0].update(correct=True), "exactly one correct"),
        (lambda d: d["questions"][0]["choices"][1].update(correct="yes"), "choice 2: correct"),
        (lambda d: d["questions"][1].update(answer="3.14"), "question 'pi': answer"),
        (lambda d: d["questions"][1].update(tolerance=-1), "question 'pi': tolerance"),
        (lambda d: d["questions"][1].pop("explanation"), "question 'pi': explanation"),
        (lambda d: d["questions"][3].update(accept=[]), "question 'practice': accept"),
        (
            lambda d: d["questions"][3].update(choices=[]),
            "question 'practice': field(s) ['choices']",
        ),
        (lambda d: d["questions"][2].update(points=0), "question 'both': points"),
        (lambda d: d["questions"][2].update(graded="no"), "question 'both': graded"),
        (lambda d: d["questions"][2].update(prompt=""), "question 'both': prompt"),
    ],
)
def test_schema_errors_name_file_and_question(change, words):
    with pytest.raises(quiz.QuizSchemaError) as error:
        quiz.parse_source(_broken(change), "source/99_toy.yaml")
    assert "source/99_toy.yaml" in str(error.value) and words in str(error.value)


def test_invalid_yaml_names_the_file(tmp_path):
    bad = tmp_path / "99_toy.yaml"
    bad.write_text("lesson: [unclosed")
    with pytest.raises(quiz.QuizSchemaError, match="99_toy.yaml: not valid YAML"):
        quiz.load_source(bad)


@pytest.fixture
def toy(tmp_path):
    quiz.publish(TOY.parent, tmp_path / "quizzes")
    return tmp_path


def test_self_check_feedback(toy):
    q = quiz.Quiz("99_toy", quiz_dir=toy / "quizzes", answers_path=toy / "a.json")
    assert q.answer("practice", "  HELLO ").correct is True
    wrong = q.answer("practice", "bye")
    assert wrong.correct is False and "Practice only" in wrong.message and wrong.attempts == 2
    graded = q.answer("pick-b", "second")
    assert graded.correct is None and "graded by your instructor" in graded.message
    with pytest.raises(ValueError, match="not one of the choices"):
        q.answer("pick-b", "third")
    with pytest.raises(ValueError, match="expected a number"):
        q.answer("pi", "three")
    with pytest.raises(KeyError, match="No question 'nope'"):
        q.answer("nope", 1)


def test_numeric_tolerance_accepts_every_value_within_it():
    question = quiz.Question("x", "numeric", "?", answer=3.14, tolerance=0.005, explanation="e")
    hashes = quiz.answer_hashes(question, "99_toy", "salt")
    entry = {"type": "numeric", "tolerance": 0.005, "hashes": hashes}
    for value in (3.135, 3.1375, 3.14, 3.1449, 3.145):
        assert quiz.is_correct(entry, "99_toy", "x", value, "salt"), value
    for value in (3.13, 3.15, 0.0, -3.14):
        assert not quiz.is_correct(entry, "99_toy", "x", value, "salt"), value


def test_answers_are_restored_when_the_cell_runs_again(toy, monkeypatch, capsys):
    monkeypatch.setenv(quiz.MODE_ENV, "text")
    monkeypatch.setenv(quiz.ANSWERS_ENV, str(toy))
    first = quiz.show("99_toy", quiz_dir=toy / "quizzes")
    first.answer("pick-b", 1)  # the second choice on this learner's screen
    first.answer("both", ["a", "c"])  # these choices' texts are "a", "b", "c": texts win
    first.answer("pi", 3.14)
    saved = json.loads((toy / "99_toy.answers.json").read_text())
    # Stored by identity (index in the published file), whatever the order on screen.
    assert saved["lessons"]["99_toy"]["both"] == {"value": [0, 2], "attempts": 1}
    again = quiz.show("99_toy", quiz_dir=toy / "quizzes")
    assert again.order("both") == first.order("both")  # the same order after a restart
    shown = again.shown("both", [0, 2])
    assert sorted(shown.split(", ")) == sorted(
        f"{chr(97 + again.order('both').index(i))}) {text}" for i, text in [(0, "a"), (2, "c")]
    )
    assert f"saved answer: {shown} after 1 attempt(s)" in capsys.readouterr().out
    assert again.records["pick-b"]["value"] == first.order("pick-b")[1]
    assert again.answer("pick-b", 0).attempts == 2


def test_failed_write_leaves_the_previous_file_intact(toy, monkeypatch):
    path = toy / "a.json"
    q = quiz.Quiz("99_toy", quiz_dir=toy / "quizzes", answers_path=path)
    q.answer("practice", "hello")
    before = path.read_text()

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)  # what atomic_write_text calls
    with pytest.raises(OSError):
        q.answer("practice", "bye")
    assert path.read_text() == before
    assert [p.name for p in toy.iterdir() if p.name.startswith(".a.json")] == []


def test_killed_writer_leaves_the_previous_file_intact(toy):
    path = toy / "a.json"
    q = quiz.Quiz("99_toy", quiz_dir=toy / "quizzes", answers_path=path)
    q.answer("practice", "hello")
    before = path.read_text()
    # A writer killed halfway: it has written part of the new file when SIGKILL arrives.
    script = (
        "import os, sys, time, amp_course.quiz as q\n"
        "def stall(fd):\n"
        "    print('half written', flush=True)\n"
        "    time.sleep(60)\n"
        "os.fsync = stall\n"
        f"q.atomic_write_text({str(path)!r}, '{{\\\"lessons\\\": ' * 1000)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout.readline().strip() == "half written"
    proc.kill()
    proc.wait()
    assert path.read_text() == before
    assert json.loads(path.read_text())["lessons"]["99_toy"]["practice"]["value"] == "hello"


def test_corrupt_answer_file_is_reported_and_backed_up(toy, capsys):
    path = toy / "a.json"
    path.write_text("{not json")
    q = quiz.Quiz("99_toy", quiz_dir=toy / "quizzes", answers_path=path)
    assert "not valid JSON" in capsys.readouterr().err and q.load_error
    assert path.read_text() == "{not json"  # untouched until the learner answers
    q.answer("practice", "hello")
    assert (toy / "a.json.bak").read_text() == "{not json"
    assert json.loads(path.read_text())["lessons"]["99_toy"]["practice"]["correct"] is True


def test_text_mode_is_forced_and_detected(monkeypatch):
    monkeypatch.setenv(quiz.MODE_ENV, "widgets")
    assert quiz.widgets_available()
    monkeypatch.setenv(quiz.MODE_ENV, "text")
    assert not quiz.widgets_available()
    monkeypatch.delenv(quiz.MODE_ENV)
    assert not quiz.widgets_available()  # plain Python, no IPython kernel


def test_widgets_build_and_record(toy, monkeypatch):
    widgets = pytest.importorskip("ipywidgets")
    q = quiz.Quiz("99_toy", quiz_dir=toy / "quizzes", answers_path=toy / "a.json")
    box = quiz._question_widget(q, "practice")
    field, buttons, feedback = box.children[1], box.children[2], box.children[3]
    assert isinstance(field, widgets.Text)
    field.value = "hello"
    buttons.children[0].click()
    assert "Correct" in feedback.value and "attempts: 1" in buttons.children[1].value
    again = quiz._question_widget(q, "practice")  # re-run: restored
    assert again.children[1].value == "hello" and "Correct" in again.children[3].value


def test_a_numeric_field_starts_empty_and_reads_a_number(toy):
    widgets = pytest.importorskip("ipywidgets")
    q = quiz.Quiz("99_toy", quiz_dir=toy / "quizzes", answers_path=toy / "a.json")
    box = quiz._question_widget(q, "pi")
    field, buttons, feedback = box.children[1], box.children[2], box.children[3]
    assert isinstance(field, widgets.Text) and field.value == ""  # no 0 the learner never typed
    buttons.children[0].click()
    assert "expected a number" in feedback.value and not (toy / "a.json").exists()
    field.value = " 3.14 "
    buttons.children[0].click()
    attempts = buttons.children[1].value
    assert "attempts: 1" in attempts and "<small>" not in attempts and "font-size" in attempts
    assert q.records["pi"]["value"] == 3.14
    assert quiz._question_widget(q, "pi").children[1].value == "3.14"  # re-run: restored


def test_export_merges_answer_files(toy, monkeypatch):
    monkeypatch.setenv(quiz.ANSWERS_ENV, str(toy))
    q = quiz.Quiz("99_toy", quiz_dir=toy / "quizzes")
    q.answer("practice", "hello")
    target = quiz.export()
    assert json.loads(target.read_text())["lessons"]["99_toy"]["practice"]["value"] == "hello"
    monkeypatch.setenv(quiz.ANSWERS_ENV, str(toy / "empty"))
    with pytest.raises(FileNotFoundError, match="answer a quiz first"):
        quiz.export()


def test_unknown_lesson_lists_known_ones(toy):
    with pytest.raises(FileNotFoundError, match="known: 99_toy"):
        quiz.Quiz("42_nope", quiz_dir=toy / "quizzes")


def test_every_answer_in_a_cell_shows_its_feedback_once_as_text(toy):
    """Several quiz.answer calls in one cell, the last one the cell's value: each prints its
    feedback as text where it stands, and the last is not shown a second time as a repr."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        q = quiz.Quiz("99_toy", quiz_dir=toy / "quizzes", answers_path=toy / "a.json")
        shell.user_ns["q"] = q
        with contextlib.redirect_stdout(io.StringIO()) as out:
            shell.run_cell('q.answer("practice", "bye")\nlast = q.answer("practice", "hello")')
            # The cell's value as a kernel sends it: nothing, the text is printed already.
            assert shell.display_formatter.format(shell.user_ns["last"]) == ({}, {})
        printed = out.getvalue()
    finally:
        InteractiveShell.clear_instance()
    assert printed.count("[practice]") == 2, printed
    assert "✗ Not quite." in printed and "✓ Correct." in printed
    assert "Feedback(" not in printed and "\\n" not in printed
    assert printed.index("✗ Not quite.") < printed.index("✓ Correct.")


def test_the_widgets_answer_without_printing(toy, capsys):
    q = quiz.Quiz("99_toy", quiz_dir=toy / "quizzes", answers_path=toy / "a.json")
    result = q.answer("practice", "hello", show=False)
    assert result.correct is True and capsys.readouterr().out == ""
    assert repr(result).startswith("[practice] ✓ Correct.")


@pytest.mark.parametrize(
    "where, says",
    [
        ({"--out": "sources"}, "--out {root}/sources names the same place as --sources"),
        ({"--out": "learners", "--key": "learners/key.json"}, "inside the learners' folder --out"),
        ({"--out": "learners", "--key": "notes.txt", "--secret": "s"}, "is not a quiz key"),
        ({"--out": "learners", "--key": "."}, "is a folder"),
        ({"--out": "notes.txt"}, "--out {root}/notes.txt is a file; it names the folder"),
    ],
    ids=[
        "out-is-sources",
        "key-among-learners-files",
        "key-is-another-file",
        "key-is-a-folder",
        "out-is-a-file",
    ],
)
def test_publish_refuses_to_write_over_its_sources_or_a_file_that_is_no_key(
    tmp_path, capsys, where, says
):
    """An instructor's slip (the sources folder as --out, the key in the folder learners get, a
    mistyped --key naming another file or a folder) is refused before anything is written, and
    the sources and the other file are as they were."""
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / TOY.name).write_text(TOY.read_text())
    (tmp_path / "notes.txt").write_text("my notes\n")
    argv = ["quiz", "publish", "--sources", str(sources)]
    for option, value in where.items():
        argv += [option, value if option == "--secret" else str(tmp_path / value)]
    assert cli.main(argv) == 1
    assert says.format(root=tmp_path) in capsys.readouterr().err
    assert (sources / TOY.name).read_text() == TOY.read_text()
    assert (tmp_path / "notes.txt").read_text() == "my notes\n"
    assert not (tmp_path / "learners").exists()


@pytest.mark.parametrize(
    "sources, out, says",
    [
        ("absent", "out", "absent: no quiz sources (*.yaml) found"),
        ("empty", "out", "empty: no quiz sources (*.yaml) found"),
        ("sources/99_toy.yaml", "out", "99_toy.yaml: no quiz sources (*.yaml) found"),
        ("sources", "absent", "absent is not a folder of learner quiz files (--out)"),
    ],
    ids=["no-folder", "an-empty-folder", "a-file", "no-learner-folder"],
)
def test_quiz_check_that_checked_nothing_is_no_ok(tmp_path, capsys, sources, out, says):
    """`quiz check` on a folder of no sources said "ok: quiz sources are valid", and on a missing
    learner folder called every lesson out of date: each now says what is missing."""
    (tmp_path / "sources").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "sources" / TOY.name).write_text(TOY.read_text())
    (tmp_path / "out").mkdir()
    argv = ["quiz", "check", "--sources", str(tmp_path / sources), "--out", str(tmp_path / out)]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert says in err and "ok" not in err, err


def test_quiz_check_names_the_publish_that_mends_its_own_folders(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["quiz", "publish", "--sources", str(TOY.parent), "--out", str(out)]) == 0
    (out / "99_toy.yaml").write_text("edited\n")
    assert cli.main(["quiz", "check", "--sources", str(TOY.parent), "--out", str(out)]) == 1
    said = capsys.readouterr().err
    assert f"run `amp-course quiz publish --sources {TOY.parent} --out {out}`" in said, said


def test_a_source_that_is_not_utf8_text_is_one_line(tmp_path, capsys):
    (tmp_path / "00_scenario.yaml").write_bytes(b"\xff\xfe")
    argv = ["quiz", "check", "--sources", str(tmp_path), "--out", str(tmp_path)]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "00_scenario.yaml: cannot read it as UTF-8 text" in err and "Traceback" not in err


def test_quiz_texts_hold_no_markdown_backticks():
    """The widgets and the website show a question's texts as plain text: a backtick shows as
    typed (lesson 05's timer question did). Code is written plain, as in every other question."""
    for path in sorted((ROOT / "quizzes" / "source").glob("*.yaml")):
        for question in yaml.safe_load(path.read_text(encoding="utf-8"))["questions"]:
            texts = [question["prompt"]]
            for choice in question.get("choices", []):
                texts += [choice["text"], choice.get("explanation", "")]
            texts.append(question.get("explanation", ""))
            assert not [t for t in texts if "`" in str(t)], (path.name, question["id"])
