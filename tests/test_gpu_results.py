"""The committed GPU run: its files are complete and sound, and the GPU-run guide
(docs/gpu-run.md) quotes them exactly."""

import dataclasses
import json
import shutil

import nbformat
import pytest
from conftest import ROOT

from amp_course import cli
from amp_course.bench.rows import Row
from amp_course.bench.variant import Variant
from amp_course.paths import GPU_GUIDE, lesson_notebooks
from amp_course.tooling.executed import read_stamp
from amp_course.tooling.runs import files, parts, results

RUNS = sorted(p.parent for p in (ROOT / "reports" / "gpu").glob("*/report.json"))
MAIN_RUNS = [run for run in RUNS if (run / "bench-vit_b16" / "bench.json").exists()]


def test_a_gpu_run_is_committed():
    assert MAIN_RUNS, "reports/gpu/<device>/ with a ViT-B/16 bench is the GPU guide's source"


@pytest.mark.parametrize("run", MAIN_RUNS, ids=lambda p: p.name)
def test_the_gpu_guide_quotes_the_committed_run_number_for_number(run):
    guide = (ROOT / GPU_GUIDE).read_text(encoding="utf-8")
    assert results.section(run).rstrip("\n") in guide, (
        f"{GPU_GUIDE}'s GPU results differ from the files: run "
        f"`amp-course gpu-results {run.relative_to(ROOT)} --write`"
    )


def test_write_replaces_the_section_in_the_gpu_guide_only(tmp_path, monkeypatch):
    run = MAIN_RUNS[0]
    (tmp_path / GPU_GUIDE).parent.mkdir(parents=True)
    (tmp_path / "README.md").write_text(f"readme\n{results.BEGIN}\nold\n{results.END}\n")
    stale = f"# Guide\n\nbefore\n\n{results.BEGIN}\nold\n{results.END}\n\nafter\n"
    (tmp_path / GPU_GUIDE).write_text(stale)
    monkeypatch.setattr(results, "ROOT", tmp_path)
    assert results.main([str(run), "--write"]) == 0
    written = (tmp_path / GPU_GUIDE).read_text()
    assert written == results.replace_section(stale, results.section(run))
    assert "\nold\n" not in written and written.endswith("\n\nafter\n")
    assert "\nold\n" in (tmp_path / "README.md").read_text()  # the README is not written


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_the_committed_report_is_the_merge_of_its_parts(run, tmp_path):
    committed = json.loads((run / "report.json").read_text())
    copy = tmp_path / run.name
    copy.mkdir()
    for part in [*run.glob("report-*.json"), *run.glob("nbval*.xml")]:
        (copy / part.name).write_bytes(part.read_bytes())
    for bench in run.glob("bench*/bench.json"):
        (copy / bench.parent.name).mkdir()
        (copy / bench.parent.name / "bench.json").write_bytes(bench.read_bytes())
    assert parts.merge_reports(copy) == committed


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_committed_copy_ran_in_full_mode_without_an_error(run):
    report = json.loads((run / "report.json").read_text())
    assert report["notebooks"] and all(r["status"] == "passed" for r in report["notebooks"])
    for entry in report["notebooks"]:
        nb = nbformat.read(run / "notebooks" / entry["notebook"], as_version=4)
        stamp = read_stamp(nb)
        assert stamp["mode"] == "full" and stamp["device"] == report["device"]
        errors = [
            out
            for cell in nb.cells
            if cell.cell_type == "code"
            for out in cell.get("outputs", [])
            if out.get("output_type") == "error"
        ]
        assert not errors, f"{entry['notebook']} has an error output"


@pytest.mark.parametrize("run", MAIN_RUNS, ids=lambda p: p.name)
def test_the_main_run_passed_nbval_for_every_lesson_it_ran(run):
    # Lessons newer than the run are named in its results section (notebooks_sentence).
    report = json.loads((run / "report.json").read_text())
    names = {r["notebook"] for r in report["notebooks"]}
    assert names <= {p.name for p in lesson_notebooks()}, "a lesson the course lost"
    assert report["nbval"] == "passed"


def test_the_gpu_results_say_what_nbval_checked_and_which_lessons_a_run_lacks(tmp_path):
    run = tmp_path / "run"
    (run / "notebooks").mkdir(parents=True)
    marked = nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(1)")
    nbformat.write(nbformat.v4.new_notebook(cells=[marked]), run / "notebooks" / "00.ipynb")
    runs = [{"notebook": "00.ipynb", "status": "passed"}]
    (run / "report.json").write_text(json.dumps({"notebooks": runs, "nbval": "passed"}))
    lessons = [tmp_path / "00.ipynb", tmp_path / "10_new.ipynb"]
    text = results.notebooks_sentence(run, lessons)
    assert "1 of 1 notebooks ran" in text and "1 cell(s) are marked" in text
    assert "only theirs were compared" in text and "Not in this run (newer than it): 10_new" in text
    timed = Row("vit_b16", Variant.matrix("fp32"), runs=9)
    skipped = Row("vit_b16", Variant.matrix("tf32"), skipped="TF32 is a CUDA mode")
    said = results.timing_sentence([timed, skipped], {"rounds": 3})
    assert "median over 9 timed blocks" in said and "in 3 rounds that interleave the modes" in said


