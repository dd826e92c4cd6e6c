"""The grading subpackage piece by piece: restoring, the sandbox's view, verdicts, reports."""

import csv
import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, has_tag
from test_grading import two_lesson_key

from amp_course import cli, exercises, quiz
from amp_course.exercises import plain
from amp_course.tooling import instructor_commands
from amp_course.tooling.grading import (
    COLUMNS,
    CheckItem,
    Row,
    Settings,
    check_items,
    decide,
    feedback_markdown,
    matching,
    restore,
    sandbox,
    secret_seed,
    summary,
    total,
)
from amp_course.tooling.grading import run as grading_run
from amp_course.tooling.grading.exports import gradescope_results
from amp_course.tooling.grading.quizzes import wrong_message
from amp_course.tooling.grading.reports import MESSAGE_LIMIT, bounded
from amp_course.tooling.grading.settings import SettingsError

FIXTURES = ROOT / "tests" / "fixtures" / "grading"
MASTER = FIXTURES / "masters" / "99_toy.ipynb"
CHOOSE = CheckItem("06.choose_dtype", "06.choose_dtype", "choose")


def _needs_bwrap():
    why = sandbox.bwrap_works()
    if why and os.environ.get("CI"):
        pytest.fail(f"CI must grade in a sandbox: {why}")
    if why:
        pytest.skip(why)


def test_restore_keeps_learner_cells_and_drops_fake_checks():
    master = nbformat.read(MASTER, as_version=4)
    learner = nbformat.read(MASTER, as_version=4)
    for cell in learner.cells:
        if has_tag(cell, "check"):
            cell.source = 'print("✓ all correct")'
    learner.cells.insert(3, nbformat.v4.new_code_cell("helper = 1"))
    del learner.cells[1]  # the setup cell, deleted
    rebuilt = restore(master, learner)
    sources = [c.source for c in rebuilt.cells]
    assert "helper = 1" in sources and not any("all correct" in s for s in sources)
    assert sources.count('ac.exercises.check("06.choose_dtype", choose)') == 1
    assert sources[0].startswith("# Setup")


def test_secret_seeds_are_stable_distinct_and_never_zero():
    seeds = {secret_seed("s", name, "nb") for name in exercises.names()}
    assert len(seeds) == len(exercises.names()) and 0 not in seeds
    assert secret_seed("s", "05.mfu", "nb") == secret_seed("s", "05.mfu", "nb")
    assert secret_seed("s", "05.mfu", "nb") != secret_seed("t", "05.mfu", "nb")
    # Drawn for each submitted notebook: another (or a resubmission) gets other inputs.
    assert secret_seed("s", "05.mfu", "nb") != secret_seed("s", "05.mfu", "nb, edited")


def _payload(answer, seed):
    return {"observation": plain.dumps(exercises.get(CHOOSE.name).observe(answer, seed))}


def test_decide_passes_only_the_reference_results_at_the_secret_seed():
    seed = secret_seed("s", CHOOSE.name)
    right = exercises.solution(CHOOSE.name)
    assert decide(CHOOSE, _payload(right, seed), seed) == ("passed", "")
    status, message = decide(CHOOSE, _payload(right, 0), seed)  # seed-0 results replayed
    assert status == "failed" and message


@pytest.mark.parametrize(
    "payload, status, words",
    [
        (None, "error", "returned nothing"),
        ("a string", "error", "returned nothing"),
        ({}, "failed", "could not be read"),
        ({"observation": "\x80\x04K\x01."}, "failed", "could not be read"),  # a pickle
        ({"observation": '{"__tensor__": {"dtype": "object"}}'}, "failed", "could not be read"),
        ({"observation": "[1, 2, 3]"}, "failed", "could not read your answer"),
        ({"observation": "x" * (plain.MAX_CHARS + 1)}, "failed", "too large"),
        ({"missing": "choose"}, "not done", "choose was not defined"),
        ({"error": "ValueError: bad", "not_done": False}, "error", "ValueError: bad"),
        ({"error": "NotImplementedError", "not_done": True}, "not done", "NotImplementedError"),
        ({"timeout": "too slow"}, "timeout", "too slow"),
    ],
)
def test_decide_turns_anything_the_sandbox_sends_into_a_zero_with_a_reason(payload, status, words):
    got, message = decide(CHOOSE, payload, 123)
    assert got == status and words in message
    assert Row("ann", "99_toy", CHOOSE.name, CHOOSE.points, got, message).points == 0


