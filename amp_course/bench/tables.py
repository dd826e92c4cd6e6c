"""The bench's one table renderer: rows (``rows.Row``) drawn by column specs, as fixed-width text
(what ``amp-course bench``, lesson 05 and lesson 10 print) or as Markdown (the GPU run's results
and the website's GPU page). Each table is a ``Table`` of ``Column``s, and every table's spec is
here: the bench report's workloads, the MFU ladder's (text and Markdown), and the GPU results' ViT
matrix and square matmuls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import timing
from .rows import Row

NOT_MEASURED = "not measured"  # the peak-memory cell of a row with a memory_note


@dataclass(frozen=True)
class Column:
    """A column: its title, what a row shows in it (a ``Row`` attribute, or a function of the row
    that returns the value or the cell's text), and ``spec``, how a value is written
    (``timing.format_cell``'s: "time", ".1%"...; a missing value is "-")."""

    title: str
    value: str | Callable[[Row], object]
    spec: str = ""
    width: int = 11  # in a text table, right-aligned
    when_skipped: bool = False  # a Markdown table shows it for a skipped row too

    def cell(self, row: Row) -> str:
        value = getattr(row, self.value) if isinstance(self.value, str) else self.value(row)
        return value if isinstance(value, str) else timing.format_cell(value, self.spec)


@dataclass(frozen=True)
class Table:
    """Column specs, after a first column that labels each row (with its configuration's name,
    unless ``label_of`` says otherwise)."""

    label: str  # the first column's title: "mode", "rung"
    columns: tuple[Column, ...]
    label_width: int | None = None  # text: None fits the longest label, with 2 spaces after it
    skipped_gap: str = ""  # text: between the label and "skipped: <why>"
    label_of: Callable[[Row], str] = lambda row: row.label

    def text(self, rows: list[Row]) -> str:
        """The rows as a fixed-width table; a skipped row says why instead of its cells."""
        labels = [self.label_of(r) for r in rows]
        width = self.label_width or max([len(label) for label in labels] + [len(self.label)]) + 2
        lines = [f"{self.label:<{width}}" + "".join(f"{c.title:>{c.width}}" for c in self.columns)]
        for row, label in zip(rows, labels, strict=True):
            if row.skipped:
                lines.append(f"{label:<{width}}{self.skipped_gap}skipped: {row.skipped}")
                continue
            lines.append(
                f"{label:<{width}}" + "".join(f"{c.cell(row):>{c.width}}" for c in self.columns)
            )
        return "\n".join(lines)

    def markdown(self, rows: list[Row]) -> list[str]:
        """The rows as a Markdown table's lines; a skipped row keeps its ``when_skipped`` cells,
        says why in the next one and leaves the rest empty."""
        lines = [_markdown_line([self.label, *(c.title for c in self.columns)])]
        lines.append("|" + "---|" * (len(self.columns) + 1))
        for row in rows:
            if row.skipped:
                kept = [c.cell(row) for c in self.columns if c.when_skipped]
                blank = [""] * (len(self.columns) - len(kept) - 1)
                why = f"skipped: {row.skipped}"
                lines.append(_markdown_line([self.label_of(row), *kept, why, *blank]))
            else:
                cells = [c.cell(row) for c in self.columns]
                lines.append(_markdown_line([self.label_of(row), *cells]))
        return lines


def _markdown_line(cells: list[str]) -> str:
    return "|" + "".join(f" {cell} |" if cell else " |" for cell in cells)


def peak_memory_cell(row: Row) -> float | str | None:
    """The peak memory in GiB, or why it was not measured."""
    return NOT_MEASURED if row.memory_note else row.peak_memory_gib


# The bench report's tables (``report.format_report``), one per workload; ViT-L/16 as ViT-B/16.
REPORT_TABLES = {
    workload: Table("mode", tuple(Column(*spec) for spec in specs), 16, " ")
    for workload, specs in {
        "matmul": [
            ("size", "size", "d"),
            ("median", "median_s", "time"),
            ("TFLOP/s", "achieved_tflops", ".3g"),
            ("peak", "dense_peak_tflops", ".4g"),
            ("of peak", "mfu", ".1%"),
        ],
        "mnist_cnn": [
            ("batch", "batch", "d"),
            ("step", "median_s", "time"),
            ("img/s", "images_per_s", ".4g"),
            ("epoch (s)", "epoch_s", ".3g"),
        ],
        "vit": [
            ("batch", "batch", "d"),
            ("step", "median_s", "time"),
            ("img/s", "images_per_s", ".4g"),
            ("TFLOP/s", "achieved_tflops", ".3g"),
            ("MFU", "mfu", ".1%"),
            ("of matmul", "mfu_of_matmul", ".1%"),
            ("peak GiB", "peak_memory_gib", ".2f"),
        ],
        "max_batch": [("max batch", "max_batch", "d"), ("limit", "limit", "d")],
    }.items()
}


# The MFU ladder's rungs: MFU against the published dense peak, "of matmul" against the measured
# matmul peak; as text (lesson 10, amp-course bench) and in the GPU run's results (Markdown).
LADDER_TABLE = Table(
    "rung",
    (
        Column("batch", "batch", "d", 10),
        Column("step", "median_s", "time", 10),
        Column("img/s", "images_per_s", ".4g", 10),
        Column("TFLOP/s", "achieved_tflops", ".3g", 10),
        Column("MFU", "mfu", ".1%", 10),
        Column("of matmul", "mfu_of_matmul", ".1%", 10),
        Column("peak GiB", peak_memory_cell, ".2f", 14),  # wide enough for NOT_MEASURED
    ),
)


def memory_text(row: Row) -> str:
    """The peak memory as a results line writes it, or why it was not measured."""
    if row.memory_note:
        return NOT_MEASURED
    return "-" if row.peak_memory_bytes is None else f"{row.peak_memory_gib:.2f} GiB"


LADDER_README_TABLE = Table(
    "rung",
    (
        Column("batch", "batch", "d", when_skipped=True),
        Column("step", "median_s", "time"),
        Column("images/s", "images_per_s", ".0f"),
        Column("MFU", "mfu", ".1%"),
        Column("of matmul", "mfu_of_matmul", ".1%"),
        Column("peak memory", memory_text),
    ),
)


def vit_speedup_table(fp32: Row, tf32: Row) -> Table:
    """The GPU run's ViT-B/16 matrix: each mode's step, speed-up and memory against fp32's (and
    TF32's), its TFLOP/s and MFU."""
    return Table(
        "mode",
        (
            Column("step", "median_s", "time"),
            Column("speed-up vs fp32", lambda row: f"{row.speedup_over(fp32):.2f}x"),
            Column("vs TF32", lambda row: f"{row.speedup_over(tf32):.2f}x"),
            Column("peak memory", lambda row: f"{row.peak_memory_gib:.2f} GiB"),
            Column("/ fp32", lambda row: f"{row.memory_ratio(fp32):.2f}x"),
            Column("TFLOP/s", "achieved_tflops", ".0f"),
            Column("MFU (peak)", lambda row: f"{row.mfu:.1%} ({row.dense_peak_tflops:g})"),
        ),
    )


def matmul_rates_table(by_size: dict[int, dict[str, Row]], names: tuple[str, ...]) -> Table:
    """The square matmuls, one line per size: each precision's TFLOP/s and its share of the
    published dense peak (``by_size``: size -> precision name -> row)."""

    def rate(name):
        def cell(row):
            at = by_size[row.size].get(name)
            return "" if at is None else f"{at.achieved_tflops:.3g} ({at.mfu:.1%})"

        return cell

    return Table("n", tuple(Column(p, rate(p)) for p in names), label_of=lambda r: str(r.size))
