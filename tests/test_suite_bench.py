"""The suite benchmark (``amp-course suite-bench``) reads pytest's own account of a run: the
duration, the counts and the slowest tests, from a real pytest run's output."""

import os
import subprocess
import sys

import pytest

from amp_course import cli
from amp_course.paths import ROOT
from amp_course.tooling.runs import suite

TESTS = """
import time

def test_quick():
    pass

def test_slow():
    time.sleep(0.3)

def test_wrong():
    assert 1 == 2
"""


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    """A real pytest run's output (three tests, one failing), with the benchmark's options."""
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "test_tiny.py").write_text(TESTS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
        + [f"--durations={suite.SLOWEST}", str(folder)],
        cwd=folder,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    return done.stdout + done.stderr


def test_a_pass_is_read_from_pytests_own_lines(output):
    record = suite.parse(output)
    assert record["counts"] == {"failed": 1, "passed": 2}
    assert 0.3 <= record["seconds"] < 60
    assert record["slowest"][0]["test"].endswith("test_tiny.py::test_slow")
    assert record["slowest"][0]["when"] == "call" and record["slowest"][0]["seconds"] >= 0.3


def test_a_rehearsal_is_reported_beside_native_passes_and_a_failure_misses_the_target(output):
    record = suite.parse(output)
    passes = [
        {**record, "seconds": seconds, "kind": kind, "returncode": code}
        for seconds, kind, code in [(230.0, "avx2", 0), (190.0, None, 0), (250.0, "avx2", 0)]
    ]
    for one in passes:
        one["kind"] = one["kind"] or "native"
    machine = {"device": "CPU Test (AVX512)", "date": "2026-12-05", "versions": {"torch": "2.x"}}
    rehearsal = {"key": "avx2", "kind": "a CPU without native bf16", "caps": {"A": "avx2"}}
    bench = suite.report(passes, {**machine, "rehearsal": rehearsal})
    assert bench["median_s"] == {"avx2": 240.0, "native": 190.0}
    assert bench["met"] is True  # the rehearsal's median, 240 s, is within the target
    text = suite.markdown(bench)
    assert "rehearsing a CPU without native bf16" in text
    assert "Median: avx2 240.0 s, native 190.0 s. Target met (avx2): yes." in text
    assert "| 2 | native | 190.0 | 1 failed, 2 passed | 0 |" in text
    assert "test_tiny.py::test_slow`" in text
    passes[0]["returncode"] = 1
    assert suite.report(passes, {**machine, "rehearsal": rehearsal})["met"] is False
    assert suite.name(bench) == "cpu-test-avx512-rehearsing-avx2"


def test_output_without_a_summary_is_a_clear_error():
    with pytest.raises(ValueError, match="no summary line; it ended: ImportError: no module"):
        suite.parse("collecting ...\nImportError: no module named torch\n")


def test_the_command_is_listed_and_refuses_no_passes(capsys):
    with pytest.raises(SystemExit) as status:
        cli.main(["suite-bench", "--passes", "0"])
    assert status.value.code == 2 and "--passes must be 1 or more" in capsys.readouterr().err
    assert suite.command()[:3] == [sys.executable, "-m", "pytest"]


def test_the_benchmark_sets_the_environment_make_test_sets():
    """The benchmark times the README's test command as the Makefile runs it: the same variables
    before pytest (the rehearsal's come from ``--rehearse-cpu``, as from REHEARSE_CPU)."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ntest: lint\n\t", 1)[1].split("$(AS_CPU)", 1)[0]
    assigned = dict(word.split("=", 1) for word in recipe.split())
    assert assigned == suite.ENVIRONMENT
