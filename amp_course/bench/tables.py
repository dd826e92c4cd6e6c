"""The bench's one table renderer: rows (``rows.Row``) drawn by column specs, as fixed-width text
(what ``amp-course bench``, lesson 05 and lesson 10 print) or as Markdown (the README's results and
the website's GPU page). Each table is a ``Table`` of ``Column``s; the specs of the bench report's
workloads are here, the ladder's in ``ladder_report``, the README's in its results module."""

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
    label_of: Callable[[Row], str] = lambda row: row.mode

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
