"""The GPU run's plan (``amp-course gpu --plan`` / ``--next MINUTES``): what a full-mode run of the
current notebooks lacks, read from committed run folders, and the parts that fit run and merged;
on a CPU, in a small checkout-like tree, with the GPU's steps replaced by stand-ins that write what
they would."""

import datetime as dt
import itertools
import json
import os

import nbformat
import pytest
import torch

from amp_course import cli, emulation
from amp_course.paths import lesson_notebooks
from amp_course.tooling.executed import STAMP_KEY, cells_differing
from amp_course.tooling.gpu_copies import gpu_reports
from amp_course.tooling.runs import gpu, gpu_smoke, parts, plan, results, run_parts

DEVICE = "GPU X"
FOLDER = gpu.run_folder(DEVICE)  # "gpu-x"
LESSONS = ("00_scenario", "03_grad_scaler", "05_speed_memory", "10_where_time_goes")
TIMED = ("05_speed_memory", "10_where_time_goes")


def _lesson(root, name):
    cells = [nbformat.v4.new_markdown_cell(f"# {name}"), nbformat.v4.new_code_cell("x = 1")]
    if name in TIMED:
        cells.append(nbformat.v4.new_code_cell("ac.timing.measure(lambda: None)"))
    path = root / "notebooks" / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def _copy(source, dest, date, device=DEVICE, mode="full"):
    """An executed copy as the run leaves it: the notebook's cells, an output, the stamp."""
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    stamp = {"device": device, "hardware": device, "torch": "2.11.0", "date": date, "mode": mode}
    nb.metadata[STAMP_KEY] = stamp
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)


def _run(root, folder, date, seconds, status="passed", **extra):
    """A committed run folder: a stamped copy of each lesson in ``seconds`` and its report.json."""
    out = root / "reports" / "gpu" / folder
    for name in seconds:
        _copy(root / "notebooks" / f"{name}.ipynb", out / "notebooks" / f"{name}.ipynb", date)
    runs = [
        {"notebook": f"{name}.ipynb", "status": status, "seconds": s, "error": ""}
        for name, s in seconds.items()
    ]
    record = {"device": DEVICE, "date": date, "notebooks": runs, "nbval": "passed", **extra}
    (out / "report.json").write_text(json.dumps(record))
    return out


def _smoked(root, failing=()):
    """Passing CUDA smoke verdicts for every lesson as it is now (but ``failing``)."""
    folder = gpu_smoke.folder_for(DEVICE, root / "reports" / "gpu")
    folder.mkdir(parents=True, exist_ok=True)
    for job in gpu_smoke.jobs_for(lesson_notebooks(root)):
        verdict = {"notebook": job.lesson.name, "rehearsal": job.rehearsal, "seconds": 9.0}
        verdict |= {"status": "failed" if job.name in failing else "passed"}
        verdict |= {"sha256": gpu_smoke.sha256(job.lesson), "error": ""}
        (folder / f"{job.name}.json").write_text(json.dumps(verdict))


def _edit(root, name):
    path = root / "notebooks" / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += "\nA sentence fixed after the run."
    nbformat.write(nb, path)


@pytest.fixture
def course(tmp_path):
    """00 and 03 ran as they are now, 05 changed since its run, 10 never ran; the ViT-B/16 bench
    is committed, the ladder is not; the T4 rehearsal covers 00, the fp16 pass 00 but not 03."""
    root = tmp_path / "course"
    for name in LESSONS:
        _lesson(root, name)
    date = "2026-01-02T00:00:00+00:00"
    own = _run(
        root, FOLDER, date, {"00_scenario": 30.0, "03_grad_scaler": 20.0, "05_speed_memory": 120.0}
    )
    _edit(root, "05_speed_memory")
    # A newer run whose 05 failed: its copy, current as it is, is not a passing copy.
    _run(root, "gpu-y", "2026-01-03T00:00:00+00:00", {"05_speed_memory": 5.0}, status="failed")
    # The eager workloads too (as if the bench-eager part had written them in the same report).
    measured = ("vit_b16", "matmul", "mnist_cnn", "max_batch")
    bench = {"device": DEVICE, "date": date, "results": {w: [{"mode": "fp32"}] for w in measured}}
    (own / "bench-vit_b16").mkdir()
    (own / "bench-vit_b16" / "bench.json").write_text(
        json.dumps({**bench, "seconds": {"vit_b16": 140.0}})
    )
    _run(root, f"{FOLDER}-t4-emulated", date, {"00_scenario": 31.0}, emulated="Tesla T4")
    _run(root, f"{FOLDER}-fp16", date, {"00_scenario": 29.0}, amp_dtype="fp16")
    _smoked(root)
    return root


