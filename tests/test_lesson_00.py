"""Lesson 00 (cells executed from the notebook): the MNIST CNN learns in smoke mode, the AMP run
follows the fp32 one, and the plots read well."""

import matplotlib.pyplot as plt
import nbformat
import pytest
from conftest import ROOT

import amp_course as ac

NOTEBOOK = ROOT / "notebooks" / "00_scenario.ipynb"


def run_cells(cells, namespace):
    for cell in cells:
        exec(compile(cell.source, str(NOTEBOOK), "exec"), namespace)
    return namespace


def tagged(nb, tag):
    (cell,) = [c for c in nb.cells if tag in c.metadata.get("tags", [])]
    return cell


@pytest.fixture(scope="module")
def lesson():
    """The parameters and settings cells in smoke mode on the CPU, then the MNIST training."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    parameters = tagged(nb, "parameters")
    settings = nb.cells[nb.cells.index(parameters) + 1]  # the derived-settings cell follows
    namespace = run_cells([parameters], {"ac": ac})
    # A short AMP run keeps the test quick where bf16 is emulated; the fp32 run is the lesson's.
    namespace.update(SMOKE=True, DEVICE="cpu", AMP_SMOKE_STEPS=3)
    run_cells([settings, tagged(nb, "mnist-train")], namespace)
    return nb, namespace


def test_smoke_mode_cnn_learns_mnist(lesson):
    _, ns = lesson
    losses, seconds, accuracy = ns["runs"]["fp32"]
    assert accuracy > 0.90, f"test accuracy {accuracy:.1%} after {len(losses)} steps"
    assert sum(losses[:5]) / 5 > 2.0  # it starts as a guess among ten digits (ln 10 = 2.30)
    assert sum(losses[-10:]) / 10 < 0.5  # and visibly learns


def test_amp_run_follows_the_fp32_run(lesson):
    _, ns = lesson
    fp32_losses = ns["runs"]["fp32"][0]
    amp_losses, _, amp_accuracy = ns["runs"][ns["amp_name"]]
    if ns["slow_amp"]:
        assert len(amp_losses) == 3 and amp_accuracy is None  # stopped early, and says so
    else:
        assert len(amp_losses) == len(fp32_losses) and amp_accuracy > 0.90
    # Same weights, same batches: the first steps differ only by autocast's rounding.
    for fp32, amp in zip(fp32_losses[:3], amp_losses[:3], strict=True):
        assert abs(fp32 - amp) < 0.1


@pytest.fixture
def figures(monkeypatch):
    """pyplot with ``show`` a no-op, so the figure a cell draws stays open to be inspected."""
    plt.close("all")
    monkeypatch.setattr(plt, "show", lambda: None)
    yield plt
    plt.close("all")


def test_loss_plot_is_linear_and_shows_both_runs(lesson, figures):
    nb, ns = lesson
    run_cells([tagged(nb, "mnist-plot")], ns)
    whole, first_steps = plt.gcf().axes
    for ax in (whole, first_steps):
        assert ax.get_yscale() == "linear"
        assert [line.get_label() for line in ax.get_lines()] == list(ns["runs"])
    assert whole.get_ylim()[0] == 0


def test_memory_chart_gives_each_part_one_colour_and_keeps_the_legend_outside(figures):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    gib = 2**30
    # Made-up sizes: only the drawing is under test here, not the measurement.
    ns = {
        "ac": ac,
        "plt": plt,
        "GLOBAL_BATCH": 64,
        "VIT_NAME": "ViT",
        "num_params": gib // 16,
        "saved": {"fp32": (gib // 8, 0), "AMP": (gib // 16, gib // 8)},
    }
    run_cells([tagged(nb, "memory-chart")], ns)
    ax = plt.gcf().axes[0]
    parts = ac.memory.MemoryBreakdown.PARTS
    bars = [patch for container in ax.containers for patch in container]
    assert len(bars) == 2 * len(parts)
    colours = [bar.get_facecolor() for bar in bars]
    fp32, amp = colours[: len(parts)], colours[len(parts) :]
    assert fp32 == amp and len(set(fp32)) == len(parts)  # one colour per part, the same in both
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [p.replace("_", " ") for p in parts]
    figure = plt.gcf()
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    legend_box = legend.get_window_extent(renderer)
    assert legend_box.x0 >= ax.get_window_extent(renderer).x1  # beside the bars, not on them
