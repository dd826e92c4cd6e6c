"""The committed GPU run: its files are complete and sound, and the README quotes them exactly."""

import json

import nbformat
import pytest
from conftest import ROOT

from amp_course import gpu_results, gpu_run
from amp_course.executed import read_stamp

RUNS = sorted(p.parent for p in (ROOT / "reports" / "gpu").glob("*/report.json"))
MAIN_RUNS = [run for run in RUNS if (run / "bench-vit_b16" / "bench.json").exists()]


def test_a_gpu_run_is_committed():
    assert MAIN_RUNS, "reports/gpu/<device>/ with a ViT-B/16 bench is the README's source"


@pytest.mark.parametrize("run", MAIN_RUNS, ids=lambda p: p.name)
def test_readme_quotes_the_committed_run_number_for_number(run):
    readme = (ROOT / "README.md").read_text()
    assert gpu_results.section(run).rstrip("\n") in readme, (
        "README.md's GPU results differ from the files: run "
        f"`python -m amp_course.gpu_results {run.relative_to(ROOT)} --write`"
    )


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
    assert gpu_run.merge_reports(copy) == committed


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


# Lessons newer than the committed run: the next GPU run executes them, and then each must leave
# this set (the test fails while a run that has it is still listed).
NOT_YET_RUN_ON_A_GPU = {"10_where_time_goes.ipynb"}


@pytest.mark.parametrize("run", MAIN_RUNS, ids=lambda p: p.name)
def test_the_main_run_passed_nbval_for_every_lesson(run):
    report = json.loads((run / "report.json").read_text())
    names = {r["notebook"] for r in report["notebooks"]}
    assert not names & NOT_YET_RUN_ON_A_GPU, "the run has it now: drop it from the set"
    assert names | NOT_YET_RUN_ON_A_GPU == {p.name for p in gpu_run.default_notebooks()}
    assert report["nbval"] == "passed"


def test_lesson_05s_printed_tables_are_read_back():
    run = MAIN_RUNS[0]
    tables = gpu_results.printed_bench_tables(run / "notebooks" / "05_speed_memory.ipynb")
    assert {"matmul", "mnist_cnn", "vit_b16", "max_batch"} <= set(tables)
    batches = {row["mode"]: int(row["max batch"]) for row in tables["max_batch"]}
    assert batches["bf16"] > batches["fp32"] > 0
    assert {row["mode"] for row in tables["matmul"]} >= {"fp32", "tf32", "fp16", "bf16"}


def test_a_notebook_without_a_bench_table_is_refused(tmp_path):
    path = tmp_path / "x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), path)
    with pytest.raises(ValueError, match="printed no benchmark table"):
        gpu_results.printed_bench_tables(path)


def test_replacing_needs_the_markers():
    with pytest.raises(ValueError, match="markers"):
        gpu_results.replace_section("# README\n", "text")
    readme = f"a\n{gpu_results.BEGIN}\nold\n{gpu_results.END}\nb\n"
    new = gpu_results.replace_section(readme, f"{gpu_results.BEGIN}\nnew\n{gpu_results.END}\n")
    assert new == f"a\n{gpu_results.BEGIN}\nnew\n{gpu_results.END}\nb\n"


def _junit(path, lesson, failed=False):
    failure = '<failure message="x"/>' if failed else ""
    path.write_text(
        '<testsuites><testsuite name="pytest">'
        f'<testcase classname="reports.gpu.dev.notebooks.{lesson}" name="Cell 0">{failure}'
        "</testcase></testsuite></testsuites>"
    )


def test_merge_takes_each_notebooks_newest_run_and_its_nbval_verdict(tmp_path):
    def part(tag, date, runs):
        record = {"device": "GPU X", "date": date, "amp_dtype": "lesson default"}
        record |= {"notebooks": runs, "nbval": "skipped", "bench": "skipped"}
        (tmp_path / f"report-{tag}.json").write_text(json.dumps(record))

    part("a", "2026-01-01", [{"notebook": "00.ipynb", "status": "failed", "seconds": 1}])
    part("b", "2026-01-02", [{"notebook": "00.ipynb", "status": "passed", "seconds": 2}])
    part("c", "2026-01-03", [{"notebook": "01.ipynb", "status": "passed", "seconds": 3}])
    _junit(tmp_path / "nbval-a.xml", "00.ipynb")
    merged = gpu_run.merge_reports(tmp_path)
    assert merged["parts"] == 3 and merged["date"] == "2026-01-03"
    assert [(r["notebook"], r["status"], r["nbval"]) for r in merged["notebooks"]] == [
        ("00.ipynb", "passed", "passed"),
        ("01.ipynb", "passed", "not run"),
    ]
    assert merged["nbval"] == "not run for 01.ipynb" and merged["bench"] == "not run"
    _junit(tmp_path / "nbval-b.xml", "01.ipynb", failed=True)
    assert gpu_run.merge_reports(tmp_path)["nbval"] == "failed for 01.ipynb"
    assert json.loads((tmp_path / "report.json").read_text())["nbval"] == "failed for 01.ipynb"


def test_merge_without_parts_says_so(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="nothing to merge"):
        gpu_run.merge_reports(tmp_path)
    assert gpu_run.main(["--merge", str(tmp_path / "absent")]) == 2
    assert "cannot merge the parts" in capsys.readouterr().err
    (tmp_path / "report-a.json").write_text("{not json")
    assert gpu_run.main(["--merge", str(tmp_path)]) == 2


def test_the_mnist_source_is_read_from_the_run():
    source = gpu_results.printed_mnist_source(MAIN_RUNS[0] / "notebooks" / "00_scenario.ipynb")
    assert "MNIST" in source and source in (ROOT / "README.md").read_text()


def test_the_sites_gpu_page_shows_versions_nbval_and_every_bench():
    from amp_course.website.build import gpu_markdown

    run = MAIN_RUNS[0]
    report = json.loads((run / "report.json").read_text())
    page = gpu_markdown(run, ["05_speed_memory"])
    assert f"**torch:** {report['versions']['torch']}" in page.replace("\\", "")
    assert "| [05_speed_memory](../lessons/05_speed_memory.ipynb) | passed |" in page
    assert page.count("| passed | ") >= len(report["notebooks"])  # papermill and nbval columns
    assert "## Benchmark: bench-vit_b16" in page and "bf16+compile+fused" in page