def test_the_smoke_pass_comes_first_for_the_lessons_without_a_current_verdict(course):
    assert plan.plan(course)[0].name == "05_speed_memory"  # every lesson passed as it is now
    _smoked(course, failing={"03_grad_scaler-t4"})
    _edit(course, "00_scenario")
    smoke = plan.plan(course)[0]
    assert smoke.name == "smoke" and smoke.kind == "smoke"
    assert smoke.runs == ("00_scenario", "00_scenario-t4", "03_grad_scaler-t4")
    assert smoke.why == "no passing CUDA smoke verdict for the current text of 3 of 8"


def test_the_plan_lists_what_is_missing_or_changed_in_priority_order(course):
    got = {part.name: part for part in plan.plan(course)}
    assert list(got) == [
        "05_speed_memory",
        "10_where_time_goes",
        "bench-ladder",
        "t4-03_grad_scaler",
        "t4-05_speed_memory",
        "t4-10_where_time_goes",
        "fp16-03_grad_scaler",
    ]
    changed, missing = got["05_speed_memory"], got["10_where_time_goes"]
    assert "changed since its full-mode run on GPU X 2026-01-02 (1 cell(s) differ)" == changed.why
    assert missing.why == "no passing full-mode copy" and missing.kind == "lesson"
    # Minutes: the last passing run's papermill seconds plus the part's start (nbval runs in the
    # smoke pass, not again in full mode).
    assert changed.source == "last run on GPU X 2026-01-02"
    assert changed.minutes == round((120 + plan.PART_START_S) / 60, 1)
    assert missing.source == "estimate"
    expected = (plan.ESTIMATES_S["10_where_time_goes"] + plan.PART_START_S) / 60
    assert missing.minutes == round(expected, 1)
    assert changed.alone and missing.alone  # they time things
    # The passes may share the GPU: a rehearsal's timings are no speed figure.
    t4 = got["t4-05_speed_memory"]
    assert t4.kind == "t4-pass" and not t4.alone and t4.why == "no passing T4-rehearsed copy"
    assert t4.minutes == round((120 + plan.PART_START_S) / 60, 1)
    assert got["fp16-03_grad_scaler"].runs == ("03_grad_scaler.ipynb",)
    ladder = got["bench-ladder"]
    assert ladder.kind == "bench" and ladder.runs == ("ladder",) and ladder.source == "estimate"


def test_an_estimate_larger_than_the_last_run_wins(course, monkeypatch):
    # A part the runbook timed after it grew (lesson 08's training budget) is planned by that.
    monkeypatch.setitem(plan.ESTIMATES_S, "05_speed_memory", 200)
    part = plan.plan(course)[0]
    assert part.source == "estimate" and part.minutes == round((200 + plan.PART_START_S) / 60, 1)


def test_a_checkout_without_lessons_or_runs_lacks_only_the_benches(tmp_path):
    listed = plan.plan(tmp_path)
    assert [(p.name, p.source) for p in listed] == [
        ("bench-vit_b16", "estimate"),
        ("bench-eager", "estimate"),
        ("bench-ladder", "estimate"),
    ]
    assert "Nothing is lacking" in plan.format_plan([])