def test_feedback_lists_every_item_in_plain_words():
    rows = [
        Row("ann", "01_x", "01.a", 1.0, "passed"),
        Row("ann", "01_x", "quiz:q", 2.0, "wrong", "a | pipe\nand a newline"),
    ]
    text = feedback_markdown("ann", rows)
    assert "**Total: 1 of 3 points.**" in text and "## 01_x (1 of 3)" in text
    assert "| quiz:q | 0 / 2 | wrong | a \\| pipe and a newline |" in text


def test_long_messages_reach_the_feedback_and_gradescope_whole():
    """No message is cut at a display width: the 72.000 GiB sentence of a real check, 500
    characters long, stays whole in the feedback file and in Gradescope's test output."""
    long = " ".join(["the step needs 72.000 GiB usable (90% of 80 GiB) and more words"] * 8)
    got, message = decide(CHOOSE, {"error": long, "not_done": False}, 123)
    assert got == "error" and message.endswith(long)
    rows = [Row("ann", "01_x", "01.a", 1.0, got, message)]
    assert long in feedback_markdown("ann", rows)
    [test] = gradescope_results(rows)["tests"]
    assert test["output"].endswith(long)
    assert wrong_message({"type": "numeric"}, 1.5).startswith("1.5 is not")


def test_only_a_message_beyond_the_bound_is_cut_at_a_word_with_a_mark():
    hostile = "spam " * 5000  # a submission printing without end
    cut = bounded(hostile)
    assert len(cut) < MESSAGE_LIMIT + 50 and cut.endswith("more characters cut]")
    kept, mark = cut.split(" [… ")
    assert kept == hostile[: len(kept)] and kept.endswith("spam")  # a whole word, then the mark
    assert mark == f"{len(hostile) - len(kept)} more characters cut]"
    assert bounded("x" * MESSAGE_LIMIT) == "x" * MESSAGE_LIMIT
    _, message = decide(CHOOSE, {"error": hostile, "not_done": False}, 123)
    assert message.endswith("more characters cut]")


def test_bwrap_command_shows_only_the_course_and_the_scratch_folder(tmp_path):
    cmd = sandbox.bwrap_command(["python"], tmp_path / "home", tmp_path / "ipc", {"A": "1"}, 2**30)
    text = " ".join(cmd)
    for flag in ("--unshare-all", "--unshare-user", "--die-with-parent", "--cap-drop ALL"):
        assert flag in text
    assert f"--tmpfs {sandbox.PACKAGE / sandbox.HIDDEN}" in text and "--clearenv" in text
    assert "prlimit --as=1073741824 -- python" in text.replace(
        sandbox.shutil.which("prlimit"), "prlimit"
    )
    bound = {cmd[i + 2] for i, arg in enumerate(cmd) if arg in ("--bind", "--ro-bind")}
    assert str(ROOT) not in bound and str(tmp_path / "ipc") in bound  # never the whole checkout


