"""Shared fixtures: repository paths, a GPU marker that skips without CUDA, and the split of the
suite over pytest-xdist workers."""

import importlib
import os
import re
import socket
from pathlib import Path

# Under pytest-xdist every worker (and every kernel or process it starts, which inherit this
# environment) gets its share of the cores: torch reads OMP_NUM_THREADS when it is imported, and
# two workers each spinning two threads on two cores run slower than one worker alone.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

import pytest  # noqa: E402

from amp_course import cpu  # noqa: E402
from amp_course.paths import ROOT, lesson_notebooks  # noqa: E402

if ROOT != Path(__file__).resolve().parents[1]:
    raise pytest.UsageError(
        f"The tests in {Path(__file__).parent} import amp_course from {ROOT}, another checkout: "
        "run `python -m pytest` from this checkout's root."
    )
NOTEBOOKS = lesson_notebooks(ROOT)
# Seeds a grader may draw (not the notebook's 0, nor a lab check cell's drawn 1).
SECRET_SEEDS = (12345, 987654321)
# A folded "Deeper" aside in a lesson's Markdown (tests/test_reading_time.py, test_glossary.py).
DEEPER = re.compile(
    r"<details>\n<summary><b>Deeper:</b> [^\n]+</summary>\n\n.*?\n\n</details>", re.S
)
# Debian's chromium drives the browser tests (Playwright never downloads a browser here).
# The metadata of a notebook a test writes: run by the Python 3 kernel.
PYTHON_KERNEL = {
    "kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}
}
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Every machine runs the tests on the same shipped digits, with no download attempt.
os.environ.setdefault("AMP_COURSE_OFFLINE", "1")
# ATEN_CPU_CAPABILITY set by hand: the tests, and the kernels and processes they start, compile
# into the cap's own torch.compile cache, never the one uncapped runs reuse.
cpu.separate_inductor_cache()


# Test files whose module-scoped fixtures are expensive (a grading run, a JupyterLab server, a
# built site): their tests stay together on one xdist worker so the fixture runs once.
SHARED_FIXTURE_FILES = {
    "test_attention.py",
    "test_autocast_lists.py",
    "test_autocast_trace.py",
    "test_bench.py",
    "test_browser.py",
    "test_checkpointing.py",
    "test_dist_train.py",
    "test_figures.py",
    "test_grading.py",
    "test_lesson_00.py",
    "test_scaling.py",
    "test_training_loops.py",
    "test_wheel.py",
}


def pytest_configure(config):
    """Refuse the pytest and pytest-xdist pair that loses the groups below without a word."""
    if getattr(config.option, "dist", "no") != "loadgroup":
        return
    from importlib.metadata import version

    from packaging.version import Version

    if Version(pytest.__version__) >= Version("9.2") and Version(version("pytest-xdist")) < Version(
        "3.9"
    ):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with pytest-xdist {version('pytest-xdist')} ignores "
            "--dist loadgroup (pytest-dev/pytest-xdist#1386), and the tests that share an "
            "expensive fixture would each build it: install the test extra (pytest<9.2) or run "
            "with -n 0."
        )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    import torch  # here, not at the top: pytest-xdist's controller starts its workers sooner

    skip = None if torch.cuda.is_available() else pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if skip is not None and "gpu" in item.keywords:
            item.add_marker(skip)
        name = item.path.name
        if "executes_lessons" in item.keywords:
            # A lesson's tests share its one run (``executed_lesson``): one worker; lessons spread.
            item.add_marker(pytest.mark.xdist_group(f"lesson-{executed_lesson_of(item).stem}"))
        elif name in SHARED_FIXTURE_FILES:
            item.add_marker(pytest.mark.xdist_group(name))


def executed_lesson_of(item) -> Path:
    """The lesson a test marked ``executes_lessons`` runs (its ``path`` parameter)."""
    return Path(item.callspec.params["path"])


def lessons_executed_here(session) -> list[Path]:
    """The lessons this session's tests execute, in collection order (each once)."""
    marked = [i for i in session.items if "executes_lessons" in i.keywords]
    return list(dict.fromkeys(executed_lesson_of(item) for item in marked))


