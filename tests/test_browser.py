"""A learner's view in JupyterLab and Chromium: quiz cells (answers saved, long choices wrap,
feedback after a wrong then a right answer) and lesson 00's memory chart; screenshots: executed/."""

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PYTHON_KERNEL,
    ROOT,
    free_port,
    has_tag,
    kill_tree,
    require_chromium,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def write_notebook(path, *sources):
    notebook = nbformat.v4.new_notebook()
    notebook.metadata.update(PYTHON_KERNEL)
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a scratch folder; each test writes the notebooks it opens."""
    require_chromium()  # .ci/run installs it: in CI its absence is a failure, not a skip
    jupyter = Path(sys.executable).with_name("jupyter")
    tmp_path = tmp_path_factory.mktemp("lab")
    port, token = free_port(), secrets.token_hex(16)
    home = tmp_path / "home"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "AMP_COURSE_OFFLINE": "1",
    }
    # A learner's kernel: widgets where they render, inline figures, answers beside the notebook.
    for name in ("AMP_COURSE_QUIZ_MODE", "AMP_COURSE_ANSWERS_DIR", "MPLBACKEND"):
        env.pop(name, None)
    cmd = [
        str(jupyter),
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={tmp_path}",
        "--LabApp.expose_app_in_browser=True",
        "--ServerApp.disable_check_xsrf=False",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=None",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(tmp_path / "lab.log", "w")
    server = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(
                        "JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:]
                    )
                time.sleep(0.5)
        yield base, token, tmp_path
    finally:
        kill_tree(server.pid)
        server.wait(timeout=30)
        log.close()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for the module's tests (each page gets a fresh context of its own): a launch
    with Playwright's driver costs about a second of CPU."""
    from playwright.sync_api import sync_playwright

    require_chromium()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def notebook_page(lab, chromium, name, width=1000, run_all=True):
    """A page showing notebook ``name`` of the lab's folder, every cell run (if ``run_all``), in a
    browser context of its own (no cookies, storage or cache from another test's page)."""
    base, token, _ = lab
    context = chromium.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{base}/lab/tree/{name}?reset&token={token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function(
            "window.jupyterapp && window.jupyterapp.shell.currentWidget"
            " && window.jupyterapp.shell.currentWidget.sessionContext"
            " && window.jupyterapp.shell.currentWidget.sessionContext.session",
            timeout=60_000,
        )
        if run_all:
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        # JupyterLab's notifications (news, updates) would cover the screenshots.
        page.add_style_tag(content=".Toastify { display: none !important; }")
        yield page
    finally:
        context.close()


def published_choices(lesson, qid) -> list[str]:
    doc = yaml.safe_load((ROOT / "quizzes" / f"{lesson}.yaml").read_text())
    (entry,) = [q for q in doc["questions"] if q["id"] == qid]
    return entry["choices"]


def published_index(lesson, qid, text):
    return published_choices(lesson, qid).index(text)


def test_quiz_in_jupyterlab(lab, chromium):
    _, _, folder = lab
    write_notebook(
        folder / "quiz.ipynb",
        'import amp_course as ac\nquiz = ac.quiz.show("00_scenario", "main-benefit")',
    )
    # Each wait below has its own time limit: a quiz that never renders or never answers fails
    # there; how long JupyterLab takes on a loaded machine is not this test's question.
    with notebook_page(lab, chromium, "quiz.ipynb") as page:
        question = page.wait_for_selector(".amp-quiz-question", timeout=60_000)
        question.query_selector("label:has-text('Less memory and faster training')").click()
        question.query_selector("button:has-text('Check')").click()
        page.wait_for_selector(".amp-quiz-question :text('Correct')", timeout=20_000)
        assert "attempts: 1" in question.inner_text()
    answers = json.loads((folder / "00_scenario.answers.json").read_text())
    assert answers["lessons"]["00_scenario"]["main-benefit"] == {
        "value": published_index("00_scenario", "main-benefit", "Less memory and faster training"),
        "attempts": 1,
        "correct": True,
    }


# A single-choice question whose right answer is long, and a checkbox question with a long label
# (one such label was once cut off).
LONG_SINGLE = ("10_where_time_goes", "same-flops-more-bytes", "nn.MultiheadAttention is sequence")
WRONG_SINGLE = "torchvision's dropout layers still draw a mask"
WRONG_EXPLAINED = "F.dropout returns its input"  # its explanation, shown once it is chosen
LONG_CHECKBOX = ("06_debugging_nan", "fixes", "Run the span from where values pass 65504")

# For every choice label of the visible quiz: is its text cut off, or outside the question?
LAYOUT_JS = """
() => [...document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .amp-quiz-question')].flatMap(question => {
  const area = question.closest('.jp-OutputArea-output').getBoundingClientRect();
  return [...question.querySelectorAll(
      '.widget-radio-box label, .widget-checkbox .widget-label-basic')]
    .filter(label => label.innerText.replace(/\u200b/g, '').trim())  // skip empty descriptions
    .map(label => {
      const range = document.createRange();
      range.selectNodeContents(label);
      const text = range.getBoundingClientRect();  // where the words are drawn
      const lineHeight = parseFloat(getComputedStyle(label).lineHeight) || 20;
      return {text: label.innerText, clipped: label.scrollWidth > label.clientWidth + 1,
              inside: text.left >= area.left - 1 && text.right <= area.right + 1,
              lines: Math.round(text.height / lineHeight)};
    });
})
"""


def test_long_choices_wrap_and_feedback_teaches(lab, chromium):
    _, _, folder = lab
    write_notebook(
        folder / "long.ipynb",
        "import amp_course as ac\n"
        f"single = ac.quiz.show({LONG_SINGLE[0]!r}, {LONG_SINGLE[1]!r})\n"
        f"several = ac.quiz.show({LONG_CHECKBOX[0]!r}, {LONG_CHECKBOX[1]!r})",
    )
    with notebook_page(lab, chromium, "long.ipynb", width=900) as page:
        page.wait_for_selector(".amp-quiz-question >> nth=1", timeout=60_000)
        labels = page.evaluate(LAYOUT_JS)
        assert len(labels) >= 6, labels
        for label in labels:
            assert not label["clipped"] and label["inside"], label
        for prefix in (LONG_SINGLE[2], LONG_CHECKBOX[2]):
            (long,) = [label for label in labels if prefix in label["text"]]
            assert long["lines"] >= 2, long  # wrapped onto more lines, not cut off
        question = page.locator(".amp-quiz-question").nth(0)
        # A wrong first answer: the verdict and the explanation of that choice, nothing more.
        question.locator("label", has_text=WRONG_SINGLE).click()
        question.locator("button", has_text="Check").click()
        feedback = question.locator(".amp-quiz-feedback")
        feedback.locator(".amp-quiz-verdict", has_text="Not quite").wait_for(timeout=20_000)
        assert feedback.locator("li").count() == 1
        assert WRONG_EXPLAINED in feedback.inner_text() and "Try again" in feedback.inner_text()
        # Then the right one: every choice explained, the chosen one first and marked right.
        question.locator("label", has_text=LONG_SINGLE[2]).click()
        question.locator("button", has_text="Check").click()
        feedback.locator(".amp-quiz-verdict", has_text="Correct").wait_for(timeout=20_000)
        items = feedback.locator("li")
        assert items.count() == len(published_choices(*LONG_SINGLE[:2]))
        assert LONG_SINGLE[2] in items.nth(0).inner_text() and "right" in items.nth(0).inner_text()
        assert "attempts: 2" in question.inner_text()
        out = ROOT / "executed"
        out.mkdir(exist_ok=True)
        question.screenshot(path=str(out / "quiz_long_choice.png"))
    answers = json.loads((folder / f"{LONG_SINGLE[0]}.answers.json").read_text())
    record = answers["lessons"][LONG_SINGLE[0]][LONG_SINGLE[1]]
    assert record["attempts"] == 2 and record["correct"] is True


def test_lesson_00_memory_chart(lab, chromium):
    """Lesson 00 up to its memory chart, run in JupyterLab; the chart is kept for review."""
    _, _, folder = lab
    lesson = nbformat.read(ROOT / "notebooks" / "00_scenario.ipynb", as_version=4)
    sources = []
    for cell in lesson.cells[1:]:  # the setup cell's job is done by PYTHONPATH here
        if cell.cell_type == "code":
            sources.append(cell.source)
        if has_tag(cell, "memory-chart"):
            break
    write_notebook(folder / "memory.ipynb", "import amp_course as ac", *sources)
    with notebook_page(lab, chromium, "memory.ipynb") as page:
        chart = page.locator(".jp-Cell").nth(len(sources)).locator(".jp-OutputArea-output img")
        chart.wait_for(timeout=150_000)
        box = chart.bounding_box()
        assert box["width"] > 300 and box["height"] > 100
        out = ROOT / "executed"
        out.mkdir(exist_ok=True)
        chart.screenshot(path=str(out / "00_memory_chart.png"))


# How much taller a <pre>'s text is as shown than with no line wrapped by the browser.
WRAPPED_PX_JS = """
pre => {
  const range = document.createRange();
  range.selectNodeContents(pre);
  const shown = range.getBoundingClientRect().height;
  pre.style.whiteSpace = 'pre';
  const unwrapped = range.getBoundingClientRect().height;
  pre.style.whiteSpace = '';
  return shown - unwrapped;
}
"""
DIRTY_JS = "window.jupyterapp.shell.currentWidget.context.model.dirty"
KERNEL_IDLE_JS = (
    "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
    " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'"
)


def test_bit_inspector_and_a_failed_check_in_jupyterlab(lab, chromium):
    """A notebook with a lesson's metadata opens unmodified (no unsaved-changes dot). Where
    widgets render, the inspector is one widget: a typed value keeps its exact value, an overflow
    is named, the slider shows a readout. A wrong exercise answer shows its ✗ line, no traceback,
    and says that Run All stopped there.

    JupyterLab writes the kernel's language_info into a notebook as it opens, Python version
    included; the lessons store one version (tests/test_notebook_files.py), so on another Python
    the copy gets this interpreter's version and everything else is checked.
    """
    _, _, folder = lab
    write_notebook(
        folder / "bits.ipynb",
        "import amp_course as ac\nac.inspector.show(0.1)",
        'ac.exercises.check("01.bit_fields", lambda value, dtype: (0, 0, 0))',
        'print("the cell below the check")',
    )
    bits = nbformat.read(folder / "bits.ipynb", as_version=4)
    bits.metadata = nbformat.read(ROOT / "notebooks" / "01_number_formats.ipynb", 4).metadata
    bits.metadata["language_info"]["version"] = sys.version.split()[0]
    nbformat.write(bits, folder / "bits.ipynb")
    with notebook_page(lab, chromium, "bits.ipynb", run_all=False) as page:
        page.wait_for_function(KERNEL_IDLE_JS, timeout=60_000)
        page.wait_for_timeout(2000)  # time for kernel info to reach the notebook's metadata
        assert page.evaluate(DIRTY_JS) is False  # opened, nothing run: not marked unsaved
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        box = page.locator(".jp-OutputArea-output .widget-text input")
        box.wait_for(timeout=60_000)
        inspector = page.locator(".jp-Cell").nth(0).locator(".jp-OutputArea-output")
        assert inspector.count() == 1  # displayed once
        box.fill("65504")
        box.press("Enter")
        table = inspector.locator("table")
        page.wait_for_function(
            "document.querySelector('.jp-OutputArea-output table')"
            " && document.querySelector('.jp-OutputArea-output table')"
            ".innerText.includes('largest finite')",
            timeout=20_000,
        )
        page.wait_for_timeout(1000)  # time for the slider's echo to come back, if it would
        assert box.input_value() == "65504" and "value = 65504.0" in inspector.inner_text()
        assert "fp16" in table.inner_text()
        readout = inspector.locator(".widget-readout")
        assert readout.inner_text().strip() == "6.55e+4", readout.inner_text()
        box.fill("65520")
        box.press("Enter")
        page.wait_for_function(
            "document.querySelector('.jp-OutputArea-output table')"
            ".innerText.includes('overflow: rounds to +inf')",
            timeout=20_000,
        )
        assert "saturated: clamped to 448" in table.inner_text() or "NaN" in table.inner_text()
        # The check cell: the verdict line, no traceback through the course's code, no Out[ ].
        check = page.locator(".jp-Cell").nth(1)
        check.locator(".jp-OutputArea-output", has_text="01.bit_fields").wait_for(timeout=60_000)
        shown = check.inner_text()
        assert "✗ 01.bit_fields: decompose(1.0, torch.float32) returned" in shown, shown
        assert "Traceback" not in shown and ".py" not in shown and "ExerciseFailed" not in shown
        # It says that Run All stopped there, and the cell below has indeed not run.
        assert "Run All stops at this failed check" in shown, shown
        below = page.locator(".jp-Cell").nth(2)
        assert below.locator(".jp-InputPrompt").inner_text().strip() == "[ ]:"
        assert "the cell below the check" not in below.locator(".jp-OutputArea").inner_text()
        # Its lines fit the box as printed: the browser wraps none of them (so breaks no word):
        # the text is as tall as it is where lines never wrap.
        wrapped = check.locator(".jp-OutputArea-output pre").evaluate(WRAPPED_PX_JS)
        assert wrapped < 1, wrapped
