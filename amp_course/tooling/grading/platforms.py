"""Grading where courses already grade: one Gradescope submission into ``results.json``, a class
into a gradebook Canvas imports, and the zip a Gradescope autograder is made from.

Gradescope runs its autograder once per submission, in a container of its own built from the
zip's ``setup.sh`` on its Ubuntu image: the submission's files lie in ``/autograder/submission``,
the zip's files in ``/autograder/source``, and ``run_autograder`` must leave
``/autograder/results/results.json``. The grading itself is the course's (``run.grade_all``),
sandboxed with bubblewrap where the container allows it and guarded without one where it does not.
"""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path

from ...env_vars import AUTOGRADER_PYTHON, AUTOGRADER_ROOT
from ...paths import DATA, NOTEBOOKS, PACKAGE_DIR, QUIZZES, README, ROOT
from ...quiz import atomic_write_text
from .exports import canvas_csv, check_roster, gradescope_results, read_roster, same_name
from .matching import MAC_ZIP, hidden
from .reports import keep_previous
from .run import grade_all, student_folders
from .settings import Settings, SettingsError

# torch's CPU build for the autograder's image: the course's pinned pair (Makefile's TORCH_PIN,
# checked by a test), from PyTorch's CPU index (a tenth of the CUDA build's size).
TORCH_PIN = ("torch==2.14.1", "torchvision==0.29.1")
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# What of the checkout the zip carries: the package builds from these (pyproject's hatch config).
COURSE_FILES = (
    Path("pyproject.toml"),
    README,
    PACKAGE_DIR.relative_to(ROOT),
    QUIZZES,
    DATA,
    NOTEBOOKS,
)
ROOT_ENV, PYTHON_ENV = AUTOGRADER_ROOT, AUTOGRADER_PYTHON  # read by run_autograder


def gradable_notebooks(submission: Path) -> list[Path]:
    """The notebooks of one student's files the grader can take: no hidden file (Jupyter's
    checkpoints, a Mac's "._" copies) and nothing in a Mac zip's ``__MACOSX``."""
    return [
        p
        for p in sorted(submission.rglob("*.ipynb"))
        if p.is_file()
        and not hidden(p, submission)
        and MAC_ZIP not in p.relative_to(submission).parts
    ]


def grade_gradescope(submission, settings: Settings, out) -> int:
    """Grade one student's files (a Gradescope ``submission/`` folder) into ``out``
    (``results.json``) and return 0 once it is written, whatever the submission held.

    Gradescope's contract is the file, not the exit status: its troubleshooting page says "The
    autograder failed to execute correctly" "is returned when the autograder does not produce a
    valid JSON file in /autograder/results/results.json", and its specification says only that
    run_autograder must produce that file and that its stdout is kept "for displaying back to the
    instructor". Its documentation never says what a non-zero exit does, so a submission's
    problem (no notebook, a file that is not one) is said in the results, which the student sees,
    and on stdout for the instructor, with exit status 0; an error before the file is written
    (a key or masters that do not fit) still exits non-zero, and Gradescope reports it."""
    submission, out = Path(submission), Path(out)
    if not submission.is_dir():
        raise SettingsError(f"{submission} is not a folder holding one student's files")
    notebooks = gradable_notebooks(submission)
    unreadable = [p.name for p in notebooks if not _is_json(p)]
    with tempfile.TemporaryDirectory(prefix="amp-gradescope-") as scratch:
        folder = Path(scratch) / "submissions" / "submission"
        shutil.copytree(submission, folder, symlinks=True)  # links stay links: graded as such
        rows = grade_all(folder.parent, settings, Path(scratch) / "gradebook.csv")
    results = gradescope_results(rows)
    problem = None
    if not notebooks:
        problem = f"{submission} holds no notebook (.ipynb): nothing of the exercises was graded"
    elif unreadable:
        problem = f"not a notebook (not JSON): {', '.join(unreadable)}"
    if problem:
        results["output"] = f"{problem}.\n{results['output']}"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(results, indent=1) + "\n")
    if problem:
        print(f"note: {problem} (the student sees it in {out})", flush=True)
    return 0


def _is_json(path: Path) -> bool:
    try:
        json.loads(path.read_text(encoding="utf-8"))
        return True
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False


def grade_canvas(submissions, settings: Settings, out, roster=None, feedback=None) -> list:
    """Grade a class; ``out`` is the gradebook Canvas imports, the item-by-item CSV lies beside it
    (``<out>-items.csv``). The roster is read before any grading, so a bad one costs nothing."""
    out = Path(out)
    names = read_roster(roster) if roster else None
    items = out.with_name(f"{out.stem}-items.csv")
    feedback = Path(feedback) if feedback else out.with_name(f"{out.stem}-feedback")
    if names is not None and Path(submissions).is_dir():
        outputs = (out, items, feedback)
        folders = [f.name for f in student_folders(Path(submissions), outputs)]
        check_roster(folders, names)
        absent = sorted(set(names) - {same_name(f) for f in folders})
        if absent:  # Canvas keeps what it had for them: the import has no line of theirs
            print(f"note: no submission folder for {', '.join(absent)} (in the roster)", flush=True)
    rows = grade_all(submissions, settings, items, feedback=feedback)
    keep_previous(out)
    atomic_write_text(out, canvas_csv(rows, settings.lessons, names))
    return rows


SETUP = f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, on its Ubuntu image: Python, bubblewrap (the sandbox, where
# the container allows it), torch's CPU build and the course with its grading extra.
set -euo pipefail
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv python3-pip bubblewrap
python3 -m venv /autograder/venv
/autograder/venv/bin/python -m pip install -q --index-url {TORCH_CPU_INDEX} {" ".join(TORCH_PIN)}
/autograder/venv/bin/python -m pip install -q "/autograder/source/course[grade]"
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this once per submission: grade /autograder/submission into results.json.
set -uo pipefail
root="${{{root_env}:-/autograder}}"
python="${{{python_env}:-$root/venv/bin/python}}"
mkdir -p "$root/results"
exec "$python" -m amp_course.cli grade "$root/submission" --format gradescope \\
    --key "$root/source/key.json" --masters "$root/source/course/notebooks" \\
    --out "$root/results/results.json"{lessons}
"""


def build_autograder(key, out, lessons=None) -> Path:
    """The zip Gradescope's autograder takes: ``setup.sh``, ``run_autograder``, the key and the
    course's sources. ``lessons`` limits the assignment (every lesson of the key by default)."""
    key, out = Path(key), Path(out)
    settings = Settings.load(key, lessons=lessons, sandbox_kind="none")  # refuses a misfit key
    # The zip's key: the chosen lessons' questions only, and the secret, without which neither
    # a graded question's answer (its hashes are salted with it) nor an exercise's hidden inputs
    # (drawn from it per submission, verdicts.secret_seed) can be checked.
    chosen_key = {
        **settings.key,
        "lessons": {
            name: entries
            for name, entries in settings.key["lessons"].items()
            if name in settings.lessons
        },
    }
    chosen = f" \\\n    --lessons {','.join(lessons)}" if lessons else ""
    run = RUN.format(root_env=ROOT_ENV, python_env=PYTHON_ENV, lessons=chosen)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP), ("run_autograder", run)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | 0o755) << 16  # executable once unpacked
            archive.writestr(info, text)
        archive.writestr("key.json", json.dumps(chosen_key, indent=1) + "\n")
        for name in COURSE_FILES:
            path = ROOT / name
            files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            for file in files:
                if "__pycache__" not in file.parts and not file.name.endswith(".answers.json"):
                    archive.write(file, f"course/{file.relative_to(ROOT)}")
    return out