def test_the_eager_workloads_lesson_05_printed_are_a_bench_part_of_their_own(course):
    """The GPU results read matmul, MNIST CNN and the largest batch from bench.json only: a run
    lacking any of them lists the bench-eager part, timed as one part with all three."""
    path = course / "reports" / "gpu" / FOLDER / "bench-vit_b16" / "bench.json"
    report = json.loads(path.read_text())
    del report["results"]["max_batch"]
    path.write_text(json.dumps(report))
    eager = {part.name: part for part in plan.plan(course)}["bench-eager"]
    assert eager.kind == "bench" and eager.runs == ("matmul", "mnist_cnn", "max_batch")
    assert eager.why == "no bench*/bench.json with results['max_batch'] in any GPU run"
    estimate = sum(plan.ESTIMATES_S[w] for w in eager.runs) + plan.PART_START_S
    assert eager.source == "estimate" and eager.minutes == pytest.approx(estimate / 60, abs=0.1)
    assert plan.BENCHES["bench-eager"]["workloads"] == eager.runs


def _parts(*minutes):
    return [plan.Part(f"p{i}", "lesson", (), m, "estimate", "why") for i, m in enumerate(minutes)]


@pytest.mark.parametrize(
    "minutes, expected", [(9, ["p0", "p2", "p3"]), (0.5, []), (16, ["p0", "p1", "p2", "p3"])]
)
def test_select_next_takes_the_parts_that_fit_in_priority_order(minutes, expected):
    assert [p.name for p in run_parts.select_next(_parts(5, 8, 2, 1), minutes)] == expected


def test_the_plan_reads_as_a_table_with_its_total(course):
    text = plan.format_plan(plan.plan(course))
    lines = text.splitlines()
    assert lines[0].split() == ["part", "minutes", "from", "why"]
    assert lines[1].startswith("05_speed_memory *") and "last run on GPU X 2026-01-02" in lines[1]
    assert "7 part(s)" in text and "runs alone on the GPU" in text


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@pytest.fixture
def fake_gpu(monkeypatch):
    """The GPU's steps replaced: papermill leaves stamped copies, nbval its JUnit file, the bench
    its bench.json; what ran is recorded."""
    ran = {"notebooks": [], "bench": [], "smoke": [], "nbval": 0}

    def run_notebooks(notebooks, out_dir, timeout_s, parameters=None, **kwargs):
        ran["notebooks"] += [(p.name, parameters, os.environ.get(emulation.ENV)) for p in notebooks]
        for path in notebooks:
            _copy(path, out_dir / path.name, _now())
        return [
            {"notebook": p.name, "status": "passed", "seconds": 3.0, "error": ""} for p in notebooks
        ]

    def run_nbval(executed, out_dir, timeout_s, tag=""):
        ran["nbval"] += 1
        cases = "".join(
            f'<testcase classname="reports.gpu.x.notebooks.{p.name}" name="Cell 0"/>'
            for p in executed
        )
        xml = f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>'
        (out_dir / parts.part_name("nbval", tag, ".xml")).write_text(xml)
        return 0

    def run_bench(out_dir, device, config=None, name="bench"):
        ran["bench"].append((name, config.workloads))
        report = {"device": DEVICE, "date": _now(), "config": {}}
        report |= {"results": {w: [{"rung": "eager"}] for w in config.workloads}}
        (out_dir / name).mkdir(parents=True)
        (out_dir / name / "bench.json").write_text(json.dumps({**report, "seconds": {}}))
        return "passed"

    record = {"device": DEVICE, "driver": "x", "versions": {"torch": "2.11.0"}}
    monkeypatch.setattr(gpu, "require_gpu", lambda: torch.device("cpu"))
    monkeypatch.setattr(gpu, "environment_record", lambda device: {**record, "date": _now()})
    monkeypatch.setattr(gpu, "run_notebooks", run_notebooks)
    monkeypatch.setattr(gpu, "run_nbval", run_nbval)
    monkeypatch.setattr(gpu, "run_bench", run_bench)

    def run_job(job, folder, cell_timeout, threads=2):
        ran["smoke"].append(job.name)
        verdict = {"notebook": job.lesson.name, "rehearsal": job.rehearsal, "status": "passed"}
        verdict |= {"seconds": 9.0, "sha256": gpu_smoke.sha256(job.lesson), "error": ""}
        (folder / f"{job.name}.json").write_text(json.dumps(verdict))
        return verdict

    monkeypatch.setattr(gpu_smoke, "run_job", run_job)
    return ran


