"""A GPU run's page: the machine, each notebook's result and whether its page shows this run, the
results and targets the GPU guide quotes, and the benchmark's figure, all rendered from the run's
JSON files (``amp_course.tooling.runs.files``), never from a printed table."""

from __future__ import annotations

import io
from pathlib import Path

import nbformat

from ...paths import NOTEBOOKS, ROOT
from ..executed import cells_differing
from ..runs.files import bench_report
from ..runs.results import results_markdown
from . import pages
from .sources import Source, report_record


def _on_its_page(run: dict, folder: Path, sources: dict[str, Source], root: Path) -> str:
    """Whether the lesson's page shows this run's copy, and if not, why."""
    name = Path(run["notebook"]).stem
    source = sources.get(name)
    if source is None:
        return "no: no longer a lesson"
    if source.report == folder:
        return f"[yes](../lessons/{name}.ipynb)"
    copy = folder / "notebooks" / run["notebook"]
    if run.get("status") == "passed" and copy.exists():
        committed = nbformat.read(root / NOTEBOOKS / run["notebook"], as_version=4)
        if cells_differing(committed, nbformat.read(copy, as_version=4)):
            return f"[no](../lessons/{name}.ipynb): the lesson changed since"
    return f"[no](../lessons/{name}.ipynb): another run is shown"


def title(record: dict, folder: Path) -> str:
    """``GPU run: <device>``, and what the run forced, so that two runs on one GPU differ."""
    forced = record.get("amp_dtype", "lesson default")
    extra = "" if forced == "lesson default" else f", every lesson with AMP_DTYPE={forced}"
    return f"GPU run: {record.get('device', folder.name)}{extra}"


def figure_png(folder: Path) -> bytes | None:
    """The run's benchmark figure, drawn from its merged bench.json files (a panel per workload
    that ran); None without a benchmark."""
    report = bench_report(folder)
    if report is None:
        return None
    import matplotlib.pyplot as plt

    from ...bench import plot_report

    figure = plot_report(report)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()


def gpu_markdown(folder: Path, sources: list[Source], root: Path = ROOT) -> str:
    """The page of the GPU run in ``folder``; its figure, if any, is ``<folder name>-bench.png``."""
    report = report_record(folder)
    record = {**report.get("versions", {}), **report}  # the run keeps torch, CUDA in versions
    if isinstance(record.get("capability"), list):
        record["capability"] = ".".join(str(part) for part in record["capability"])
    if record.get("date"):
        record["date"] = pages.when(record)
    fields = ("device", "capability", "memory_gib", "driver", "cuda", "torch", "date")
    lines = [f"# {pages.plain(title(record, folder))}", ""]
    lines += [
        f"- **{f.replace('_', ' ')}:** {pages.plain(record[f])}" for f in fields if f in record
    ]
    by_lesson = {source.lesson: source for source in sources}
    lines += [
        "",
        "| notebook | papermill | seconds | nbval | its page shows this run |",
        "|---|---|---|---|---|",
    ]
    for run in report.get("notebooks", []):
        lines.append(
            f"| {pages.plain(Path(run['notebook']).stem)} | {run['status']} "
            f"| {run.get('seconds', '')} | {run.get('nbval', '')} "
            f"| {_on_its_page(run, folder, by_lesson, root)} |"
        )
    nbval, bench_run = record.get("nbval", "not run"), record.get("bench", "not run")
    lines += ["", f"nbval: {pages.plain(nbval)}; benchmark: {pages.plain(bench_run)}"]
    try:
        results = results_markdown(folder)
    except (OSError, KeyError, ValueError):  # a run without the benchmark files the GPU guide reads
        results = None
    if results is not None:
        lines += ["", results.replace("### ", "## ", 1).rstrip("\n")]
    if bench_report(folder) is not None:
        lines += [
            "",
            "## The benchmark as a figure",
            "",
            f"![Each workload the benchmark ran on this GPU]({folder.name}-bench.png)",
        ]
    return "\n".join(lines) + "\n"
