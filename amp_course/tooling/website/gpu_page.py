"""A GPU run's page: the machine, each notebook's result and whether its page shows this run, the
results and targets the GPU guide quotes, and the benchmark's figure, all rendered from the run's
JSON files (``amp_course.tooling.runs.files``), never from a printed table."""

from __future__ import annotations

import io
from pathlib import Path

import nbformat

from ...paths import NOTEBOOKS, ROOT, notebooks_in
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


def title(record: dict, folder: Path, root: Path = ROOT) -> str:
    """``GPU run: <device>``, and what the run forced, so that two runs on one GPU differ: the
    lessons it ran (every lesson, or which, for a partial pass) and the AMP dtype."""
    forced = record.get("amp_dtype", "lesson default")
    if forced == "lesson default":
        return f"GPU run: {record.get('device', folder.name)}"
    ran = [Path(run["notebook"]).stem for run in record.get("notebooks", [])]
    every = {path.stem for path in notebooks_in(root / NOTEBOOKS)}
    numbers = [name.split("_", 1)[0] if name[:2].isdigit() else name for name in ran]
    if not ran:
        which = "no lesson"
    elif every <= set(ran):
        which = "every lesson"
    elif len(numbers) == 1:
        which = f"lesson {numbers[0]}"
    else:
        which = f"lessons {', '.join(numbers[:-1])} and {numbers[-1]}"
    return f"GPU run: {record.get('device', folder.name)}, {which} with AMP_DTYPE={forced}"


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
    lines = [f"# {pages.plain(title(record, folder, root))}", ""]
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