def test_nothing_is_read_from_what_lesson_05_printed():
    """The eager workloads no bench.json of the committed run holds are said to be missing, and
    the plan's bench-eager part measures them: no table printed by a lesson is parsed."""
    run = MAIN_RUNS[0]
    assert not hasattr(files, "printed_bench_tables") and not hasattr(files, "TIME_UNITS")
    data = files.collect(run)
    text = results.results_markdown(run)
    if not data["rows"]:
        assert f"largest ViT-B/16 training batch**: {results.NOT_MEASURED}." in text
        assert data["measured"]["max_batch"] is None
        assert "| largest batch, bf16 / fp32 >= 1.60x | - | not in this run's bench.json |" in text
    assert "as it printed" not in text and "05_speed_memory.ipynb`)" not in text


def test_replacing_needs_the_markers():
    with pytest.raises(ValueError, match="markers"):
        results.replace_section("# README\n", "text")
    readme = f"a\n{results.BEGIN}\nold\n{results.END}\nb\n"
    new = results.replace_section(readme, f"{results.BEGIN}\nnew\n{results.END}\n")
    assert new == f"a\n{results.BEGIN}\nnew\n{results.END}\nb\n"


def _junit(path, lesson, failed=False):
    failure = '<failure message="x"/>' if failed else ""
    path.write_text(
        '<testsuites><testsuite name="pytest">'
        f'<testcase classname="reports.gpu.dev.notebooks.{lesson}" name="Cell 0">{failure}'
        "</testcase></testsuite></testsuites>"
    )


def test_merge_takes_each_notebooks_newest_run_and_its_nbval_verdict(tmp_path):
    def part(tag, date, runs):
        record = {"device": "GPU X", "versions": {"torch": "2.11.0"}}
        record |= {"date": date, "amp_dtype": "lesson default"}
        record |= {"notebooks": runs, "nbval": "skipped", "bench": "skipped"}
        (tmp_path / f"report-{tag}.json").write_text(json.dumps(record))

    part("a", "2026-01-01", [{"notebook": "00.ipynb", "status": "failed", "seconds": 1}])
    part("b", "2026-01-02", [{"notebook": "00.ipynb", "status": "passed", "seconds": 2}])
    part("c", "2026-01-03", [{"notebook": "01.ipynb", "status": "passed", "seconds": 3}])
    _junit(tmp_path / "nbval-a.xml", "00.ipynb")
    merged = parts.merge_reports(tmp_path)
    assert merged["parts"] == 3 and merged["date"] == "2026-01-03"
    assert [(r["notebook"], r["status"], r["nbval"]) for r in merged["notebooks"]] == [
        ("00.ipynb", "passed", "passed"),
        ("01.ipynb", "passed", "not run"),
    ]
    assert merged["nbval"] == "not run for 01.ipynb" and merged["bench"] == "not run"
    _junit(tmp_path / "nbval-b.xml", "01.ipynb", failed=True)
    assert parts.merge_reports(tmp_path)["nbval"] == "failed for 01.ipynb"
    assert json.loads((tmp_path / "report.json").read_text())["nbval"] == "failed for 01.ipynb"


def test_merge_without_parts_says_so(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="nothing to merge"):
        parts.merge_reports(tmp_path)
    assert cli.main(["gpu", "--merge", str(tmp_path / "absent")]) == 2
    assert "cannot merge the parts" in capsys.readouterr().err
    (tmp_path / "report-a.json").write_text("{not json")
    assert cli.main(["gpu", "--merge", str(tmp_path)]) == 2