def test_docker_command_isolates_and_is_cleaned_up(tmp_path, monkeypatch):
    box = sandbox.Sandbox("docker", memory=2**30, image="img")
    cmd = box.wrap(["python", "-m", "ipykernel"], sandbox.Scratch(tmp_path), {"K": "v"})
    text = " ".join(cmd)
    assert cmd[:3] == ["docker", "run", "--rm"] and "--network none" in text
    assert f"--memory {2**30}" in text and "--cap-drop ALL" in text and "--read-only" in text
    assert f"{sandbox.PACKAGE}:{sandbox.PACKAGE}:ro" in text
    assert f"type=tmpfs,destination={sandbox.PACKAGE / sandbox.HIDDEN}" in text
    assert f"{tmp_path / 'home'}:{sandbox.HOME}" in text and "-e K=v" in text
    assert cmd[-4:] == ["img", "python", "-m", "ipykernel"]
    removed = []
    monkeypatch.setattr(sandbox.subprocess, "run", lambda args, **kw: removed.append(args))
    box.cleanup()
    assert removed == [["docker", "rm", "-f", cmd[cmd.index("--name") + 1]]]


def test_unknown_or_missing_sandboxes_are_refused(monkeypatch):
    with pytest.raises(ValueError, match="unknown sandbox"):
        sandbox.choose("chroot")
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(sandbox.SandboxUnavailable, match="podman is not installed"):
        sandbox.choose("podman")