def test_run_next_runs_the_parts_that_fit_and_merges_them(course, fake_gpu):
    # 05 (2.2) and 10 (4.6) fit 9 minutes, the ladder (4.6) does not, the T4 rehearsal of 03
    # (0.6) does, then the T4 rehearsals of 05 and 10 do not, the fp16 pass of 03 (0.6) does.
    done = run_parts.run_next(9, torch.device("cpu"), root=course)
    assert [r["part"] for r in done["ran"]] == [
        "05_speed_memory",
        "10_where_time_goes",
        "t4-03_grad_scaler",
        "fp16-03_grad_scaler",
    ]
    assert all(r["passed"] for r in done["ran"]) and done["left"] == []
    assert fake_gpu["notebooks"] == [
        ("05_speed_memory.ipynb", None, None),
        ("10_where_time_goes.ipynb", None, None),
        ("03_grad_scaler.ipynb", None, "t4"),
        ("03_grad_scaler.ipynb", {"AMP_DTYPE": "fp16"}, None),
    ]
    own = course / "reports" / "gpu" / FOLDER
    merged = json.loads((own / "report.json").read_text())
    assert merged == done["merged"][str(own)]
    verdicts = {r["notebook"]: (r["status"], r["nbval"]) for r in merged["notebooks"]}
    # The run made in one go (00, 03) is kept as a part beside the new ones; 05 is its new run,
    # under papermill alone: nbval executes the lessons in the smoke pass.
    assert set(verdicts) == {f"{n}.ipynb" for n in LESSONS}
    assert verdicts["05_speed_memory.ipynb"] == ("passed", "not run")
    assert verdicts["10_where_time_goes.ipynb"] == ("passed", "not run")
    assert fake_gpu["nbval"] == 0
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d")
    assert (own / f"report-10_where_time_goes-{date}.json").exists()
    assert (own / "report-whole-20260102000000.json").exists()
    t4 = json.loads(
        (course / "reports" / "gpu" / f"{FOLDER}-t4-emulated" / "report.json").read_text()
    )
    assert {r["notebook"] for r in t4["notebooks"]} == {"00_scenario.ipynb", "03_grad_scaler.ipynb"}
    # What ran is no longer lacking.
    assert [p.name for p in plan.plan(course)] == [
        "bench-ladder",
        "t4-05_speed_memory",
        "t4-10_where_time_goes",
    ]


def test_run_next_runs_the_bench_and_starts_no_part_past_the_minutes(course, fake_gpu):
    assert [r["part"] for r in run_parts.run_next(2.3, "cpu", root=course)["ran"]] == [
        "05_speed_memory"
    ]
    assert fake_gpu["bench"] == []
    # 14 minutes: 10 (4.6), the ladder (4.6), the T4 rehearsals of 03 (0.6) and 05 (0.3 now that
    # 05 ran in 3 s), the fp16 pass of 03; 10 takes 10 minutes, so the ladder would pass 14 and is
    # left, the smaller parts still fit.
    clock = itertools.chain([0.0, 0.0], itertools.repeat(600.0))
    done = run_parts.run_next(14, "cpu", root=course, clock=lambda: next(clock))
    assert [r["part"] for r in done["ran"]] == [
        "10_where_time_goes",
        "t4-03_grad_scaler",
        "t4-05_speed_memory",
        "fp16-03_grad_scaler",
    ]
    assert done["left"] == ["bench-ladder"]
    done = run_parts.run_next(5, "cpu", root=course)
    assert done["ran"][0]["part"] == "bench-ladder" and fake_gpu["bench"] == [
        ("bench-ladder", ("ladder",))
    ]
    own = course / "reports" / "gpu" / FOLDER
    assert json.loads((own / "report.json").read_text())["bench"] == "bench-ladder, bench-vit_b16"
    assert "bench-ladder" not in [p.name for p in plan.plan(course)]


