"""The README's install command (`make course`) starts JupyterLab headless on notebooks/."""

import os
import signal
import subprocess
import time
import urllib.request

import pytest
from conftest import ROOT, free_port


@pytest.mark.skipif(
    not (ROOT / ".venv" / ".amp-course-installed").exists(),
    reason="needs the environment `make setup` builds",
)
def test_make_course_serves_jupyterlab():
    port = free_port()
    proc = subprocess.Popen(
        ["make", "course", "HEADLESS=1", f"PORT={port}", "JUPYTER_ARGS=--ServerApp.token=amp"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/contents/00_scenario.ipynb?token=amp", timeout=2
                ) as response:
                    assert response.status == 200
                    break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("JupyterLab did not answer within 90 s")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token=amp", timeout=5) as page:
            assert b"JupyterLab" in page.read()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        output = proc.communicate(timeout=30)[0]
    assert f"http://127.0.0.1:{port}/lab" in output  # the URL is printed for the learner
