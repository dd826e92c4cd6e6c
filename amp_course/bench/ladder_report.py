"""Presenting the MFU ladder: rows to and from JSON, a table, a chart, and the timm ratios."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path

from .. import timing
from .ladder import LadderRow, memory_note


def as_dicts(rows: list[LadderRow]) -> list[dict]:
    """JSON-ready rows, with the bench's ``workload`` and ``mode`` keys."""
    return [{"workload": "ladder", "mode": r.rung, **asdict(r)} for r in rows]


def rows_from_report(report: dict | str | Path) -> list[LadderRow]:
    """The ladder's rows from a bench report (the dict, or its bench.json's path)."""
    if not isinstance(report, dict):
        report = json.loads(Path(report).read_text())
    names = {f.name for f in fields(LadderRow)}
    rows = [
        LadderRow(**{k: v for k, v in row.items() if k in names})
        for row in report["results"].get("ladder", [])
    ]
    for row in rows:
        # A report written before rows had a memory_note holds the allocator's peak for CUDA-graph
        # rungs: a figure far below what they use, never to be shown.
        note = memory_note(row)
        if note and not row.skipped:
            row.peak_memory_bytes, row.memory_note = None, note
    return rows


def timm_ratios(rows: list[LadderRow]) -> list[tuple[str, float]]:
    """(rung, timm's step time / the course's) for each rung timed with both models."""
    course = {r.rung: r for r in rows if r.model == "course" and r.median_s}
    pairs = []
    for row in rows:
        twin = course.get(row.rung.removeprefix("timm: "))
        if row.model == "timm" and row.median_s and twin:
            pairs.append((twin.rung, row.median_s / twin.median_s))
    return pairs


COLUMNS = [  # (title, LadderRow field, format spec, width)
    ("batch", "batch", "d", 10),
    ("step", "median_s", "time", 10),
    ("img/s", "images_per_s", ".4g", 10),
    ("TFLOP/s", "achieved_tflops", ".3g", 10),
    ("MFU", "mfu", ".1%", 10),
    ("of matmul", "mfu_of_matmul", ".1%", 10),
    ("peak GiB", "peak_memory_gib", ".2f", 14),  # wide enough for NOT_MEASURED
]
NOT_MEASURED = "not measured"  # the peak-memory cell of a row with a memory_note


def memory_notes(rows: list[LadderRow]) -> list[str]:
    """One line per reason some rungs' peak memory was not measured, naming those rungs."""
    by_note: dict[str, list[str]] = {}
    for row in rows:
        if row.memory_note and not row.skipped:
            by_note.setdefault(row.memory_note, []).append(row.rung)
    return [f"peak memory {note} ({', '.join(names)})" for note, names in by_note.items()]


def format_table(rows: list[LadderRow]) -> str:
    """The ladder as a fixed-width table; MFU is against the published dense peak, "of matmul"
    against the matmul FLOP/s this run measured."""
    width = max([len(r.rung) for r in rows] + [4]) + 2
    lines = [f"{'rung':<{width}}" + "".join(f"{t:>{w}}" for t, _, _, w in COLUMNS)]
    for row in rows:
        if row.skipped:
            lines.append(f"{row.rung:<{width}}skipped: {row.skipped}")
            continue
        memory = row.peak_memory_bytes
        values = {**asdict(row), "peak_memory_gib": None if memory is None else memory / 2**30}
        cells = {key: timing.format_cell(values[key], spec) for _, key, spec, _ in COLUMNS}
        if row.memory_note:
            cells["peak_memory_gib"] = NOT_MEASURED
        lines.append(f"{row.rung:<{width}}" + "".join(f"{cells[k]:>{w}}" for _, k, _, w in COLUMNS))
    return "\n".join(lines + memory_notes(rows))


def readme_lines(path: Path) -> list[str]:
    """The README's lines for a committed ladder run (``<run>/bench-ladder/bench.json``)."""
    report = json.loads(Path(path).read_text())
    rows = rows_from_report(report)
    precision = rows[0].precision if rows else "-"
    lines = [
        f"**MFU ladder of a {precision} ViT-B/16 training step** "
        f"(`{Path(path).parent.name}/bench.json`, {report['config']['rounds']} interleaved rounds; "
        'MFU against the dense peak, "of matmul" against this run\'s measured matmul peak):',
        "",
        "| rung | batch | step | images/s | MFU | of matmul | peak memory |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r.median_s:
            lines.append(f"| {r.rung} | {r.batch} | skipped: {r.skipped} | | | | |")
            continue
        memory = "-" if r.peak_memory_bytes is None else f"{r.peak_memory_bytes / 2**30:.2f} GiB"
        memory = NOT_MEASURED if r.memory_note else memory
        lines.append(
            f"| {r.rung} | {r.batch} | {timing.format_time(r.median_s)} | "
            f"{r.images_per_s:.0f} | {timing.format_cell(r.mfu, '.1%')} | "
            f"{r.mfu_of_matmul:.1%} | {memory} |"
        )
    for note in memory_notes(rows):
        lines += ["", f"{note[0].upper()}{note[1:]}."]
    for rung, ratio in timm_ratios(rows):
        lines += ["", f"timm's ViT-B/16 at the rung {rung!r}: {ratio:.2f}x the course's step time."]
    return lines


def plot(rows: list[LadderRow], title: str = "", path: str | Path | None = None):
    """Two panels per rung: utilisation (of the dense peak where known, else of the measured
    matmul peak) and images/s; skipped rungs are named and left empty."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    labels = [r.rung for r in rows]
    dense = any(r.mfu is not None for r in rows)
    colours = ["tab:gray" if r.model == "timm" else "tab:blue" for r in rows]
    panels = [
        (
            "mfu" if dense else "mfu_of_matmul",
            100,
            "MFU, % of the " + ("dense peak" if dense else "measured matmul peak"),
        ),
        ("images_per_s", 1, "images/s"),
    ]
    for ax, (key, factor, ylabel) in zip(axes, panels, strict=True):
        values = [getattr(r, key) for r in rows]
        ax.bar(range(len(rows)), [0 if v is None else v * factor for v in values], color=colours)
        for index, value in enumerate(values):
            if value is None:
                ax.text(index, 0, "skipped", rotation=90, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(rows)), labels, rotation=35, ha="right", fontsize=7)
        ax.set(ylabel=ylabel)
    fig.suptitle(title or "MFU ladder (grey: timm's ViT)", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
