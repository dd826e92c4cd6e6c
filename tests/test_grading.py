"""Instructor grading on a toy lesson holding two real exercises: honest and crafted submissions.

One grading run (the ``run`` fixture, in bubblewrap where it works, else guarded without a
sandbox) covers the ordinary cases (right, wrong, missing, corrupt, hanging) and every route a
determined learner might try: replacing or wrapping the check through ``sys.modules``,
``importlib``/``getattr``, a look-alike ``ac`` or ``__import__``, an IPython custom exception
handler; reaching the reference; forging a report; leaving detached processes behind; writing
outside the scratch folder and opening the key for writing. Each of those gets 0 with a reason,
leaves no process behind and changes none of the instructor's files. A second run (``guarded``)
grades without a sandbox, where the course's own switch (the grading flag) is in the learner's
reach: the routes around it are refused and flagged. Neither run is given a path in this
checkout to attack: the masters are copied first.
"""

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, clone_checkout, has_tag, processes_with

from amp_course import cli, exercises, quiz
from amp_course.exercises import plain
from amp_course.exercises.probe import MIME
from amp_course.tooling.grading import matching, sandbox

# A hang guard, not a speed test (the grading run takes about 35 s here): the submissions' own
# timeouts must end every planted hang, and if they did not, the run's fixture would never return.
pytestmark = pytest.mark.timeout(900)
# Seconds per cell. Frank's endless loop keeps a core busy until it runs out, at the lowest
# priority (fay's wait keeps none, so the pytest route grades her instead); an honest
# submission's whole kernel takes under 5 s on a 2-core CPU rehearsing AVX2 with two other busy
# processes, so a slower machine still has room.
CELL_TIMEOUT = "10"
SANDBOXED = sandbox.bwrap_works() is None  # else `--sandbox auto` grades without one
CHECKOUT = str(sandbox.PACKAGE.parent)  # the course the grader runs from

FIXTURES = ROOT / "tests" / "fixtures" / "grading"
MASTER = FIXTURES / "masters" / "99_toy.ipynb"
TOKEN = f"amp-grading-straggler-{uuid.uuid4().hex}"  # in the argv of every planted process
ITEMS = {"06.choose_dtype", "05.mfu", "quiz:pick-b", "quiz:pi", "quiz:both"}

RIGHT = {"pick-b": 1, "pi": 3.14, "both": [0, 2]}
WRONG = {"pick-b": 0, "pi": 2.72, "both": [1]}
# Right answers, written differently from the course's references.
CHOOSE = """
    if capability is None:  # the second argument holds the CPU's flags and its bf16 timing
        measured_slower_or_same = cpu_flags.bf16.ratio >= 1 or not cpu_flags.bf16.distinguishable
        return torch.float32 if measured_slower_or_same else torch.bfloat16
    return torch.bfloat16 if capability[0] >= 8 else torch.float16"""
MFU = "    return flops_per_step / (step_seconds * peak_tflops * 1e12)"
WRONG_CHOOSE = "    return torch.float16"
WRONG_MFU = "    return 100 * flops_per_step / step_seconds / (peak_tflops * 1e12)"
BLANK = "    raise NotImplementedError"
# A cell that hangs without using the CPU, as a rank waiting for a peer that never comes.
WAITS_FOREVER = "import threading\nthreading.Event().wait()"
# The submissions besides ATTACKS: alice to mia, with frank and fay.
ORDINARY = 12


def _notebook(choose=CHOOSE, mfu=MFU, before="", edit=None, blank=False):
    """The toy lesson as a learner hands it in (``blank``: as shipped); ``before`` is a cell run
    before the exercises."""
    nb = nbformat.read(MASTER, as_version=4)
    for cell in nb.cells if not blank else ():
        symbol = cell.metadata.get("exercise", {}).get("symbol")
        if symbol == "choose":
            cell.source = f"def choose(capability, cpu_flags):\n{choose}"
        elif symbol == "mfu":
            cell.source = f"def mfu(flops_per_step, step_seconds, peak_tflops):\n{mfu}"
    if before:
        nb.cells.insert(3, nbformat.v4.new_code_cell(before))
    if edit:
        edit(nb)
    return nb


def _wait_before(symbol):
    """An edit putting WAITS_FOREVER at the top of ``symbol``'s exercise cell, before its def."""

    def edit(nb):
        cell = next(c for c in nb.cells if c.metadata.get("exercise", {}).get("symbol") == symbol)
        cell.source = f"{WAITS_FOREVER}\n{cell.source}"

    return edit


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
    return folder


def _fake_checks(nb):
    for cell in nb.cells:
        if has_tag(cell, "check"):
            cell.source = 'print("✓ all correct")'  # an edited check cell


