"""The suite benchmark (``amp-course suite-bench``) reads pytest's own account of a run: the
duration, the counts and the slowest tests, from a real pytest run's output."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amp_course import cli, cpu
from amp_course.paths import ROOT
from amp_course.tooling.runs import processes, suite

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
        {**record, "seconds": seconds, "kind": kind, "returncode": code, "step_after_ms": ms}
        for seconds, kind, code, ms in [
            (230.0, "avx2", 0, 42.4),
            (190.0, None, 0, 43.0),
            (250.0, "avx2", 0, 71.6),
        ]
    ]
    for one in passes:
        one["kind"] = one["kind"] or "native"
    machine = {"device": "CPU Test (AVX512)", "date": "2026-12-05", "versions": {"torch": "2.x"}}
    rehearsal = {"key": "avx2", "kind": "a CPU without native bf16", "caps": {"A": "avx2"}}
    step = {"step": "a step", "fp32_s": 0.056, "bf16_s": 0.638, "bf16_over_fp32": 11.34}
    steps = {"avx2": {**step, "native_bf16": False, "cpu_capability": "AVX2"}}
    steps["native"] = {**step, "fp32_s": 0.042, "native_bf16": True, "cpu_capability": "AVX512"}
    machine.update(cpu_steps=steps, empty_compile_cache=True)
    bench = suite.report(passes, {**machine, "rehearsal": rehearsal})
    assert bench["median_s"] == {"avx2": 240.0, "native": 190.0}
    assert bench["met"] is True  # the rehearsal's median, 240 s, is within the target
    text = suite.markdown(bench)
    assert "rehearsing a CPU without native bf16" in text
    assert "Median: avx2 240.0 s, native 190.0 s. Target met (avx2): yes." in text
    assert "| 2 | native | 190.0 | 1 failed, 2 passed | 0 |" in text
    assert "test_tiny.py::test_slow`" in text
    assert "Each pass started with an empty torch.compile cache, as a fresh clone does." in text
    assert "fp32 time after each pass, in order: 42, 43, 72 ms (a pass followed by" in text
    assert "The CPU step before the passes, avx2: a step, timed in alternation: fp32 56 ms" in text
    assert "before the passes, native: a step, timed in alternation: fp32 42 ms, bf16" in text
    assert "Where the CPU time" not in text  # a report from before the account
    passes[2]["processes"] = {
        "processes": 233,
        "cpu_s": 470.4,
        "torch": {
            "processes": 80,
            "cpu_s": 385.0,
            "kinds": {
                "Jupyter kernels": {"processes": 52, "cpu_s": 179.2},
                "pytest processes": {"processes": 7, "cpu_s": 148.3},
            },
        },
    }
    text = suite.markdown({**bench, "torch_import_s": 1.9})
    assert (
        "Where the CPU time of the last avx2 pass went: 233 processes under pytest used 470 "
        "core-s of CPU, 94% of 2 cores over its 250 s. 80 of them imported torch and used 385 "
        "core-s: 52 Jupyter kernels (179 core-s), 7 pytest processes (148 core-s). A fresh "
        "`import torch` takes 1.9 core-s here, so importing it took about 152 core-s, 32% of the "
        "pass's CPU time."
    ) in text
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


def test_each_pass_compiles_into_an_empty_cache_of_its_own(monkeypatch, output, tmp_path):
    """A cache left by an earlier pass (or an earlier day's runs) would spare the lessons that
    compile their compile: every pass pays for it, as a fresh clone's first `make test` does."""
    seen = []

    def run(argv, env, **kwargs):
        cache = Path(env[cpu.INDUCTOR_CACHE_VARIABLE])
        empty = cache.is_dir() and not any(cache.iterdir())
        seen.append((cache, empty, env.get("ONEDNN_MAX_CPU_ISA")))
        if empty:
            (cache / "compiled").write_text("a kernel")  # what a pass leaves
        return subprocess.CompletedProcess(argv, 1, stdout=output, stderr="")

    monkeypatch.setattr(suite.subprocess, "run", run)
    for name in (*cpu.ONEDNN_CAP_VARIABLES, cpu.ATEN_CAP_VARIABLE):  # a rehearsed run's
        monkeypatch.delenv(name, raising=False)
    users = tmp_path / "their-cache"
    users.mkdir()
    monkeypatch.setenv(cpu.INDUCTOR_CACHE_VARIABLE, str(users))  # the user's own: not the passes'
    assert suite.run_pass("avx2")["kind"] == "avx2" and suite.run_pass(None)["kind"] == "native"
    (first, empty, cap), (second, empty_again, plain) = seen
    assert first != second and empty and empty_again and (cap, plain) == ("AVX2", None)
    assert not first.exists() and not second.exists()  # removed after its pass
    assert users not in (first, second)


def test_the_cpu_step_is_timed_for_each_kind_before_the_passes_and_after_each(monkeypatch):
    calls = []

    def step(env=None):
        calls.append(("step", (env or {}).get(cpu.ATEN_CAP_VARIABLE)))
        return {"fp32_s": 0.05}

    def one_pass(kind):
        calls.append(("pass", kind))
        record = {"seconds": 1.0, "counts": {}, "slowest": [], "returncode": 0}
        return {**record, "kind": kind or "native"}

    monkeypatch.setattr(suite.cpu_step, "measure_in_child", step)
    monkeypatch.setattr(suite, "run_pass", one_pass)
    monkeypatch.setattr(suite.processes, "torch_import_cpu_s", lambda: 1.9)
    bench = suite.measure(1, "avx2")
    assert bench["torch_import_s"] == 1.9
    before, after = [("step", "avx2"), ("step", None)], ("step", None)  # after: native
    assert calls == [*before, ("pass", "avx2"), after, ("pass", None), after]
    assert list(bench["cpu_steps"]) == ["avx2", "native"] and bench["empty_compile_cache"]
    assert [one["step_after_ms"] for one in bench["passes"]] == [50.0, 50.0]


def test_the_account_counts_each_process_a_pass_starts_and_those_that_import_torch():
    """Sampled while they run: a child that imports torch, one Python child that does not, and a
    program that is not Python; the pass's CPU time is theirs."""
    with processes.Account() as account:
        children = [
            subprocess.Popen([sys.executable, "-c", "import torch, time; time.sleep(0.5)"]),
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"]),
            subprocess.Popen(["sleep", "1"]),
        ]
        for child in children:
            child.wait()
    record = account.summary()
    assert record["processes"] == 3
    torch = record["torch"]
    assert torch["processes"] == 1 and list(torch["kinds"]) == ["other Python processes"]
    assert torch["cpu_s"] >= 0.5  # importing torch takes longer than that anywhere
    assert record["cpu_s"] >= torch["cpu_s"]


def test_a_child_seen_between_fork_and_exec_is_read_again_once_it_runs_its_own_program():
    """Forked from this process, which imported torch, the child maps torch and carries this
    process's command until it execs; then it is a Python child that imports nothing (the account
    kept the first reading, and CI once counted such a child as a pytest process with torch)."""
    import torch  # noqa: F401 - the parent's maps, which a forked child shares until it execs

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: wait for the first sample, then run a program of its own
        os.close(write)
        os.read(read, 1)
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(1)"])
    os.close(read)
    account = processes.Account()
    account.sample()  # between fork and exec
    assert account.summary()["torch"]["processes"] == 1
    os.write(write, b"go")
    os.close(write)
    time.sleep(0.5)
    account.sample()
    os.waitpid(pid, 0)
    record = account.summary()
    assert record["processes"] == 1 and record["torch"]["processes"] == 0, record


def test_a_process_is_told_by_its_command_or_its_parents():
    assert processes.kind_of("python -m ipykernel_launcher -f k.json") == "Jupyter kernels"
    assert processes.kind_of("python -u -c import sys;exec(eval(sys.stdin.readline()))") == (
        "pytest processes"
    )
    rank = processes.kind_of("python -u several_runs.py", "python -m torch.distributed.run x.py")
    assert rank == "torchrun launchers and ranks"
    assert processes.kind_of("python /tmp/pytest-of-me/venv/bin/amp-course check-data") == (
        "other Python processes"
    )
