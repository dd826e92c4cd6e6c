"""The bench's one renderer (``bench.tables``) and the figures a row derives from what it measured:
every table (the report's, the ladder's, the README's) is a ``Table`` of ``Column`` specs."""

import dataclasses

import pytest

from amp_course import precisions
from amp_course.bench import Row, Variant, ladder_report, tables


def _vit(name, seconds, **values):
    cell = dataclasses.replace(Variant.parse(name), batch=64)
    return Row("vit_b16", cell, median_s=seconds, **values)


ROWS = [
    _vit("fp32", 0.2, flops_per_step=8e12, dense_peak_tflops=80.0, peak_memory_bytes=2**31),
    _vit("bf16+compile", 0.05, flops_per_step=8e12, dense_peak_tflops=800.0),
    Row("vit_b16", Variant.parse("tf32"), skipped="TF32 is a CUDA tensor-core mode"),
]


def test_a_row_derives_its_figures_from_what_it_measured():
    fp32, bf16, tf32 = ROWS
    assert fp32.images_per_s == pytest.approx(320) and fp32.achieved_tflops == pytest.approx(40)
    assert fp32.mfu == pytest.approx(0.5) and bf16.mfu == pytest.approx(0.2)
    assert bf16.speedup_over(fp32) == pytest.approx(4) and bf16.time_ratio(fp32) == 0.25
    assert fp32.peak_memory_gib == 2 and bf16.peak_memory_gib is None
    # What a row did not measure, it derives nothing from: no figure is made up.
    assert (tf32.images_per_s, tf32.achieved_tflops, tf32.mfu, tf32.epoch_s) == (None,) * 4
    assert fp32.mfu_of_matmul is None  # no measured matmul peak to hold it against
    stored = fp32.to_dict()
    assert stored["mfu"] == fp32.mfu and stored["precision"] == "fp32" and "epoch_s" not in stored
    assert Row.from_dict({**stored, "mfu": 0.99}).mfu == fp32.mfu  # derived again on loading


def test_one_table_draws_text_and_markdown_from_its_column_specs():
    table = tables.Table(
        "mode",
        (
            tables.Column("batch", "batch", "d", 7, when_skipped=True),
            tables.Column("step", "median_s", "time", 9),
            tables.Column("MFU", "mfu", ".1%", 7),
            tables.Column("x fp32", lambda row: f"{row.speedup_over(ROWS[0]):.1f}x", width=8),
        ),
    )
    assert table.text(ROWS).splitlines() == [
        "mode            batch     step    MFU  x fp32",
        "fp32               64   200 ms  50.0%    1.0x",
        "bf16+compile       64    50 ms  20.0%    4.0x",
        "tf32          skipped: TF32 is a CUDA tensor-core mode",
    ]
    assert table.markdown(ROWS) == [
        "| mode | batch | step | MFU | x fp32 |",
        "|---|---|---|---|---|",
        "| fp32 | 64 | 200 ms | 50.0% | 1.0x |",
        "| bf16+compile | 64 | 50 ms | 20.0% | 4.0x |",
        "| tf32 | - | skipped: TF32 is a CUDA tensor-core mode | | |",
    ]
    by_size = dataclasses.replace(table, label="n", label_of=lambda row: str(row.batch))
    assert by_size.markdown(ROWS[:1])[2] == "| 64 | 64 | 200 ms | 50.0% | 1.0x |"


def test_the_report_and_the_ladder_tables_are_specs_of_the_one_renderer():
    report = tables.REPORT_TABLES["vit"].text(ROWS).splitlines()
    titles = "mode batch step img/s TFLOP/s MFU of matmul peak GiB"
    assert report[0].split() == titles.split()
    assert report[1].startswith(f"{'fp32':<16}") and report[1].endswith("2.00")
    assert report[3] == f"{'tf32':<16} skipped: TF32 is a CUDA tensor-core mode"
    rung = Variant("+ CUDA graphs", precisions.BF16, "reduce-overhead", batch=64)
    graphs = Row.from_dict({**ROWS[1].to_dict(), "label": rung.label, "compile": rung.compile})
    assert graphs.memory_note == rung.memory_note  # a graph rung's memory is never shown
    ladder = ladder_report.format_table([ROWS[0], graphs]).splitlines()
    assert ladder[2].endswith(tables.NOT_MEASURED) and len(ladder[2]) == len(ladder[1])


def test_the_matmul_panel_names_dashed_peaks_only_where_it_draws_them():
    import matplotlib.pyplot as plt

    from amp_course.bench import report

    def matmul(size, **peak):
        flops = 2.0 * size**3
        return Row(
            "matmul", Variant.parse("fp32"), size=size, median_s=1e-3, flops_per_step=flops, **peak
        )

    titles = []
    for peak in ({}, {"dense_peak_tflops": 60.0}):  # a CPU's rows, then a GPU's
        fig, ax = plt.subplots()
        report._matmul_panel(ax, [matmul(64, **peak), matmul(128, **peak)])
        titles.append((ax.get_title(), len(ax.get_lines())))
        plt.close(fig)
    assert titles == [
        ("matmul throughput", 1),
        ("matmul throughput (dashed: published peak)", 2),
    ]
