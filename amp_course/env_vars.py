"""Every environment variable the course reads, named once, with what it means.

Readers use these names (``os.environ.get(env_vars.SMOKE)``), never the spelled string, so
``grep AMP_COURSE_`` finds one module (tests/test_env_vars.py keeps it so). The notebooks' setup
cell is the one exception: it runs before the package is importable, so ``lesson.SETUP_CELL``
writes these names into its text.
"""

from __future__ import annotations

import os

SMOKE = "AMP_COURSE_SMOKE"
OFFLINE = "AMP_COURSE_OFFLINE"
DATA = "AMP_COURSE_DATA"
EMULATE = "AMP_COURSE_EMULATE"
GRADING = "AMP_COURSE_GRADING"
ANSWERS_DIR = "AMP_COURSE_ANSWERS_DIR"
QUIZ_MODE = "AMP_COURSE_QUIZ_MODE"
QUIZ_SECRET = "AMP_COURSE_QUIZ_SECRET"
SIMULATE_COLAB = "AMP_COURSE_SIMULATE_COLAB"
SOURCE = "AMP_COURSE_SOURCE"
FAKE_CPU_FLAGS = "AMP_COURSE_FAKE_CPU_FLAGS"
FAKE_TIMES = "AMP_COURSE_FAKE_TIMES"
AUTOGRADER_ROOT = "AMP_COURSE_AUTOGRADER_ROOT"
AUTOGRADER_PYTHON = "AMP_COURSE_AUTOGRADER_PYTHON"
PROGRESS = "AMP_COURSE_PROGRESS"

MEANINGS = {
    SMOKE: "1/true: smoke mode (tiny sizes, the MNIST subset); 0/false: full; unset: a CPU's smoke",
    OFFLINE: "1: never download (torchvision's MNIST); the tests and CI set it",
    DATA: "a folder holding the course's data files, read before the shipped data/",
    EMULATE: "a smaller GPU to rehearse on this one (t4): its limits and dtypes (ac.emulation)",
    GRADING: "1 in a submission's grading kernel: the reference solutions are off limits",
    ANSWERS_DIR: "where quiz answer files are written (default: the notebook's folder)",
    QUIZ_MODE: "text or widgets: forces how a quiz renders",
    QUIZ_SECRET: "the instructor's salt for the quiz key (amp-course quiz publish)",
    SIMULATE_COLAB: "1: the setup cell acts as in Colab (clone and install); the tests set it",
    SOURCE: "the repository the Colab setup cell clones (default: the course's GitHub)",
    FAKE_CPU_FLAGS: "tests: CPU flags that replace /proc/cpuinfo's (ac.cpu.flags)",
    FAKE_TIMES: "tests: seconds per call for named measurements (ac.timing.measure)",
    PROGRESS: "0: no progress bars (the course's executor: a saved copy keeps a bar's first frame)",
    AUTOGRADER_ROOT: "Gradescope's run_autograder: where /autograder is (tests: a temporary one)",
    AUTOGRADER_PYTHON: "Gradescope's run_autograder: the Python that grades (default: its venv's)",
}


def flag(name: str) -> bool | None:
    """The variable ``name`` as a yes/no: True for 1/true/yes, False for 0/false/no, else None."""
    return yes_no(os.environ.get(name, ""))


def yes_no(text: str) -> bool | None:
    """``text`` as a yes/no, in any case: True for 1/true/yes, False for 0/false/no, else None."""
    value = text.strip().lower()
    if value in ("1", "true", "yes"):
        return True
    return False if value in ("0", "false", "no") else None
