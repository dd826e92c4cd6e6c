"""Presenting a bench report: fixed-width tables (``tables``), a plot with a panel per workload
that ran, and the files on disk, all rendered from the report's rows (``rows.Row``), never from
printed text."""

from __future__ import annotations

import json
from pathlib import Path

from . import ladder_report
from .rows import Row, load
from .tables import REPORT_TABLES


def format_report(report: dict) -> str:
    """The report as fixed-width text tables, one per workload."""
    lines = [
        f"amp-course bench on {report['device']} ({report['date']}; torch "
        f"{report['versions']['torch']}{'; smoke sizes' if report['smoke'] else ''})"
    ]
    for workload in report["results"]:
        rows = load(report, workload)
        if not rows:
            continue
        if workload == "ladder":
            precision = rows[0].variant.precision.name
            lines += ["", f"== ladder ({precision}) ==", ladder_report.format_table(rows)]
            continue
        table = REPORT_TABLES["vit" if workload.startswith("vit_") else workload]
        lines += ["", f"== {workload} ==", table.text(rows)]
    return "\n".join(lines)


def _matmul_panel(ax, done: list[Row]) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator

    for mode in dict.fromkeys(r.label for r in done):
        rows = [r for r in done if r.label == mode]
        sizes, rates = [r.size for r in rows], [r.achieved_tflops for r in rows]
        (line,) = ax.plot(sizes, rates, "o-", label=mode)
        if rows[0].dense_peak_tflops:
            ax.axhline(rows[0].dense_peak_tflops, ls="--", lw=0.8, color=line.get_color())
    sizes = sorted({r.size for r in done})
    peaks = any(r.dense_peak_tflops for r in done)  # a CPU has no published peak to draw
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="n (n x n matmul)",
        ylabel="TFLOP/s",
        title="matmul throughput" + (" (dashed: published peak)" if peaks else ""),
    )
    ax.set_xticks(sizes, [str(n) for n in sizes], minor=False)
    ax.minorticks_off()
    # 1, 2 and 5 of each decade labelled: a span of one decade still has values to read.
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.legend(fontsize=8)


def _bars(ax, rows: list[Row], of_step, title: str, ylabel: str, labels=None) -> None:
    """A bar per row at ``of_step(row, its median step time)``, with whiskers over the middle
    half of its timed runs (``of_step`` at the quartiles) where the row has them."""
    heights = [of_step(r, r.median_s) for r in rows]
    ax.bar(range(len(rows)), heights)
    spread = [(i, r) for i, r in enumerate(rows) if r.p25_s is not None and r.p75_s is not None]
    if spread:
        ends = [sorted((of_step(r, r.p25_s), of_step(r, r.p75_s))) for _, r in spread]
        middle = [heights[i] for i, _ in spread]
        below = [m - low for m, (low, _) in zip(middle, ends, strict=True)]
        above = [high - m for m, (_, high) in zip(middle, ends, strict=True)]
        xs = [i for i, _ in spread]
        ax.errorbar(xs, middle, yerr=[below, above], fmt="none", ecolor="k", capsize=4, lw=1)
    labels = labels or [r.label for r in rows]
    ax.set_xticks(range(len(rows)), labels, rotation=30, ha="right", fontsize=8)
    ax.set(title=title, ylabel=ylabel)


def plot_report(report: dict, path: str | Path | None = None):
    """One panel per workload the report has results for: matmul TFLOP/s by size, MNIST epoch
    time, ViT images/s, largest batch (a report of one workload is one panel); the timed bars
    carry whiskers over the middle half of their runs."""
    import matplotlib.pyplot as plt

    matmul = [r for r in load(report, "matmul") if r.achieved_tflops is not None]
    mnist = [r for r in load(report, "mnist_cnn") if r.epoch_s is not None]
    vit = [r for w in ("vit_b16", "vit_l16") for r in load(report, w) if r.images_per_s is not None]
    vit_labels = [f"{r.workload.removeprefix('vit_')} {r.label}" for r in vit]
    batches = [r for r in load(report, "max_batch") if r.max_batch is not None]
    panels = []  # one drawing function per workload with results
    if matmul:
        panels.append(lambda ax: _matmul_panel(ax, matmul))
    if mnist:
        steps = mnist[0].steps_per_epoch
        mnist_title = f"MNIST CNN: an epoch ({steps} steps) at the timed step"

        def epoch(row, seconds):
            return seconds * row.steps_per_epoch

        panels.append(lambda ax: _bars(ax, mnist, epoch, mnist_title, "seconds per epoch"))
    if vit:

        def images(row, seconds):
            return row.batch / seconds

        panels.append(
            lambda ax: _bars(ax, vit, images, "ViT training step", "images/s", vit_labels)
        )
    if batches:
        fits = "largest ViT-B/16 batch that fits"
        panels.append(lambda ax: _bars(ax, batches, lambda r, _: r.max_batch, fits, "images"))
    columns = 2 if len(panels) > 1 else 1
    rows = max(1, -(-len(panels) // columns))
    size = (11, 3.5 * rows) if columns == 2 else (9, 4)
    fig, axes = plt.subplots(rows, columns, figsize=size, squeeze=False)
    for ax, draw in zip(axes.flat, panels, strict=False):
        draw(ax)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")  # an odd panel out, or a report without results
    if not panels:
        axes[0, 0].text(0.5, 0.5, "no results in this report", ha="center", va="center")
    note = " (smoke sizes: not speed figures)" if report["smoke"] else ""
    fig.suptitle(f"{report['device']}{note}", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def write_report(report: dict, out_dir: str | Path) -> dict[str, Path]:
    """Write bench.json, bench.txt and bench.png under ``out_dir``; returns their paths."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "bench.json", "table": out / "bench.txt", "plot": out / "bench.png"}
    paths["json"].write_text(json.dumps(report, indent=1) + "\n")
    paths["table"].write_text(format_report(report) + "\n")
    plt.close(plot_report(report, paths["plot"]))
    if report["results"].get("ladder"):
        paths["ladder_plot"] = out / "ladder.png"
        title = f"MFU ladder on {report['device']}" + (" (smoke sizes)" if report["smoke"] else "")
        rows = load(report, "ladder")
        plt.close(ladder_report.plot(rows, title, paths["ladder_plot"]))
    return paths