# Each lesson's cell limit; a benchmark measures the lessons' time (make bench-smoke).
LESSON_CELL_TIMEOUT_S = 120


def once(verdict: Path, make) -> str:
    """Call ``make()`` once for every process that asks with the same ``verdict`` file (xdist's
    workers): the first to take its lock calls it, the others wait for it; then each gets what
    ``make`` raised, as a message, or "" when it returned."""
    from filelock import FileLock

    with FileLock(f"{verdict}.lock"):
        if not verdict.exists():
            try:
                make()
            except Exception as error:
                verdict.write_text(f"{type(error).__name__}: {error}"[:4000] or "failed")
                raise
            verdict.write_text("")
    return verdict.read_text()


@pytest.fixture(scope="session")
def executed_lesson(tmp_path_factory):
    """``executed_lesson(path)``: the lesson run by papermill (blanks untouched, smoke mode, the
    device DEVICE="auto" picks) into ``executed/``, stamped, once per session however many xdist
    workers ask (``once``, pytest-xdist's "run a session fixture once" recipe)."""
    from amp_course.device import pick_device
    from amp_course.tooling.runs import execute

    # The session's folder, shared by its workers (each worker's own is below it).
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    # The quiz writes its answer file (with the learner's choice order) when it is shown: keep it
    # out of notebooks/, where a concurrent run of the same lesson would share it.
    answers = tmp_path_factory.mktemp("answers")

    def executed(path):
        import nbformat

        path = Path(path)
        out = ROOT / "executed" / path.name

        def run():
            out.parent.mkdir(exist_ok=True)
            with execute.environment(AMP_COURSE_ANSWERS_DIR=str(answers)):
                execute.run_lesson(
                    path,
                    out,
                    smoke=True,
                    device=pick_device("auto"),
                    timeout_s=LESSON_CELL_TIMEOUT_S,
                    solved=False,
                )

        failure = once(shared / f"{path.stem}.executed", run)
        if failure:
            pytest.fail(f"{path.name} did not execute: {failure}", pytrace=False)
        return nbformat.read(out, as_version=4)

    return executed


