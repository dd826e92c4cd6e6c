"""Every notebook executes on CPU in smoke mode, once, as a learner's Run All before answering.

Papermill runs each lesson with its exercise blanks untouched (the run that ``executed/`` keeps,
stamped, for the website: conftest's ``executed_lesson``); the tests below read that one copy: no
cell failed, the lesson printed and plotted, every check said "Not done yet" and the lesson still
reached its quiz. That a
reference solution passes its check is ``tests/test_exercises.py``'s question (every exercise,
two seeds); that each check cell checks the blank above it is asked here without running anything.
"""

import re
import tempfile
import time
from pathlib import Path

import pytest
from conftest import NOTEBOOKS, has_tag, notebook, tagged

from amp_course.tooling.executed import printed

IDS = [p.stem for p in NOTEBOOKS]
STARTED = time.time()  # before any lesson of this session runs (they run after collection)
CHECK_CALL = re.compile(r"\bexercises\.check\(")


@pytest.mark.notebook
@pytest.mark.executes_lessons
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_papermill_smoke(path, executed_lesson):
    executed = executed_lesson(path)
    code = [c for c in executed.cells if c.cell_type == "code"]
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    # The lesson computed and showed something: printed text, and a figure where it plots.
    assert any(o.get("output_type") == "stream" for o in outputs)
    if any("matplotlib" in c.source for c in code):
        figures = [o for o in outputs if "image/png" in o.get("data", {})]
        assert figures, f"{path.name} imports matplotlib but showed no figure"
    # No progress bar: a saved copy would keep its first frame, "0%", as the text viewers show.
    bars = [o for o in outputs if "it/s]" in str(o.get("data", {}).get("text/plain", ""))]
    assert not bars, bars[:1]
    if path.stem[:2] in CORE:  # nothing that looks like a failure: notes go in the header line
        stderr = [printed(c, streams=("stderr",)) for c in code if printed(c, streams=("stderr",))]
        assert not stderr, stderr


CORE = ("00", "01", "02", "03", "04")  # the lessons a newcomer starts with


@pytest.mark.notebook
@pytest.mark.executes_lessons
@pytest.mark.parametrize(
    "path", [p for p in NOTEBOOKS if p.stem == "07_multi_gpu"], ids=["07_multi_gpu"]
)
def test_the_launches_leave_no_folder_in_the_temporary_directory(path, executed_lesson):
    """Lesson 07's ranks write their reports into a folder per launch; a run of the lesson leaves
    none of them in the learner's temporary directory."""
    executed_lesson(path)
    folders = [f for s in ("fsdp", "ddp") for f in Path(tempfile.gettempdir()).glob(f"amp-{s}-*")]
    left = [str(f) for f in folders if f.stat().st_mtime >= STARTED]
    assert not left, left


@pytest.mark.notebook
@pytest.mark.executes_lessons
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_run_all_with_blanks_untouched(path, executed_lesson):
    """Run All before answering: unfinished exercises say so and the lesson reaches its quiz."""
    executed = executed_lesson(path)
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), "a cell did not run"
    quiz = executed.cells[-1]  # the lesson ends with its quiz, which ran and printed
    assert quiz.cell_type == "code" and has_tag(quiz, "quiz") and "ac.quiz.show" in quiz.source
    assert printed(quiz, streams=("stdout",))
    for blank, check in zip(tagged(executed, "exercise"), tagged(executed, "check"), strict=True):
        name = blank.metadata["exercise"]["name"]
        said = printed(check, streams=("stdout",))
        assert f"{name}: Not done yet" in said, said[-2000:]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_each_check_cell_checks_the_blank_above_it(path):
    """Every exercise blank is followed by a check of its own name and symbol (what a run with the
    reference in the blank would pass), and no other cell calls ``check``."""
    cells = notebook(path).cells
    pairs = [(c, cells[i + 1]) for i, c in enumerate(cells) if has_tag(c, "exercise")]
    assert [check for _, check in pairs] == tagged(path, "check")
    for blank, check in pairs:
        name, symbol = blank.metadata["exercise"]["name"], blank.metadata["exercise"]["symbol"]
        call = f'ac.exercises.check("{name}", {symbol})'
        assert check.source.strip() == call, (path.name, check.source)
    others = [c.source for c in cells if CHECK_CALL.search(c.source) and not has_tag(c, "check")]
    assert not others, others
