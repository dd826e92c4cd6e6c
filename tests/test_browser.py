"""A learner's view: JupyterLab in Chromium runs a quiz cell; the checked answer is saved."""

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from conftest import CHROMIUM, CHROMIUM_ARGS, ROOT, free_port, require_chromium

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


@pytest.fixture
def lab(tmp_path):
    require_chromium()  # .ci/run installs it: in CI its absence is a failure, not a skip
    jupyter = Path(sys.executable).with_name("jupyter")
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    notebook.cells = [
        nbformat.v4.new_code_cell(
            'import amp_course as ac\nquiz = ac.quiz.show("00_scenario", "main-benefit")'
        )
    ]
    nbformat.write(notebook, tmp_path / "quiz.ipynb")
    port, token = free_port(), secrets.token_hex(16)
    home = tmp_path / "home"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "AMP_COURSE_OFFLINE": "1",
    }
    env.pop("AMP_COURSE_QUIZ_MODE", None)
    env.pop("AMP_COURSE_ANSWERS_DIR", None)
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
        from amp_course.grading import kill_tree

        kill_tree(server.pid)
        server.wait(timeout=30)
        log.close()
        shutil.rmtree(home, ignore_errors=True)


def test_quiz_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright

    base, token, folder = lab
    start = time.monotonic()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.goto(f"{base}/lab/tree/quiz.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_function(
                "window.jupyterapp && window.jupyterapp.shell.currentWidget"
                " && window.jupyterapp.shell.currentWidget.sessionContext"
                " && window.jupyterapp.shell.currentWidget.sessionContext.session",
                timeout=60_000,
            )
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            question = page.wait_for_selector(".amp-quiz-question", timeout=60_000)
            question.query_selector("label:has-text('Reduced memory usage')").click()
            question.query_selector("button:has-text('Check')").click()
            page.wait_for_selector(".amp-quiz-question :text('Correct')", timeout=20_000)
            assert "attempts: 1" in question.inner_text()
        finally:
            browser.close()
    answers = json.loads((folder / "00_scenario.answers.json").read_text())
    assert answers["lessons"]["00_scenario"]["main-benefit"] == {
        "value": 1,
        "attempts": 1,
        "correct": True,
    }
    assert time.monotonic() - start < 120