def _raise_first(nb):
    blank = next(c for c in nb.cells if c.metadata.get("exercise", {}).get("symbol") == "choose")
    blank.source = "raise RuntimeError('boom')\n" + blank.source  # choose is never defined


def _delete_checks(nb):
    nb.cells = [c for c in nb.cells if not has_tag(c, "check")]


FORGED_DTYPE, FORGED_MFU = "torch.float64", 0.123456789  # marks that a forgery reached the grader


def _forged():
    """The reference's seed-0 observations (a learner can copy them from a local check), marked."""
    choose, mfu = (
        exercises.get(name).observe(exercises.solution(name), 0)
        for name in ("06.choose_dtype", "05.mfu")
    )
    choose[0]["dtype"], mfu[0]["result"] = FORGED_DTYPE, FORGED_MFU
    return {"06.choose_dtype": plain.dumps(choose), "05.mfu": plain.dumps(mfu)}


FAKE_DISPLAY = f"""
from IPython.display import display
FORGED = {_forged()!r}
def forged_report(name, symbol, seed):
    payload = {{"observation": FORGED[name], "not_done": False}}
    display({{"{MIME}": payload}}, raw=True)
"""

# The references reached by reading their file, by importing them and through git.
READ_REFERENCE = """
    import pathlib, amp_course
    package = pathlib.Path(amp_course.__file__).parent
    found = {}
    exec((package / "exercises" / "solutions" / "lesson_06.py").read_text(), found)
    return found["choose_amp_dtype"](capability, cpu_flags)"""
IMPORT_REFERENCE = """
    from amp_course.exercises.solutions.lesson_05 import mfu as reference
    return reference(flops_per_step, step_seconds, peak_tflops)"""
GIT = """
import pathlib, subprocess, amp_course
root = pathlib.Path(amp_course.__file__).parents[1]
subprocess.run(["git", "-C", str(root), "show", "HEAD:amp_course/exercises/solutions/lesson_06.py"])
"""

ATTACKS = {
    # The check and the grader's probe replaced through sys.modules.
    "olga": FAKE_DISPLAY
    + """
import sys, types
import amp_course.exercises.probe
sys.modules["amp_course.exercises"].check = lambda *args, **kwargs: True
fake = types.ModuleType("amp_course.exercises.probe")
fake.report = forged_report
sys.modules["amp_course.exercises.probe"] = fake
sys.modules["amp_course.exercises"].probe = fake
""",
    # The probe wrapped through importlib and getattr/setattr; the references imported.
    "pete": FAKE_DISPLAY
    + """
import importlib
ex = importlib.import_module("amp_course.exercises")
probe = importlib.import_module("amp_course.exercises.probe")
real = getattr(probe, "observation_payload")
def wrapped(name, answer, seed):
    payload = real(name, answer, 0)  # observe at the seed a learner can check locally
    return {**payload, "observation": FORGED[name], "not_done": False}
setattr(probe, "observation_payload", wrapped)
setattr(ex, "judge", lambda *args, **kwargs: ("passed", ""))
setattr(ex, "check", lambda *args, **kwargs: True)
""",
    # A look-alike `ac`, and __import__ itself replaced so the probe imports a fake.
    "quinn": FAKE_DISPLAY
    + """
import builtins, types
ac = types.SimpleNamespace(exercises=types.SimpleNamespace(check=lambda *a: print("✓ correct")))
real_import = builtins.__import__
def fake_import(name, *args, **kwargs):
    if name == "amp_course.exercises.probe":
        return types.SimpleNamespace(report=forged_report)
    return real_import(name, *args, **kwargs)
builtins.__import__ = fake_import
""",
    # An IPython custom exception handler that swallows every error as success.
    "rosa": """
get_ipython().set_custom_exc((BaseException,), lambda *args, **kwargs: print("✓ correct"))
""",
    # Processes left behind: a detached one with an empty environment, and a double-forked daemon.
    "uma": f"""
import os, subprocess, sys
code = "import sys, time; time.sleep(1); [open(p, 'a').write(sys.argv[1]) for p in sys.argv[2:]]"
argv = [sys.executable, "-c", code, {TOKEN!r}, KEY, GRADEBOOK]
subprocess.Popen(argv, start_new_session=True, env={{}}, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, argv)
    os._exit(0)
os.waitpid(child, 0)
""",
    # Writes outside the scratch folder, and the key opened for writing.
    "vera": """
import os, pathlib, amp_course
course = pathlib.Path(amp_course.__file__).parent / "exercises" / "lesson_06" / "__init__.py"
for target in [KEY, GRADEBOOK, GRADEBOOK + ".bak", MASTER, OTHER, str(course), SENTINEL]:
    try:
        with open(target, "a") as handle:
            handle.write("tampered")
        print("wrote", target)
    except OSError as error:
        print("refused", target, error)
try:
    os.close(os.open(KEY, os.O_WRONLY | os.O_TRUNC))
except OSError as error:
    print("key refused", error)
""",
}