def require(condition: bool, message: str) -> None:
    """Skip when ``condition`` is false; under CI (which installs everything) fail instead."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_chromium() -> None:
    require(Path(CHROMIUM).exists(), "Debian's chromium is missing (apt-get install chromium)")


def kill_tree(pid: int) -> None:
    """Kill a server started in its own session and every process under it (its kernels too)."""
    import signal

    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        children = []
    for target in [pid] + [child.pid for child in children]:
        for kill in (os.killpg, os.kill):
            try:
                kill(target, signal.SIGKILL)
            except OSError:
                pass


def notebook(lesson):
    """A committed notebook: ``lesson`` is its name (``"03_grad_scaler"``), a path, or a notebook
    already read (returned as it is)."""
    import nbformat

    if not isinstance(lesson, (str, Path)):
        return lesson
    path = (
        Path(lesson) if Path(lesson).suffix == ".ipynb" else ROOT / "notebooks" / f"{lesson}.ipynb"
    )
    return nbformat.read(path, as_version=4)


def has_tag(cell, tag: str) -> bool:
    return tag in cell.get("metadata", {}).get("tags", [])


def tagged(lesson, tag: str) -> list:
    """The cells of ``lesson`` (as ``notebook`` takes it) that carry ``tag``, in notebook order."""
    return [cell for cell in notebook(lesson).cells if has_tag(cell, tag)]


def run_tagged(lesson, *tags: str, namespace: dict | None = None, one: bool = True) -> dict:
    """Execute the cells of ``lesson`` tagged with each of ``tags`` (tags in the order given, each
    tag's cells in notebook order) in ``namespace``, as the notebook runs them; return it.

    The one way tests run a notebook's cells: a cell a test executes carries a tag. With
    ``one`` (the default) each tag must mark exactly one cell. Whole lessons run through the
    course's executor (``amp_course.tooling.runs.execute``, see ``executed_lesson``); single cells
    run here, in the test's process, because the test inspects what they define.
    """
    nb, name = notebook(lesson), _name(lesson)
    namespace = {} if namespace is None else namespace
    for tag in tags:
        cells = tagged(nb, tag)
        if one and len(cells) != 1:
            raise LookupError(f"{len(cells)} cells of {name} are tagged {tag!r}, not one")
        for cell in cells:
            _run_cell(cell, namespace, f"{name} [{tag}]")
    return namespace


def _name(lesson) -> str:
    return Path(lesson).stem if isinstance(lesson, (str, Path)) else "notebook"


def _run_cell(cell, namespace: dict, where: str) -> None:
    exec(compile(cell.source, where, "exec"), namespace)


def lab_text(lesson, name: str) -> str:
    """The markdown of the lab whose blank defines exercise ``name``, from its heading to the blank:
    what a learner reads before writing the fix."""
    text = []
    for cell in notebook(lesson).cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## Lab "):
            text = []
        if cell.get("metadata", {}).get("exercise", {}).get("name") == name:
            return "\n".join(text)
        if cell.cell_type == "markdown":
            text.append(cell.source)
    raise LookupError(f"no blank for {name} in {_name(lesson)}")


def broken_versions(lesson) -> dict:
    """{lab name: the broken function exactly as a labs notebook shows it} (cells tagged broken),
    each cell run in a fresh copy of what the notebook's setup gives it: torch, and the labs' kit
    as ``lab`` (``labs_bug_hunts`` imports ``amp_course.labs.bug_hunts``)."""
    import torch

    kit = importlib.import_module(f"amp_course.labs.{_name(lesson).removeprefix('labs_')}")
    found = {}
    for cell in tagged(lesson, "broken"):
        scope = {"torch": torch, "lab": kit}
        _run_cell(cell, scope, f"{_name(lesson)} [broken]")
        found[cell.metadata["lab"]["name"]] = scope[cell.metadata["lab"]["symbol"]]
    return found


def clone_checkout(folder: Path) -> Path:
    """A clone of this checkout in ``folder``, its uncommitted work on top (committed in the
    clone, so the clone's ``git status`` starts clean): what a fresh clone of this tree holds."""
    import shutil
    import subprocess

    clone = folder / "course"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    changed = subprocess.run(
        ["git", "ls-files", "-m", "-o", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in changed:  # uncommitted changes travel too, so the test sees this tree
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    subprocess.run(["git", "add", "-A"], cwd=clone, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", "--allow-empty"],
        cwd=clone,
        check=True,
    )
    return clone


def processes_with(token: str) -> list[int]:
    """The pids of live processes whose command line holds ``token`` (a zombie is dead, waiting
    to be reaped, and is not counted)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and token.encode() in (entry / "cmdline").read_bytes():
                status = (entry / "status").read_text()
                if "\nState:\tZ" not in status:
                    found.append(int(entry.name))
        except OSError:
            pass
    return found


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def fake_cpu(monkeypatch):
    """Make the course see a CPU with the given flags (a string as /proc/cpuinfo lists them) and
    no oneDNN cap: a rehearsal that runs the suite (``make test REHEARSE_CPU=avx2``) caps this
    machine's kernels, not the faked CPU's."""
    from amp_course import cpu
    from amp_course.env_vars import FAKE_CPU_FLAGS

    def set_flags(flags: str) -> None:
        for name in cpu.ONEDNN_CAP_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv(FAKE_CPU_FLAGS, flags)

    return set_flags


@pytest.fixture
def root():
    return ROOT


def quiz_question(lesson: str, question_id: str) -> dict:
    """One question of a lesson's quiz source (``quizzes/source/<lesson>.yaml``)."""
    import yaml

    doc = yaml.safe_load((ROOT / "quizzes" / "source" / f"{lesson}.yaml").read_text())
    (found,) = [q for q in doc["questions"] if q["id"] == question_id]
    return found


def quiz_key(lesson: str, question_id: str) -> dict[str, bool]:
    """A quiz question's choices: text -> marked correct."""
    return {c["text"]: c["correct"] for c in quiz_question(lesson, question_id)["choices"]}


def quiz_answers(lesson: str, question_id: str) -> list[str]:
    """The choices a quiz question's key marks correct, in the source's order."""
    return [text for text, correct in quiz_key(lesson, question_id).items() if correct]