@pytest.mark.parametrize(
    "fails, says",
    [
        ("info", "--sandbox docker: docker cannot reach its daemon: Cannot connect to the daemon"),
        (
            "image",
            "--sandbox docker: the image img is not here (`docker pull img`): Error: No such",
        ),
    ],
)
def test_a_container_sandbox_that_cannot_run_is_refused_before_any_kernel(
    tmp_path, monkeypatch, fails, says
):
    """Without a daemon, or without the image, every student's kernel would fail to start and
    every student lose the points (a docker whose daemon was down graded all as failed): refused
    up front, saying what to mend. A stand-in docker on PATH answers as the real one does."""
    tool = tmp_path / "bin" / "docker"
    tool.parent.mkdir()
    said = {"info": "Cannot connect to the daemon", "image": "Error: No such image: img"}[fails]
    tool.write_text(f'#!/bin/sh\n[ "$1" = {fails} ] && echo "{said}" >&2 && exit 1\nexit 0\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")
    with pytest.raises(sandbox.SandboxUnavailable) as refused:
        sandbox.choose("docker", image="img")
    assert str(refused.value).startswith(says), refused.value


def _run_in_bwrap(tmp_path, script, env=None):
    home, ipc = tmp_path / "home", tmp_path / "ipc"
    home.mkdir(exist_ok=True)
    ipc.mkdir(exist_ok=True)
    python = sandbox.interpreter(sys.executable)  # the venv may be reached through a link
    env = {"PYTHONPATH": str(sandbox.PACKAGE.parent), **(env or {})}  # as a kernel's
    cmd = sandbox.bwrap_command([python, "-c", script], home, ipc, env, 2**33)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_sandbox_hides_the_references_and_the_instructors_files(tmp_path):
    _needs_bwrap()
    key = tmp_path / "instructor" / "key.json"
    key.parent.mkdir()
    key.write_text("{}")
    script = f"""
import os, pathlib, sys, amp_course
package = pathlib.Path(amp_course.__file__).parent
print("solutions:", sorted(os.listdir(package / "exercises" / "solutions")))
try:
    import amp_course.exercises.solutions.lesson_06
except ImportError:
    print("import refused")
course = str(package / "exercises" / "lesson_06" / "__init__.py")
for target in [{str(key)!r}, course, sys.prefix + "/pyvenv.cfg"]:
    try:
        open(target, "a").close()
        print("WROTE", target)
    except OSError as error:
        print("refused", type(error).__name__)
print("git:", (package.parent / ".git").exists(), "tests:", (package.parent / "tests").exists())
"""
    result = _run_in_bwrap(tmp_path, script)
    assert result.returncode == 0, result.stderr
    assert "solutions: []" in result.stdout and "import refused" in result.stdout
    assert "WROTE" not in result.stdout and result.stdout.count("refused ") == 3
    assert "git: False tests: False" in result.stdout
    assert key.read_text() == "{}"


def test_sandbox_kills_detached_and_daemonised_processes(tmp_path):
    _needs_bwrap()
    token = f"amp-grading-unit-{uuid.uuid4().hex}"
    script = f"""
import os, subprocess, sys
argv = [sys.executable, "-c", "import time; time.sleep(60)", {token!r}]
subprocess.Popen(argv, start_new_session=True, env={{}})
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, argv)
    os._exit(0)
"""
    result = _run_in_bwrap(tmp_path, script)
    assert result.returncode == 0, result.stderr
    time.sleep(0.5)
    assert _alive(token) == []


def _alive(token):
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and token.encode() in (entry / "cmdline").read_bytes():
                if "\nState:\tZ" not in (entry / "status").read_text():
                    found.append(int(entry.name))
        except OSError:
            pass
    return found


def _grade(capsys, *args):
    """``amp-course grade`` with ARGS: (exit code, stdout, stderr), never a traceback."""
    code = cli.main(["grade", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def key(tmp_path):
    path = tmp_path / "key.json"
    quiz.publish(FIXTURES / "quizzes" / "source", tmp_path / "learner", path, secret="toy")
    return path


@pytest.mark.parametrize(
    "case, words",
    [
        ("no key", "cannot read the quiz key"),
        ("bad key", "not a quiz key"),
        (
            "a lesson without questions",
            "key.json: not a quiz key (lesson '99_toy' holds no questions)",
        ),
        ("a question without graded", "not a quiz key (99_toy/pick-b has no 'graded' of its kind)"),
        ("unknown lesson", "unknown lesson(s) 42_nothing; the masters and the key have: 99_toy"),
        ("no submissions", "is not a folder of submissions"),
        ("no student's folder", "no student's folder in"),
        ("no masters", "is not a folder of master notebooks (--masters)"),
        ("gradebook is a folder", "is a folder; it names the gradebook file to write"),
        ("gradebook in no folder", "cannot write in"),
        ("feedback is a file", "is a file; it names the folder of feedback files"),
        ("roster without canvas", "--roster maps folders to Canvas's ids"),
        ("bad timeout", "must be positive"),
        ("no memory", "--memory-gb 0.0: a kernel needs a positive, finite bound"),
        ("nan memory", "--memory-gb nan: a kernel needs a positive, finite bound"),
    ],
)
def test_every_command_line_mistake_is_one_line_and_a_nonzero_exit(
    tmp_path, key, capsys, case, words
):
    (tmp_path / "subs" / "ann").mkdir(parents=True)  # a student who handed in nothing
    args = {
        "submissions": tmp_path / "subs",
        "--key": key,
        "--out": tmp_path / "gb.csv",
        "--masters": MASTER.parent,
    }
    extra = []
    if case == "no key":
        args["--key"] = tmp_path / "missing.json"
    elif case == "bad key":
        args["--key"].write_text("[]")
    elif case.startswith("a lesson") or case.startswith("a question"):  # valid JSON, edited
        edited = json.loads(args["--key"].read_text())
        if case.startswith("a lesson"):
            edited["lessons"]["99_toy"] = 5
        else:
            del edited["lessons"]["99_toy"]["pick-b"]["graded"]
        args["--key"].write_text(json.dumps(edited))
    elif case == "unknown lesson":
        extra = ["--lessons", "42_nothing"]
    elif case == "no submissions":
        args["submissions"] = tmp_path / "nobody"
    elif case == "no student's folder":  # graded, it would push the last gradebook out of .bak
        (tmp_path / "empty").mkdir()
        args["submissions"] = tmp_path / "empty"
    elif case == "no masters":
        args["--masters"] = tmp_path / "nowhere"
    elif case == "gradebook is a folder":
        args["--out"] = tmp_path / "subs"
    elif case == "gradebook in no folder":  # found before grading, not after it
        (tmp_path / "a-file").write_text("x")
        args["--out"] = tmp_path / "a-file" / "gb.csv"
    elif case == "roster without canvas":  # it was ignored without a word
        args["--roster"] = tmp_path / "roster.csv"
    elif case == "feedback is a file":
        args["--feedback"] = tmp_path / "notes.txt"
        args["--feedback"].write_text("x")
    elif case == "bad timeout":
        extra = ["--timeout", "0"]
    elif case.endswith("memory"):  # 0 GB killed every kernel as it started: all students blamed
        extra = ["--memory-gb", "0" if case == "no memory" else "nan"]
    flat = [args.pop("submissions")] + [x for pair in args.items() for x in pair] + extra
    code, out, err = _grade(capsys, *flat, "--sandbox", "bwrap" if SANDBOXED else "none")
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: ") and words in lines[-1], err
    assert "Traceback" not in err and all(not line.startswith("  File") for line in lines)


SANDBOXED = sandbox.bwrap_works() is None


@pytest.mark.parametrize(
    "args, words",
    [
        ([], "the following arguments are required: submissions, --key"),
        (["subs", "--key", "k.json", "--sandbox", "chroot"], "invalid choice: 'chroot'"),
        (["subs", "--key", "k.json", "--jobs", "two"], "invalid int value: 'two'"),
    ],
)
def test_usage_mistakes_are_one_line_too(capsys, args, words):
    with pytest.raises(SystemExit) as stop:
        cli.main(["grade", *args])
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and words in err, err


def test_an_unavailable_sandbox_is_one_line(tmp_path, key, capsys, monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    (tmp_path / "subs").mkdir()
    code, _, err = _grade(capsys, tmp_path / "subs", "--key", key, "--sandbox", "podman")
    assert code == 2 and err.strip() == "error: --sandbox podman: podman is not installed"


def test_an_assignment_grades_only_its_lessons(tmp_path, capsys):
    """--lessons: rows, totals and feedback of those lessons only (no kernel: answers only)."""
    key = two_lesson_key(tmp_path)
    answers = {"pick-b": {"value": 1, "attempts": 1}, "pi": {"value": 2.0, "attempts": 1}}
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    lessons = {"lessons": {"99_toy": answers, "98_other": answers}}
    (tmp_path / "subs" / "ann" / "amp-course-answers.json").write_text(json.dumps(lessons))
    out = tmp_path / "gb.csv"
    base = [tmp_path / "subs", "--key", key, "--out", out, "--masters", MASTER.parent]
    code, printed, _ = _grade(capsys, *base, "--lessons", "98_other", "--sandbox", "none")
    assert code == 0
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["lesson"] for r in rows} == {"98_other"}
    assert {r["item"] for r in rows} == {"quiz:pick-b", "quiz:pi", "quiz:both"}
    feedback = (tmp_path / "gb-feedback" / "ann.md").read_text()
    assert "**Total: 2 of 4 points.**" in feedback and "99_toy" not in feedback
    assert "ann      2 / 4" in printed
    _grade(capsys, *base, "--sandbox", "none")  # the whole course: both lessons, 2 + 4 rows more
    with open(out, newline="") as handle:
        assert {r["lesson"] for r in csv.DictReader(handle)} == {"98_other", "99_toy"}
    # An empty --lessons (a shell variable left unset) names no lesson: refused, not every lesson.
    for empty in ("", " , "):
        code, _, err = _grade(capsys, *base, "--lessons", empty, "--sandbox", "none")
        assert code == 2 and "unknown lesson(s) (none given)" in err, err


def test_wrong_quiz_answers_get_one_line_that_keeps_the_right_answer_hidden():
    single = {
        "type": "single",
        "choices": ["first", "second"],
        "explanations": {"choices": ["Not this one.", "This one."]},
    }
    assert wrong_message(single, 0) == 'you chose "first" (Not this one.)'
    multiple = {**single, "type": "multiple", "choices": ["a", "b", "c"]}
    multiple["explanations"] = {"choices": ["Yes.", "No.", ""]}
    assert wrong_message(multiple, [1, 2]) == (
        'you chose "b" (No.) and "c"; the key takes another set of choices'
    )
    assert "3.14" not in wrong_message({"type": "numeric"}, 2.72)
    assert wrong_message({"type": "text"}, "helo") == "the key does not accept 'helo'"
    # The row's status says "wrong" once: in the gradebook's status column, and in Gradescope.
    row = Row("ann", "01_x", "quiz:pick", 1.0, "wrong", wrong_message(single, 0))
    [test] = gradescope_results([row])["tests"]
    assert test["output"] == 'wrong: you chose "first" (Not this one.)'


def test_summary_ranks_students_and_says_where_kernels_ran():
    rows = [
        Row("bo", "99", "a", 1.0, "passed"),
        Row("bo", "99", "b", 2.0, "flagged", "refused"),
        Row("al", "99", "a", 2.0, "passed"),
        Row("al", "99", "b", 1.0, "timeout"),
    ]
    box = sandbox.Sandbox("none", why="bubblewrap (bwrap) is not installed")
    lines = summary(rows, box).splitlines()
    assert lines[0] == f"Summary: 2 submission(s); isolation: {box.label}"
    assert lines[1].split() == ["student", "points", "flagged", "items", "timeout", "items"] + [
        "error",
        "items",
        "missing",
        "items",
    ]
    assert lines[2].split() == ["al", "2", "/", "3", "1"] and lines[3].split()[:4] == [
        "bo",
        "1",
        "/",
        "3",
    ]
    assert lines[-1] == "Flagged for review (see their messages): bo"


def test_cli_offers_the_sandbox_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["grade", "--help"])
    out = capsys.readouterr().out
    assert "--sandbox" in out and "--feedback" in out and "--memory-gb" in out


def test_references_observed_in_threads_are_the_ones_observed_alone():
    """The grader grades submissions in threads; seeded models must not mix their RNG draws."""
    from concurrent.futures import ThreadPoolExecutor

    names = ["labs.half_model", "labs.extra_step", "04.accumulate_and_clip"]
    exercises._reference_text.cache_clear()
    alone = {name: exercises._reference_text(name, 7) for name in names}
    for _ in range(3):  # without a lock most rounds mix them up; one round may not
        exercises._reference_text.cache_clear()
        with ThreadPoolExecutor(max_workers=6) as pool:
            together = list(pool.map(lambda name: exercises._reference_text(name, 7), names * 2))
        assert together == [alone[name] for name in names * 2]


def test_a_row_earns_its_points_only_by_its_status_and_totals_once():
    """points follow from status: a flagged, failed or timed-out item cannot keep its points."""
    rows = [Row("ann", "01_x", "01.a", 2, status) for status in ("passed", "correct")]
    rows += [
        Row("ann", "01_x", "01.a", 2, status)
        for status in ("failed", "not done", "wrong", "flagged", "timeout", "error", "missing")
    ]
    assert [r.points for r in rows] == [2.0, 2.0] + [0.0] * 7
    assert total(rows) == (4.0, 18.0) and total([]) == (0, 0)
    assert list(rows[0].as_dict()) == COLUMNS  # the CSV's columns, in the CSV's order
    assert rows[0].as_dict()["points"] == 2.0 and rows[0].as_dict()["max_points"] == 2.0


def test_a_checks_points_are_the_registered_ones_only(tmp_path):
    """One place: the master's check cell cannot give an exercise another worth than the one its
    notebook's ✓ line states (``register(..., points=)``)."""
    master = nbformat.read(MASTER, as_version=4)
    items = {item.name: item.points for item in check_items(master)}
    assert items == {name: exercises.get(name).points for name in ("06.choose_dtype", "05.mfu")}
    check = next(c for c in master.cells if (c.metadata.get("grading") or {}).get("id") == "05.mfu")
    check.metadata["grading"]["points"] = 2
    with pytest.raises(ValueError, match="05.mfu sets grading.points"):
        check_items(master)
    nbformat.write(master, tmp_path / MASTER.name)
    with pytest.raises(SettingsError, match="grading.points"):
        Settings.load(_toy_key(tmp_path), masters=tmp_path, sandbox_kind="none")


def _toy_key(folder):
    path = folder / "key.json"
    quiz.publish(FIXTURES / "quizzes" / "source", folder / "learner", path, secret="toy")
    return path


def test_a_part_the_grader_fails_on_costs_each_of_its_items_at_its_worth(tmp_path, monkeypatch):
    """A grader error gives every item that part grades an error row worth what the item is worth:
    the student's total is out of the same points as everyone else's."""
    settings = Settings.load(_toy_key(tmp_path), masters=MASTER.parent, sandbox_kind="none")

    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(grading_run, "grade_quizzes", broken)
    monkeypatch.setattr(grading_run, "grade_exercises", broken)
    (tmp_path / "ann").mkdir()
    rows = grading_run.grade_submission(grading_run.Run(settings, tmp_path), tmp_path / "ann")
    worth = {r.item: r.max_points for r in rows}
    assert worth == {
        "quiz:pick-b": 2,
        "quiz:pi": 1,
        "quiz:both": 1,
        "06.choose_dtype": 1,
        "05.mfu": 1,
    }
    assert {r.status for r in rows} == {"error"} and total(rows) == (0, 6)
    assert all(
        "grader failed on this submission's" in r.message and "boom" in r.message for r in rows
    )
    assert {r.isolation for r in rows} == {settings.sandbox.label}


def test_a_path_given_with_a_tilde_in_quotes_is_the_home_folders(monkeypatch, tmp_path):
    """The guide's pytest route quotes its grading options ("--key ~/amp-course/quiz-key.json"),
    so no shell expands the ~: the grader does, for every path it takes."""
    monkeypatch.setenv("HOME", str(tmp_path))
    args = instructor_commands.grade_parser().parse_args(
        shlex.split(
            "~/subs --key ~/k.json --out ~/g.csv --masters ~/m --feedback ~/f --roster ~/r.csv"
        )
    )
    paths = (args.submissions, args.key, args.out, args.masters, args.feedback, args.roster)
    assert paths == tuple(str(tmp_path / n) for n in ("subs", "k.json", "g.csv", "m", "f", "r.csv"))


def test_a_notebook_over_the_size_bound_is_not_read_and_costs_only_its_lesson(
    tmp_path, capsys, monkeypatch
):
    """A hostile notebook of gigabytes would take the grader's memory for the whole class: past
    matching.NOTEBOOK_BYTES it is not read (the bound cut to 1 MiB here), and its rows say why."""
    monkeypatch.setattr(matching, "NOTEBOOK_BYTES", 2**20)
    key = two_lesson_key(tmp_path)
    ann = tmp_path / "subs" / "ann"
    ann.mkdir(parents=True)
    big = nbformat.read(MASTER, as_version=4)
    big.metadata["padding"] = "0" * (2 * 2**20)
    nbformat.write(big, ann / MASTER.name)
    out = tmp_path / "gb.csv"
    base = [tmp_path / "subs", "--key", key, "--out", out, "--masters", MASTER.parent]
    code, _, err = _grade(capsys, *base, "--lessons", "99_toy", "--sandbox", "none")
    assert code == 0, err
    with open(out, newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if not r["item"].startswith("quiz:")]
    assert rows and {r["status"] for r in rows} == {"error"}
    assert all("over the 1 MiB the grader reads: not graded" in r["message"] for r in rows), rows