def test_run_next_runs_the_smoke_pass_of_what_changed_first(course, fake_gpu):
    _edit(course, "00_scenario")
    done = run_parts.run_next(2, "cpu", root=course)  # the smoke pass of 00 (1.5); 00 (0.8) waits
    assert [r["part"] for r in done["ran"]] == ["smoke"] and done["ran"][0]["passed"]
    assert sorted(fake_gpu["smoke"]) == ["00_scenario", "00_scenario-t4"]
    assert plan.plan(course)[0].name == "00_scenario"  # smoked; its full-mode copy is stale


def test_gpu_run_next_runs_and_merges_from_the_command_line(tmp_path, fake_gpu, capsys):
    out = tmp_path / "gpu"
    assert cli.main(["gpu", "--next", "3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "passed ->" in printed and "left for a later session: none" in printed
    merged = json.loads((out / FOLDER / "report.json").read_text())
    assert merged["notebooks"] and all(r["status"] == "passed" for r in merged["notebooks"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the no-GPU refusal")
def test_gpu_run_next_refuses_without_a_gpu(tmp_path, capsys):
    assert cli.main(["gpu", "--next", "10", "--out", str(tmp_path)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_gpu_run_plan_for_this_checkout(capsys):
    assert cli.main(["gpu", "--plan"]) == 0
    text = capsys.readouterr().out
    names = [
        line.split()[0] for line in text.splitlines()[1:] if line.strip() and "part(s)" not in line
    ]
    # Every lesson whose newest passing GPU copy is missing or differs from the notebook.
    for lesson in lesson_notebooks():
        committed = nbformat.read(lesson, as_version=4)
        copies = [f / "notebooks" / lesson.name for f in gpu_reports() if "fp16" not in f.name]
        current = any(
            c.exists() and not cells_differing(committed, nbformat.read(c, as_version=4))
            for c in copies
        )
        assert (lesson.stem in names) != current, lesson.stem
    assert "10_where_time_goes" in names and "t4-10_where_time_goes" in names
    assert "bench-vit_b16" not in names  # committed in the H100 run


def test_the_gpu_results_say_where_each_lessons_copy_comes_from(course):
    reports = course / "reports" / "gpu"
    lessons = [course / "notebooks" / f"{name}.ipynb" for name in LESSONS]
    lines = results.copies_lines(reports, lessons)
    rows = {line.split(" | ")[0][2:]: line for line in lines[4:]}
    assert list(rows) == list(LESSONS)
    # The newest passing full-mode copy, whatever the notebook now says; no rehearsal, no failure.
    assert (
        rows["05_speed_memory"]
        == f"| 05_speed_memory | {DEVICE} | 2.11.0 | 2026-01-02 | full | `{FOLDER}/` |"
    )
    assert rows["10_where_time_goes"].startswith("| 10_where_time_goes | no GPU run yet |")
    # The lessons' own run, not the fp16 pass nor the T4 rehearsal that also ran 00.
    assert rows["00_scenario"].endswith(f"| `{FOLDER}/` |")


@pytest.mark.parametrize("lesson", ["09_beyond_autocast", "11_below_bf16"])
def test_lessons_that_compile_with_torchao_are_planned_from_what_they_run(lesson):
    """Lesson 09's last GPU run (52 s) predates its torchao compiles; lesson 11 never ran on one:
    neither may be planned at the minute of an unnamed lesson."""
    runs = {"09_beyond_autocast": (52.1, "last run on NVIDIA H100 80GB HBM3 2026-11-23")}
    minutes, source = plan._minutes(lesson, runs)
    assert source == "estimate" and minutes >= 4
    assert plan.ESTIMATES_S[lesson] > plan.ESTIMATES_S["any other lesson"]