@pytest.mark.parametrize(
    "name, text, says",
    [
        (
            "report-zz.json",
            '{"date": "2099"}',
            "report-zz.json is not a part's report (it lacks device",
        ),
        ("report-zz.json", "[]", "report-zz.json is not a part's report"),
        ("report-zz.json", "{", "report-zz.json is not JSON"),
        (
            "nbval-zz.xml",
            '<testsuites><testsuite name="py',
            "nbval-zz.xml is not nbval's JUnit XML",
        ),
    ],
    ids=["a-record-without-the-machine", "a-list", "truncated-json", "truncated-junit"],
)
def test_a_damaged_part_is_named_and_the_merged_report_kept(tmp_path, capsys, name, text, says):
    """A part that is not a run's record (it would have become the merged report's machine
    record: no device, no versions) or a truncated file stops the merge with the file's name, and
    the run's report.json stays as it was."""
    run = tmp_path / "run"
    shutil.copytree(MAIN_RUNS[0], run, ignore=shutil.ignore_patterns("notebooks", "bench*"))
    before = (run / "report.json").read_bytes()
    (run / name).write_text(text)
    assert cli.main(["gpu", "--merge", str(run)]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert (run / "report.json").read_bytes() == before


def test_the_mnist_source_is_read_from_the_run():
    source = files.printed_mnist_source(MAIN_RUNS[0] / "notebooks" / "00_scenario.ipynb")
    assert "MNIST" in source and source in (ROOT / GPU_GUIDE).read_text(encoding="utf-8")


def test_the_sites_gpu_page_shows_versions_nbval_and_the_gpu_guides_results():
    from amp_course.tooling.website.gpu_page import gpu_markdown
    from amp_course.tooling.website.sources import Source

    run = MAIN_RUNS[0]
    report = json.loads((run / "report.json").read_text())
    shown = Source("05_speed_memory", run / "notebooks" / "05_speed_memory.ipynb", {}, run)
    page = gpu_markdown(run, [shown], ROOT)
    assert f"**torch:** {report['versions']['torch']}" in page.replace("\\", "")
    assert "| passed | [yes](../lessons/05_speed_memory.ipynb) |" in page
    assert page.count("| passed | ") >= len(report["notebooks"])  # papermill and nbval columns
    assert results.results_markdown(run).split("\n", 1)[1].rstrip("\n") in page


def _matmul(precision, size, tflops, share):
    """A matmul row that measured ``tflops``, ``share`` of its precision's published peak."""
    seconds = 2 * size**3 / (tflops * 1e12)
    cell = Variant.matrix(precision)
    return Row(
        "matmul", cell, size, seconds, flops_per_step=2 * size**3, dense_peak_tflops=tflops / share
    )


def test_the_eager_workloads_render_from_a_bench_eager_report(tmp_path):
    run = tmp_path / MAIN_RUNS[0].name
    shutil.copytree(MAIN_RUNS[0], run)
    names = ("fp32", "tf32", "fp16", "bf16")
    rows = {
        "matmul": [_matmul(p, 8192, 100.0 + i, 0.5) for i, p in enumerate(names)],
        "mnist_cnn": [
            Row(
                "mnist_cnn",
                dataclasses.replace(Variant.matrix(p), batch=256),
                None,
                0.01 / (1 + i),
            )
            for i, p in enumerate(names)
        ],
        "max_batch": [
            Row("max_batch", Variant.matrix("fp32"), max_batch=500),
            Row("max_batch", Variant.matrix("bf16"), max_batch=1000),
        ],
    }
    bench = json.loads((run / "bench-vit_b16" / "bench.json").read_text())
    written = {w: [r.to_dict() for r in rs] for w, rs in rows.items()}
    (run / "bench-eager").mkdir()
    (run / "bench-eager" / "bench.json").write_text(json.dumps({**bench, "results": written}))
    data = files.collect(run)
    assert data["batches"]["bf16"] == 1000 and data["measured"]["max_batch"] == 2.0
    text = results.results_markdown(run)
    assert "**Eager modes, from `bench-eager/bench.json`:**" in text
    assert "fp32 500, bf16 1000; bf16 fits 2.00x fp32's" in text
    assert "at batch 256: fp32 step 10 ms, tf32 5 ms (2.00x)" in text
    assert "| 8192 | 100 (50.0%) | 101 (50.0%) | 102 (50.0%) | 103 (50.0%) |" in text
    assert results.NOT_MEASURED not in text
    assert "| largest batch, bf16 / fp32 >= 1.60x | 2.000x | yes |" in text
    # The ViT matrix still comes from its own report, and the section between its markers.
    assert "(`bench-vit_b16/bench.json`: each step time is the median" in text
    assert results.section(run) == f"{results.BEGIN}\n{text}{results.END}\n"


def test_a_run_with_only_some_eager_workloads_names_the_missing_ones(tmp_path):
    run = tmp_path / MAIN_RUNS[0].name
    shutil.copytree(MAIN_RUNS[0], run)
    bench = json.loads((run / "bench-vit_b16" / "bench.json").read_text())
    matmul = [_matmul("fp32", 1024, 40.0, 0.6).to_dict()]
    (run / "bench-eager").mkdir()
    (run / "bench-eager" / "bench.json").write_text(
        json.dumps({**bench, "results": {"matmul": matmul}})
    )
    text = results.results_markdown(run)
    assert "| 1024 | 40 (60.0%) |" in text
    assert f"- **MNIST CNN, largest ViT-B/16 training batch**: {results.NOT_MEASURED}." in text


def test_a_run_whose_bench_lacks_a_field_says_where_it_looked(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(MAIN_RUNS[0], run, ignore=shutil.ignore_patterns("notebooks"))
    for bench in run.glob("bench*/bench.json"):
        bench.write_text("{}")
    assert results.main([str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"error: cannot read the GPU run in {run}: its report or bench.json lacks"
    )