def _grade(subs, key, out, masters, *options):
    """``amp-course grade``, its exit code and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli.main(
            ["grade", str(subs), "--key", str(key), "--out", str(out), "--masters", str(masters)]
            + ["--cell-timeout", CELL_TIMEOUT, "--timeout", "120", *options]
        )
    with open(out, newline="") as handle:
        return code, list(csv.DictReader(handle)), printed.getvalue()


def two_lesson_key(folder, secret="toy"):
    """A key for the toy lesson and a copy of its quiz as lesson 98_other, published in
    ``folder``: an assignment picks one of two lessons."""
    sources = folder / "sources"
    sources.mkdir()
    toy = (FIXTURES / "quizzes" / "source" / "99_toy.yaml").read_text()
    (sources / "99_toy.yaml").write_text(toy)
    (sources / "98_other.yaml").write_text(toy.replace("lesson: 99_toy", "lesson: 98_other"))
    key = folder / "key.json"
    quiz.publish(sources, folder / "learner", key, secret=secret)
    return key


def _masters(root):
    """A copy of the toy master, so that no attack can name a file of this checkout."""
    shutil.copytree(MASTER.parent, root / "masters")
    return root / "masters"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("grading")
    key = root / "instructor" / "key.json"
    quiz.publish(FIXTURES / "quizzes" / "source", root / "learner", key, secret="toy-secret")
    subs = root / "submissions"
    masters = _masters(root)
    out = root / "instructor" / "gradebook.csv"
    out.write_text("student,points\nprevious,1\n")  # an earlier run's gradebook
    paths = {
        "KEY": str(key),
        "GRADEBOOK": str(out),
        "MASTER": str(masters / MASTER.name),
        "OTHER": str(subs / "alice" / MASTER.name),
        "SENTINEL": str(root / "written-by-a-learner"),
    }
    prelude = "".join(f"{name} = {value!r}\n" for name, value in paths.items())

    _submission(subs, "alice", _notebook(), RIGHT)
    bob = _submission(subs, "bob", _notebook(WRONG_CHOOSE, WRONG_MFU), WRONG)
    # A planted conftest.py, pytest.py or amp_course package changes nothing.
    (bob / "conftest.py").write_text("raise SystemExit(0)\n")
    (bob / "pytest.py").write_text("import sys\nsys.exit(0)\n")
    (bob / "amp_course").mkdir()
    (bob / "amp_course" / "__init__.py").write_text("exercises = None\n")
    _submission(subs, "dave", raw_answers='{"lessons": {"99_toy": {"pick-b": ')
    # A cell that raises, the check cells deleted and no answer file (one kernel for the three).
    _submission(subs, "erin", _notebook(edit=lambda nb: (_raise_first(nb), _delete_checks(nb))))
    # Frank's loop never returns and keeps a core busy until the cell timeout stops it. It runs
    # at the lowest priority, so it spends only CPU time that the rest of the suite leaves idle.
    busy = "\nimport os\nos.nice(19)\nwhile True:\n    pass"
    _submission(subs, "frank", _notebook(mfu=BLANK + busy), RIGHT)
    # Fay's wait comes before her mfu's def: its check finds mfu undefined after a stopped cell.
    _submission(subs, "fay", _notebook(edit=_wait_before("mfu")), RIGHT)
    gina = "print('✓ 06.choose_dtype: correct (2 points)')\nopen('report.xml', 'w').write('<ok/>')"
    # ... and asks the course for its reference (refused while grading).
    reference = (
        "    return ac.exercises.solution('05.mfu')(flops_per_step, step_seconds, peak_tflops)"
    )
    _submission(
        subs, "gina", _notebook(WRONG_CHOOSE, reference, before=gina, edit=_fake_checks), RIGHT
    )
    _submission(subs, "hank", raw_notebook='{"cells": [', answers=RIGHT)
    (subs / "kim").mkdir()
    (subs / "kim" / MASTER.name).symlink_to(subs / "alice" / MASTER.name)
    (subs / "kim" / "99_toy.answers.json").symlink_to(subs / "alice" / "99_toy.answers.json")
    _submission(subs, "sam", _notebook(READ_REFERENCE, IMPORT_REFERENCE, before=GIT), RIGHT)
    # Alice's work as a browser saves Colab's copy a second time, in a folder of its own.
    lee = _submission(subs, "lee", answers=RIGHT)
    (lee / "Downloads").mkdir()
    nbformat.write(_notebook(), lee / "Downloads" / f"Copy of {MASTER.stem} (1).ipynb")
    # Two copies of the lesson: the answered one (saved under a new name, then left), and the
    # lesson as shipped, saved later under its own name.
    mia = _submission(subs, "mia", _notebook(blank=True), RIGHT)
    nbformat.write(_notebook(), mia / "my amp work.ipynb")
    os.utime(mia / "my amp work.ipynb", (1_000_000_000, 1_000_000_000))
    for student, attack in ATTACKS.items():
        _submission(subs, student, _notebook(WRONG_CHOOSE, BLANK, before=prelude + attack), RIGHT)

    watched = [key, masters, MASTER, subs / "alice" / MASTER.name, ROOT / "amp_course"]
    before = _digests(watched)
    previous = out.read_bytes()
    # Three kernels at a time: while fay's wait and frank's niced loop hold two slots until the
    # cell timeout, the third keeps grading (with two, a core idled for those 10 s).
    code, rows, printed = _grade(subs, key, out, masters, "--jobs", "3")
    # Wait for every planted process to be gone (a sandbox's end takes a moment), not a sleep:
    # once none is left, none can write later, so what the tests below read is final.
    deadline = time.monotonic() + 60
    while processes_with(TOKEN) and time.monotonic() < deadline:
        time.sleep(0.05)
    return {
        "stragglers": processes_with(TOKEN),
        "code": code,
        "rows": rows,
        "printed": printed,
        "root": root,
        "subs": subs,
        "key": key,
        "out": out,
        "previous": previous,
        "before": before,
        "watched": watched,
        "paths": paths,
    }


def _documented_pytest_command() -> list[str]:
    """The pytest route's command as the instructors' guide shows it, as argv."""
    guide = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    block = guide.split("-p amp_course.tooling.nbval_grading", 1)[0].rsplit("```bash\n", 1)[1]
    block += (
        "-p amp_course.tooling.nbval_grading"
        + guide.split("-p amp_course.tooling.nbval_grading", 1)[1].split("```", 1)[0]
    )
    return shlex.split(block.replace("\\\n", " "))


# The submissions the pytest route grades again: those whose danger is pytest's own (a planted
# conftest.py, pytest.py and amp_course package: bob; a printed pass and a forged report.xml:
# gina), what pytest must not collect or follow (a corrupt notebook: hank; corrupt answers: dave;
# links: kim), a cell that never returns (fay), writes outside the scratch folder (vera) and honest
# work (alice). The others (the kernel attacks, a raising cell, copies under other names, reaching
# for the reference, frank's busy loop, which the same cell timeout stops as it stops fay's wait)
# meet the same grader by either route, and `run` grades them.
ROUTED = ("alice", "bob", "dave", "fay", "gina", "hank", "kim", "vera")


@pytest.fixture(scope="module")
def routed(run, tmp_path_factory):
    """ROUTED's submissions, as `run` graded them, graded again by the documented pytest command
    in a fresh clone of the course, with the grading run's options added to its --amp-grade."""
    root = tmp_path_factory.mktemp("routed")
    clone = clone_checkout(root)
    subs = root / "submissions"
    for student in ROUTED:  # kim's links still name alice's files in run's folder
        shutil.copytree(run["subs"] / student, subs / student, symlinks=True)
    argv = _documented_pytest_command()
    assert argv[:2] == ["pytest", "--nbval-lax"], argv
    argv[argv.index("SUBMISSIONS_DIR")] = str(subs)
    grade = argv.index("--amp-grade") + 1
    options = shlex.split(argv[grade])
    options[options.index("--key") + 1] = str(run["key"])
    options[options.index("--out") + 1] = str(root / "gradebook.csv")
    options += ["--masters", str(run["root"] / "masters"), "--cell-timeout", CELL_TIMEOUT]
    argv[grade] = shlex.join([*options, "--timeout", "120"])
    done = subprocess.run(
        [sys.executable, "-m", *argv, "-p", "no:cacheprovider", "-q", "-rN"],
        cwd=clone,  # the clone's amp_course, as a fresh clone runs it
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        capture_output=True,
        text=True,
        timeout=900,
    )
    with open(root / "gradebook.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {"done": done, "rows": rows, "clone": clone, "subs": subs}


def _where_the_folders_are_left_out(rows, course, subs) -> list[dict]:
    """Rows with the course's own folder written as <course> and the submissions' as <subs>: a
    check that names a file of the course names it in the checkout that graded, and a message
    about a submitted file names it where it was graded."""

    def left_out(value):
        value = value.replace(str(course), "<course>").replace(str(subs), "<subs>")
        if SANDBOXED:
            return value
        # Without one, the guard lists what it refused: the folders each run watches (its key,
        # gradebook, submissions and its temporary copy of the course) differ between the runs.
        return re.sub(r"(refused without a sandbox: ).*? \[", r"\1<what it tried> [", value)

    return [{k: left_out(v) for k, v in row.items()} for row in rows]


def test_the_pytest_route_gives_the_same_gradebook_and_a_test_per_item(run, routed):
    """Tampering, hidden inputs, timeouts, links: every routed submission's rows are the ones
    `amp-course grade` wrote, and pytest reports each row as a test."""
    done, rows = routed["done"], routed["rows"]
    graded = [r for r in run["rows"] if r["student"] in ROUTED]
    assert {r["student"] for r in graded} == set(ROUTED)
    assert _where_the_folders_are_left_out(
        rows, routed["clone"], routed["subs"]
    ) == _where_the_folders_are_left_out(graded, ROOT, run["subs"])
    lost = [r for r in rows if float(r["points"]) == 0]
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert f"{len(lost)} failed, {len(rows) - len(lost)} passed" in summary, summary
    assert "Cell 0" not in done.stdout  # nbval collected nothing: no student cell ran outside
    assert not Path(run["paths"]["SENTINEL"]).exists()
    assert "raise SystemExit(0)" in (run["subs"] / "bob" / "conftest.py").read_text()


def _digests(paths):
    found = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*")))]
    files = [f for f in found if f.is_file() and "__pycache__" not in f.parts]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def _points(rows, student):
    return {
        r["item"]: (float(r["points"]), float(r["max_points"]), r["status"], r["message"])
        for r in rows
        if r["student"] == student
    }


def test_every_student_graded_with_the_same_items(run):
    assert run["code"] == 0
    students = {r["student"] for r in run["rows"]}
    assert len(students) == ORDINARY + len(ATTACKS)
    for student in students:
        assert set(_points(run["rows"], student)) == ITEMS, student
    isolation = {r["isolation"] for r in run["rows"]}
    if SANDBOXED:
        assert isolation == {"bwrap"}
    else:  # said plainly in every row and in the summary
        assert len(isolation) == 1 and isolation.pop().startswith(sandbox.NOT_ISOLATED)
        assert f"isolation: {sandbox.NOT_ISOLATED}" in run["printed"]


def test_right_answers_written_differently_get_full_marks(run):
    got = _points(run["rows"], "alice")
    assert {k: v[0] for k, v in got.items()} == {
        "06.choose_dtype": 1,
        "05.mfu": 1,
        "quiz:pick-b": 2,
        "quiz:pi": 1,
        "quiz:both": 1,
    }
    assert all(v[2] in ("passed", "correct") for v in got.values())


def test_the_gradebook_feedback_and_summary_give_one_total(run):
    """Every writer totals the same rows, and a check is worth what its ✓ line says."""
    printed = run["printed"]
    table = printed[printed.index("Summary:") :].splitlines()[2:]
    shown = {line.split()[0]: line.split()[1:4] for line in table if line[:1] != " "}
    for student in {r["student"] for r in run["rows"]}:
        mine = [r for r in run["rows"] if r["student"] == student]
        got = sum(float(r["points"]) for r in mine)
        of = sum(float(r["max_points"]) for r in mine)
        feedback = run["out"].with_name("gradebook-feedback") / f"{student}.md"
        assert f"**Total: {got:g} of {of:g} points.**" in feedback.read_text(), student
        assert shown[student] == [f"{got:g}", "/", f"{of:g}"], student
    for r in run["rows"]:
        if not r["item"].startswith("quiz:"):
            assert float(r["max_points"]) == exercises.get(r["item"]).points, r


def test_wrong_answers_get_zero_with_the_checkers_reasons(run):
    got = _points(run["rows"], "bob")  # planted conftest.py, pytest.py and amp_course too
    assert all(v[0] == 0 for v in got.values())
    assert got["06.choose_dtype"][2] == "failed" and "you chose" in got["06.choose_dtype"][3]
    assert "100 times it" in got["05.mfu"][3]
    assert got["quiz:pi"][2] == "wrong"


def test_missing_or_corrupt_files_cost_only_what_they_hold(run):
    dave = _points(run["rows"], "dave")
    assert dave["quiz:pi"][0] == 0 and "not valid JSON" in dave["quiz:pi"][3]
    assert dave["06.choose_dtype"][2] == "missing"
    hank = _points(run["rows"], "hank")
    assert hank["05.mfu"][:3] == (0, 1, "error") and "corrupt notebook" in hank["05.mfu"][3]
    # Said as what it is, not as nbformat's quote of the file's first bytes.
    assert "not JSON, as a notebook file cut short" in hank["05.mfu"][3]
    assert '"cells"' not in hank["05.mfu"][3]
    assert hank["quiz:pick-b"][0] == 2
    erin = _points(run["rows"], "erin")  # no answer file: only the quiz is lost
    assert erin["quiz:pick-b"][:3] == (0, 2, "missing") and "no answers" in erin["quiz:pick-b"][3]


def test_a_cell_that_raises_loses_only_what_depends_on_it(run):
    got = _points(run["rows"], "erin")
    assert got["06.choose_dtype"][:3] == (0, 1, "not done") and got["05.mfu"][0] == 1
    assert "choose was not defined" in got["06.choose_dtype"][3]


@pytest.mark.parametrize("student", ["frank", "fay"])  # a busy loop; an idle wait
def test_a_cell_that_never_returns_is_stopped_by_the_cell_timeout(run, student):
    got = _points(run["rows"], student)
    assert got["06.choose_dtype"][0] == 1 and got["05.mfu"][0] == 0
    assert got["quiz:pi"][0] == 1
    if student == "frank":  # the loop after mfu's def: interrupted, the kernel went on, and the
        # check ran and found the blank (not a second timeout)
        assert got["05.mfu"][2] == "not done", got["05.mfu"]
    else:  # the wait before the def: the check names the cell that was stopped (it said "not
        # done: mfu was not defined (did its cell raise an error?)", guessing wrong)
        assert got["05.mfu"][2:] == (
            "timeout",
            "mfu was not defined when the check ran: a cell before it ('import threading') did "
            f"not finish within {CELL_TIMEOUT} s and was stopped",
        ), got["05.mfu"]


def test_edited_or_deleted_check_cells_are_restored(run):
    gina = _points(run["rows"], "gina")  # fake checks, a printed success and a forged report
    assert gina["06.choose_dtype"][0] == 0 and "you chose" in gina["06.choose_dtype"][3]
    erin = _points(run["rows"], "erin")  # deleted checks: put back, and graded
    assert erin["05.mfu"][:3] == (1, 1, "passed")
    assert "choose was not defined" in erin["06.choose_dtype"][3]


def test_a_copy_under_another_name_in_a_folder_gets_the_same_points(run):
    """Colab's "Copy of" name, a browser's " (1)" and a subfolder: Alice's points, and the
    feedback names the file graded."""
    lee, alice = _points(run["rows"], "lee"), _points(run["rows"], "alice")
    assert {k: v[:3] for k, v in lee.items()} == {k: v[:3] for k, v in alice.items()}
    feedback = (run["out"].with_name("gradebook-feedback") / "lee.md").read_text()
    assert f"Graded `Downloads/Copy of {MASTER.stem} (1).ipynb`." in feedback
    exercises_rows = [r for r in run["rows"] if r["student"] == "lee" and ":" not in r["item"]]
    files = {r["file"] for r in exercises_rows}
    assert files == {f"graded `Downloads/Copy of {MASTER.stem} (1).ipynb`."}


def test_of_two_copies_the_answered_one_is_graded_and_the_feedback_says_so(run):
    mia, alice = _points(run["rows"], "mia"), _points(run["rows"], "alice")
    assert {k: v[:3] for k, v in mia.items()} == {k: v[:3] for k, v in alice.items()}
    feedback = (run["out"].with_name("gradebook-feedback") / "mia.md").read_text()
    assert (
        f"Graded `my amp work.ipynb`; also handed in for 99_toy: `{MASTER.name}` (of several, "
        f"graded is {matching.RULE})." in feedback
    )


def test_links_to_other_work_are_not_graded(run):
    got = _points(run["rows"], "kim")
    assert all(v[0] == 0 for v in got.values())
    assert "link" in got["06.choose_dtype"][3] and "link" in got["quiz:pick-b"][3]


def test_the_reference_is_out_of_reach(run):
    gina = _points(run["rows"], "gina")  # the course asked for its reference
    assert gina["05.mfu"][:3] == (0, 1, "failed")
    assert "not available while grading" in gina["05.mfu"][3]
    assert gina["quiz:pick-b"][0] == 2  # the quiz is graded as usual
    sam = _points(run["rows"], "sam")
    if SANDBOXED:  # an empty folder in place of the references
        assert sam["06.choose_dtype"][:3] == (0, 1, "failed")
        assert sam["05.mfu"][:3] == (0, 1, "failed")
        assert "raised FileNotFoundError" in sam["06.choose_dtype"][3]
        assert "raised ModuleNotFoundError" in sam["05.mfu"][3]
    else:  # the guard refuses, and flags the lesson
        assert sam["06.choose_dtype"][:3] == (0, 1, "flagged")
        assert "raised PermissionError" in sam["06.choose_dtype"][3]
        assert "importing amp_course.exercises.solutions.lesson_05" in sam["05.mfu"][3]


@pytest.mark.parametrize("student", ["olga", "pete", "quinn"])
def test_a_replaced_or_wrapped_probe_reaches_the_grader_and_fails(run, student):
    """The forged results did arrive (their marks show in the messages) and still score 0."""
    got = _points(run["rows"], student)
    assert f"you chose {FORGED_DTYPE}" in got["06.choose_dtype"][3]
    assert f"returned {FORGED_MFU:.4g}" in got["05.mfu"][3]


@pytest.mark.parametrize("student", sorted(ATTACKS))
def test_crafted_submissions_get_zero_with_a_reason(run, student):
    got = _points(run["rows"], student)
    statuses = ("failed", "not done") if SANDBOXED else ("failed", "not done", "flagged")
    for item in ("06.choose_dtype", "05.mfu"):
        points, _, status, message = got[item]
        assert points == 0 and status in statuses, (item, status, message)
        assert message, item
    assert got["quiz:pick-b"][0] == 2  # their quiz answers still count


def test_no_process_outlives_grading(run):
    """Every planted process is gone within a minute of grading's end (the fixture waits)."""
    assert run["stragglers"] == []


def test_instructor_files_are_unchanged(run):
    assert _digests(run["watched"]) == run["before"]
    assert (run["out"].parent / "gradebook.csv.bak").read_bytes() == run["previous"]
    assert not Path(run["paths"]["SENTINEL"]).exists()
    assert TOKEN not in run["out"].read_text() and "tampered" not in run["out"].read_text()


def test_summary_ranks_students_and_counts_what_needs_a_look(run):
    printed = run["printed"]
    lines = printed[printed.index("Summary:") :].splitlines()
    assert lines[0].startswith(f"Summary: {ORDINARY + len(ATTACKS)} submission(s); isolation: ")
    header = lines[1].split("  ")
    assert [h.strip() for h in header if h.strip()][:3] == ["student", "points", "flagged items"]
    table = {line.split()[0]: line for line in lines[2 : 2 + ORDINARY + len(ATTACKS)]}
    points = [float(line.split()[1]) for line in table.values()]
    assert points == sorted(points, reverse=True) and next(iter(table)) == "alice"
    missing = lines[1].index("missing items")
    assert table["erin"][missing:].split() == ["3"]  # no answer file: its three quiz questions
    assert table["dave"][missing:].split() == ["5"]  # no notebook, an unreadable answer file


def test_wrong_quiz_answers_say_what_was_answered(run):
    bob = _points(run["rows"], "bob")
    assert bob["quiz:pick-b"][3] == 'you chose "first" (Not this one.)'
    assert bob["quiz:both"][3] == 'you chose "b" (No.); the key takes another set of choices'
    assert bob["quiz:pi"][3] == "2.72 is not within the key's tolerance of the answer"


def test_hidden_inputs_are_drawn_for_each_submission(run):
    """rosa's and uma's blank mfu are shown the inputs drawn for their own notebooks: what one's
    feedback shows tells nothing about another's (or a resubmission's)."""
    shown = [_points(run["rows"], s)["05.mfu"][3] for s in ("rosa", "uma")]
    inputs = [message[message.index("mfu(") : message.index(")")] for message in shown]
    assert inputs[0] != inputs[1], shown


def test_feedback_file_per_student(run):
    folder = run["out"].parent / "gradebook-feedback"
    assert sorted(p.stem for p in folder.glob("*.md")) == sorted(
        {r["student"] for r in run["rows"]}
    )
    bob = (folder / "bob.md").read_text()
    assert "# Feedback for bob" in bob and "## 99_toy (0 of 6)" in bob
    assert "| quiz:pi | 0 / 1 | wrong |" in bob and "100 times it" in bob


# Without a sandbox the course's own switch, the grading flag, is in the learner's reach: each
# submission drops it or goes around it (cells: before the exercises, choose's, mfu's) and asks
# for the reference, choose and mfu by different routes. Graded without the guard, both pass.
BYPASSES = {
    # The flag popped from the environment, then the course asked for its reference; the flag
    # emptied and the course's package reloaded, then asked again.
    "nina": (
        "import importlib, os, sys",
        'os.environ.pop("AMP_COURSE_GRADING")\nchoose = ac.exercises.solution("06.choose_dtype")',
        'os.environ["AMP_COURSE_GRADING"] = ""\n'
        'ex = importlib.reload(sys.modules["amp_course.exercises"])\n'
        'mfu = ex.solution("05.mfu")',
    ),
    # The reference's file read from the checkout and executed; the course's modules cleared from
    # sys.modules and the reference imported from the checkout; and the master notebook
    # overwritten by native code, which the guard cannot see (torch maps the file itself): the
    # check after the notebook must.
    "pablo": (
        "import torch\ntorch.from_file(MASTER, shared=True, size=64, dtype=torch.uint8)[:] = 32",
        'found = {"__package__": "amp_course.exercises.solutions"}\n'
        'exec(open(CHECKOUT + "/amp_course/exercises/solutions/lesson_06.py").read(), found)\n'
        'choose = found["SOLUTIONS"]["06.choose_dtype"]',
        "import sys\nsys.path.insert(0, CHECKOUT)\n"
        'for name in [m for m in sys.modules if m.startswith("amp_course")]:\n'
        "    del sys.modules[name]\n"
        "from amp_course.exercises.solutions.lesson_05 import SOLUTIONS\n"
        'mfu = SOLUTIONS["05.mfu"]',
    ),
}


def _bypass(before, choose, mfu):
    def answers(nb):
        for cell in nb.cells:
            symbol = cell.metadata.get("exercise", {}).get("symbol")
            cell.source = {"choose": choose, "mfu": mfu}.get(symbol, cell.source)

    return _notebook(before=before, edit=answers)


@pytest.fixture(scope="module")
def guarded(run, tmp_path_factory):
    """The honest alice and the BYPASSES, graded with `--sandbox none`."""
    root = tmp_path_factory.mktemp("guarded")
    masters = _masters(root)
    subs = root / "submissions"
    _submission(subs, "alice", nbformat.read(run["subs"] / "alice" / MASTER.name, 4), RIGHT)
    prelude = f"CHECKOUT = {CHECKOUT!r}\nMASTER = {str(masters / MASTER.name)!r}\n"
    for student, (before, choose, mfu) in BYPASSES.items():
        _submission(subs, student, _bypass(prelude + before, choose, mfu), RIGHT)
    out = root / "instructor" / "gradebook.csv"
    out.parent.mkdir()
    watched = [masters, run["key"], ROOT / "amp_course"]
    before = _digests(watched)
    warned = io.StringIO()
    with contextlib.redirect_stderr(warned):
        code, rows, printed = _grade(subs, run["key"], out, masters, "--sandbox", "none")
    return {
        "code": code,
        "rows": rows,
        "printed": printed,
        "warned": warned.getvalue(),
        "masters": masters,
        "out": out,
        "before": before,
        "after": _digests(watched),
    }


def test_without_a_sandbox_grading_says_so(guarded):
    assert guarded["code"] == 0
    assert guarded["warned"].count("WARNING: grading WITHOUT a sandbox") == 2  # first and last
    isolation = {r["isolation"] for r in guarded["rows"]}
    assert isolation == {
        f"{sandbox.NOT_ISOLATED}: --sandbox none was asked for; kernel guarded by an audit hook)"
    }
    assert f"isolation: {isolation.pop()}" in guarded["printed"]


def test_without_a_sandbox_honest_work_gets_the_same_verdicts(run, guarded):
    def verdicts(rows):
        return {
            r["item"]: (r["points"], r["status"], r["message"])
            for r in rows
            if r["student"] == "alice"
        }

    assert verdicts(guarded["rows"]) == verdicts(run["rows"])


@pytest.mark.parametrize("student", sorted(BYPASSES))
def test_without_a_sandbox_the_references_stay_out_of_reach(guarded, student):
    got = _points(guarded["rows"], student)
    for item in ("06.choose_dtype", "05.mfu"):
        points, _, status, message = got[item]
        assert (points, status) == (0, "flagged"), (item, status, message)
        assert "refused without a sandbox" in message and "exercises/solutions" in message
    assert got["quiz:pick-b"][0] == 2  # the quiz is graded as usual


def test_without_a_sandbox_a_changed_master_is_put_back_and_flagged(guarded):
    master = guarded["masters"] / MASTER.name
    kept = guarded["out"].parent / "gradebook-changed" / "pablo" / master.relative_to("/")
    message = _points(guarded["rows"], "pablo")["05.mfu"][3]
    assert f"changed {master} (put back; as changed, in {kept})" in message
    assert guarded["after"] == guarded["before"]
    assert kept.read_bytes().startswith(b" " * 64)  # what the native write made of it
    assert "Flagged for review (see their messages): nina, pablo" in guarded["printed"]


def test_a_previous_gradebook_is_kept_as_bak(tmp_path):
    key = tmp_path / "key.json"
    quiz.publish(FIXTURES / "quizzes" / "source", tmp_path / "learner", key, secret="toy-secret")
    (tmp_path / "subs" / "ann").mkdir(parents=True)  # handed in nothing: no kernel runs
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
