"""The grading subpackage piece by piece: restoring, the sandbox's view, verdicts, reports."""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

from amp_course import cli, exercises, quiz
from amp_course.exercises import plain
from amp_course.grading import (
    CheckItem,
    decide,
    feedback_markdown,
    grade_all,
    restore,
    sandbox,
    secret_seed,
)
from amp_course.grading.reports import row

MASTER = ROOT / "tests" / "fixtures" / "grading" / "masters" / "99_toy.ipynb"
CHOOSE = CheckItem("06.choose_dtype", "06.choose_dtype", 2.0, "choose")


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
        if "check" in cell.metadata.get("tags", []):
            cell.source = 'print("✓ all correct")'
    learner.cells.insert(3, nbformat.v4.new_code_cell("helper = 1"))
    del learner.cells[1]  # the setup cell, deleted
    rebuilt = restore(master, learner)
    sources = [c.source for c in rebuilt.cells]
    assert "helper = 1" in sources and not any("all correct" in s for s in sources)
    assert sources.count('ac.exercises.check("06.choose_dtype", choose)') == 1
    assert sources[0].startswith("# Setup")


def test_secret_seeds_are_stable_distinct_and_never_zero():
    seeds = {secret_seed("s", name) for name in exercises.names()}
    assert len(seeds) == len(exercises.names()) and 0 not in seeds
    assert secret_seed("s", "05.mfu") == secret_seed("s", "05.mfu") != secret_seed("t", "05.mfu")


def _payload(answer, seed):
    return {"observation": plain.dumps(exercises.get(CHOOSE.name).observe(answer, seed))}


def test_decide_passes_only_the_reference_results_at_the_secret_seed():
    seed = secret_seed("s", CHOOSE.name)
    right = exercises.solution(CHOOSE.name)
    assert decide(CHOOSE, _payload(right, seed), seed) == (2.0, "passed", "")
    points, status, message = decide(CHOOSE, _payload(right, 0), seed)  # seed-0 results replayed
    assert (points, status) == (0.0, "failed") and message


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
    points, got, message = decide(CHOOSE, payload, 123)
    assert (points, got) == (0.0, status) and words in message


def test_feedback_lists_every_item_in_plain_words():
    rows = [
        row("ann", "01_x", "01.a", 1.0, 1.0, "passed"),
        row("ann", "01_x", "quiz:q", 0.0, 2.0, "wrong", "a | pipe\nand a newline"),
    ]
    text = feedback_markdown("ann", rows)
    assert "**Total: 1 of 3 points.**" in text and "## 01_x (1 of 3)" in text
    assert "| quiz:q | 0 / 2 | wrong | a \\| pipe and a newline |" in text


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
    cmd = box.wrap(["python", "-m", "ipykernel"], tmp_path / "h", tmp_path / "i", {"K": "v"})
    text = " ".join(cmd)
    assert cmd[:3] == ["docker", "run", "--rm"] and "--network none" in text
    assert f"--memory {2**30}" in text and "--cap-drop ALL" in text and "--read-only" in text
    assert f"{sandbox.PACKAGE}:{sandbox.PACKAGE}:ro" in text
    assert f"type=tmpfs,destination={sandbox.PACKAGE / sandbox.HIDDEN}" in text
    assert f"{tmp_path / 'h'}:{sandbox.HOME}" in text and "-e K=v" in text
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


def _run_in_bwrap(tmp_path, script, env=None):
    home, ipc = tmp_path / "home", tmp_path / "ipc"
    home.mkdir(exist_ok=True)
    ipc.mkdir(exist_ok=True)
    cmd = sandbox.bwrap_command([sys.executable, "-c", script], home, ipc, env or {}, 2**33)
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
course = str(package / "exercises" / "lesson_06.py")
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


def test_bad_key_is_refused(tmp_path):
    (tmp_path / "key.json").write_text("[]")
    (tmp_path / "subs").mkdir()
    with pytest.raises(quiz.QuizSchemaError, match="not a quiz key"):
        grade_all(
            tmp_path / "subs", tmp_path / "key.json", tmp_path / "out.csv", masters=MASTER.parent
        )


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
