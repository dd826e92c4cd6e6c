"""Presenting the MFU ladder from its rows (``rows.Row``, read from bench.json by ``rows.load``):
its tables (through ``tables``), a chart, the GPU results' lines (docs/gpu-run.md), and the
timm ratios."""

from __future__ import annotations

import json
from pathlib import Path

from .. import timing
from .rows import Row, load
from .tables import LADDER_README_TABLE, LADDER_TABLE


def timm_ratios(rows: list[Row]) -> list[tuple[str, float]]:
    """(rung, timm's step time / the course's) for each rung timed with both models."""
    course = {r.label: r for r in rows if r.variant.model == "course" and r.median_s}
    pairs = []
    for row in rows:
        twin = course.get(row.label.removeprefix("timm: "))
        if row.variant.model == "timm" and row.median_s and twin:
            pairs.append((twin.label, row.time_ratio(twin)))
    return pairs


def timm_comparisons(rows: list[Row], model: str = "timm") -> list[tuple[str, timing.Comparison]]:
    """(rung, ``model``'s step against the course's) for each rung timed with both (``model``:
    "timm" or "lean"), by the course's one verdict rule (``ac.timing.compare``: the runs'
    interquartile ranges)."""
    course = {r.label: r for r in rows if r.variant.model == "course" and r.median_s and r.p25_s}
    pairs = []
    for row in rows:
        twin = course.get(row.label.removeprefix(f"{model}: "))
        if row.variant.model == model and row.median_s and row.p25_s and twin:
            quartiles = [
                {k: getattr(r, k) for k in ("p25_s", "median_s", "p75_s")} for r in (twin, row)
            ]
            pairs.append((twin.label, timing.compare(*quartiles, ("course", model))))
    return pairs


def memory_notes(rows: list[Row]) -> list[str]:
    """One line per reason some rungs' peak memory was not measured, naming those rungs."""
    by_note: dict[str, list[str]] = {}
    for row in rows:
        if row.memory_note and not row.skipped:
            by_note.setdefault(row.memory_note, []).append(row.label)
    return [f"peak memory {note} ({', '.join(names)})" for note, names in by_note.items()]


def row_notes(rows: list[Row]) -> list[str]:
    """One line per rung whose measurement differs from what its name says (``Row.note``)."""
    return [f"{row.label}: {row.note}" for row in rows if row.note and not row.skipped]


def format_table(rows: list[Row]) -> str:
    """The ladder as a fixed-width table (``tables.LADDER_TABLE``), then why some peaks were not
    measured and where a row measured other than its mode says (``row_notes``)."""
    return "\n".join([LADDER_TABLE.text(rows), *memory_notes(rows), *row_notes(rows)])


def readme_lines(path: Path) -> list[str]:
    """The GPU results' lines (docs/gpu-run.md) for a committed ladder run
    (``<run>/bench-ladder/bench.json``)."""
    report = json.loads(Path(path).read_text())
    rows = load(report, "ladder")
    precision = rows[0].variant.precision.name if rows else "-"
    lines = [
        f"**MFU ladder of a {precision} ViT-B/16 training step** "
        f"(`{Path(path).parent.name}/bench.json`, {report['config']['rounds']} interleaved rounds; "
        'MFU against the dense peak, "of matmul" against this run\'s measured matmul peak):',
        "",
        *LADDER_README_TABLE.markdown(rows),
    ]
    for note in memory_notes(rows):
        lines += ["", f"{note[0].upper()}{note[1:]}."]
    for note in row_notes(rows):
        lines += ["", f"{note}."]
    for rung, ratio in timm_ratios(rows):
        lines += ["", f"timm's ViT-B/16 at the rung {rung!r}: {ratio:.2f}x the course's step time."]
    return lines


def plot(rows: list[Row], title: str = "", path: str | Path | None = None):
    """Two panels per rung: utilisation (of the dense peak where known, else of the measured
    matmul peak) and images/s; skipped rungs are named and left empty."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    labels = [r.label for r in rows]
    dense = any(r.mfu is not None for r in rows)
    palette = {"timm": "tab:gray", "lean": "tab:green"}
    colours = [palette.get(r.variant.model, "tab:blue") for r in rows]
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
    fig.suptitle(title or "MFU ladder (green: the lean ViT; grey: timm's)", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
