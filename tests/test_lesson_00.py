"""Lesson 00 (cells executed from the notebook): the MNIST CNN learns in smoke mode, the AMP run
follows the fp32 one, the printed step counts and speed verdicts are what ran, and the plots read
well."""

import functools
import itertools
import math
import re
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pytest
import torch
from conftest import NOTEBOOKS, has_tag, run_tagged
from torch.utils.data import TensorDataset

import amp_course as ac
from amp_course.tooling.executed import printed

LESSON = "00_scenario"
NOTEBOOK = next(p for p in NOTEBOOKS if p.stem == LESSON)


@pytest.fixture(scope="module")
def lesson():
    """The parameters and settings cells in smoke mode on the CPU, then the MNIST training on a
    few batches: its cells as the lesson has them, short (the lesson's own run, learning on all
    of its digits, is the executed copy's: ``test_smoke_mode_cnn_learns_mnist``)."""
    namespace = run_tagged(LESSON, "parameters", namespace={"ac": ac})
    namespace.update(SMOKE=True, DEVICE="cpu", NUM_TRAIN=3 * 128, AMP_SMOKE_STEPS=2)
    return run_tagged(LESSON, "settings", "mnist-recipe", "mnist-train", namespace=namespace)


RUN_LINE = re.compile(
    r"^fp32 +(\d+) steps in +[\d.]+ s, loss ([\d.]+) at the first step, ([\d.]+) over the last "
    r"(\d+); test accuracy ([\d.]+)%$",
    re.M,
)


@pytest.mark.notebook
@pytest.mark.executes_lessons
@pytest.mark.parametrize("path", [NOTEBOOK], ids=[LESSON])
def test_smoke_mode_cnn_learns_mnist(path, executed_lesson):
    """The lesson's own smoke run (papermill's, once for the suite) trains the CNN to a model
    that learned, on every step it planned."""
    cell = next(c for c in executed_lesson(path).cells if has_tag(c, "mnist-train"))
    said = printed(cell, streams=("stdout",))
    found = RUN_LINE.search(said)
    assert found, said
    steps, first, last, window, accuracy = found.groups()
    planned = printed(
        next(c for c in executed_lesson(path).cells if has_tag(c, "mnist-recipe")),
        streams=("stdout",),
    )
    assert f"= {steps} steps per run" in planned
    assert float(accuracy) > 90, said
    assert float(first) > 2.0  # it starts as a guess among ten digits (ln 10 = 2.30)
    assert int(window) == 10 and float(last) < 0.5  # and visibly learns


def test_amp_run_follows_the_fp32_run(lesson):
    ns = lesson
    fp32_losses = ns["runs"]["fp32"][0]
    amp_losses, _, amp_accuracy, _ = ns["runs"][ns["amp_name"]]
    assert len(fp32_losses) == 6  # 2 epochs of 3 batches
    # Smoke mode on a CPU stops the AMP run early: after AMP_SMOKE_STEPS where bf16 is
    # emulated, else after one epoch; no accuracy for a run stopped early.
    assert len(amp_losses) == (2 if ns["slow_amp"] else 3) and amp_accuracy is None
    # Same weights, same batches: the first steps differ only by autocast's rounding.
    for fp32, amp in zip(fp32_losses[:2], amp_losses[:2], strict=True):
        assert abs(fp32 - amp) < 0.1


def test_printed_step_counts_are_what_ran_when_the_lesson_asks_for_more_data(monkeypatch, capsys):
    """Asked for more digits than the data holds, the lesson warns and prints the steps it ran."""
    subset = ac.data.load_mnist("subset")
    tiny = ac.data.MnistData(
        TensorDataset(*(t[:300] for t in subset.train.tensors)),
        TensorDataset(*(t[:64] for t in subset.test.tensors)),
        source="300 test digits",
    )
    monkeypatch.setattr(ac.data, "load_mnist", lambda *args, **kwargs: tiny)
    ns = run_tagged(LESSON, "parameters", namespace={"ac": ac})
    # One AMP step: the counts under test are fp32's, and an emulated bf16 step costs a second.
    ns.update(SMOKE=True, DEVICE="cpu", NUM_TRAIN=1000, AMP_SMOKE_STEPS=1)
    with pytest.warns(ac.data.ShortDataWarning, match="Asked for 1000 training digits.* holds 300"):
        run_tagged(LESSON, "settings", "mnist-recipe", "mnist-train", namespace=ns)
    printed = capsys.readouterr().out
    ran = len(ns["runs"]["fp32"][0])
    assert ran == ns["EPOCHS"] * (300 // ns["BATCH_SIZE"])
    planned = re.search(r"= (\d+) steps per run", printed)
    reported = re.search(r"^fp32 +(\d+) steps", printed, re.M)
    assert planned and reported, printed
    assert int(planned.group(1)) == int(reported.group(1)) == ran


# A line of the ViT-L/16 count: the lesson prints its GPU's two lines first.
FIGURES = re.compile(
    r"^(fp32|AMP) *: +([\d.]+) MiB of activations per image, +([\d.]+) MiB of weight copies", re.M
)


def test_on_a_cpu_the_lesson_counts_what_the_committed_h100_runs_measured():
    """On a CPU the lesson counts its ViT-L/16 for an H100 without data: the figures that the
    course's committed H100 runs of the same cell printed from real tensors."""
    runs = [
        run
        for run in ac.gpu_runs.committed_outputs(
            f"{LESSON}.ipynb", "bbee85af", containing="MiB of activations per image"
        )
        if ac.gpus.lookup(run.where.split(",")[0]) is ac.gpus.GPUS[ac.memory.DEFAULT_GPU]
    ]
    assert runs, "no committed H100 run of lesson 00 printed its ViT-L/16 figures"
    counted = {}
    for run in runs:
        amp = re.search(r"autocast (\w+)", run.text).group(1)  # the run's AMP dtype
        if amp not in counted:
            ns = run_tagged(LESSON, "parameters", namespace={"ac": ac})
            ns.update(SMOKE=True, DEVICE="cpu", AMP_DTYPE=amp)
            run_tagged(LESSON, "settings", "vit-count", namespace=ns)
            counted[amp] = [
                (mode, f"{act / 2**20:.1f}", f"{copies / 2**20:.1f}")
                for mode, (act, copies) in ns["saved"].items()
            ]
        assert counted[amp] == FIGURES.findall(run.text)[:2], run.run


def _runs(*seconds):
    """A Measurement whose runs took ``seconds``: what round_robin returns for one step."""
    spec = torch.utils.benchmark.utils.common.TaskSpec("fn()", "pass")
    return torch.utils.benchmark.Measurement(1, list(seconds), spec)


class _Batch:
    """A batch of 128 that goes to any device a tensor goes to, and slices to itself."""

    def to(self, device):
        torch.device(device)  # as strict about the device's name as a tensor
        return self

    def __len__(self):
        return 128

    def __getitem__(self, index):
        return self


def _speed_verdict(monkeypatch, capsys, fp32_s, amp_s, on_gpu, amp_dtype, fast, failed=None):
    """What the speed cell prints for faked interleaved timings (the runs' seconds of each step)
    and faked hardware."""
    # A CPU with both native paths, or with neither (the flags of ac.precisions).
    flags = {"avx512_bf16", "avx512_fp16"} if fast is True else set()
    monkeypatch.setattr(ac.cpu, "usable_flags", lambda: frozenset(flags))
    amp_name = f"AMP ({ac.precisions.name_of(amp_dtype)})"
    stepped = []

    def fake_round_robin(fns, *, device, rounds, min_run_time, **kwargs):
        assert list(fns) == ["fp32", amp_name] and rounds >= 3  # both steps, in alternation
        for fn in fns.values():
            fn()
        times = {"fp32": _runs(*fp32_s), amp_name: _runs(*amp_s)}
        return {k: v for k, v in times.items() if k not in (failed or {})}, failed or {}

    monkeypatch.setattr(ac.timing, "round_robin", fake_round_robin)
    state = ("model", "optimizer", "scaler")
    ns = {
        "ac": ac,
        "torch": torch,
        "functools": functools,
        "settings": SimpleNamespace(
            on_gpu=on_gpu,
            smoke=not on_gpu,
            capability=fast if on_gpu else None,
            precision=ac.precisions.get(amp_dtype),
        ),
        "device": torch.device("cuda" if on_gpu else "cpu"),
        "amp_dtype": amp_dtype,
        "amp_name": amp_name,
        "slow_amp": False,
        "train_loader": [(_Batch(), _Batch())],  # images and labels that go to any device
        "train_step": lambda *args: stepped.append(args[-1]),
        "runs": {"fp32": ([], [9.0], None, state), amp_name: ([], [0.1], None, state)},
    }
    run_tagged(LESSON, "mnist-speed", namespace=ns)
    assert stepped == [None, amp_dtype]  # each timed function is a step of its own precision
    return capsys.readouterr().out


FAST, CLOSE, SLOW = (0.0095, 0.01, 0.0105), (0.0098, 0.0102, 0.0108), (0.019, 0.02, 0.021)


@pytest.mark.parametrize(
    "fp32_s, amp_s, on_gpu, amp_dtype, fast, verdict, no_difference",
    [
        (SLOW, FAST, True, torch.bfloat16, (9, 0), "faster.*AMP paid off: this GPU has", False),
        (SLOW, FAST, True, torch.float16, (6, 1), "AMP ran faster although this GPU lacks", False),
        (
            FAST,
            CLOSE,
            True,
            torch.float16,
            (7, 5),
            "At this size, although this GPU has .*: no clear difference",
            True,
        ),
        (
            FAST,
            SLOW,
            False,
            torch.bfloat16,
            True,
            "not pay off at this size, although this CPU",
            False,
        ),
        (
            FAST,
            SLOW,
            False,
            torch.bfloat16,
            False,
            "not pay off, and this CPU lacks native bf16",
            False,
        ),
        (FAST, SLOW, False, torch.float16, False, "this CPU lacks native fp16", False),
        (
            (0.029, 0.03, 0.031),
            FAST,
            False,
            torch.bfloat16,
            True,
            "takes 0.33x the strict fp32 time.*AMP paid off: this CPU has",
            False,
        ),
        # Medians 1.3x apart, but the runs' spreads overlap: a loaded machine, no verdict.
        (
            (0.01, 0.013, 0.03),
            (0.009, 0.01, 0.028),
            False,
            torch.bfloat16,
            True,
            "At this size, although this CPU has .*: no clear difference",
            True,
        ),
        # Medians 5% apart with tight spreads: told apart, whatever their ratio.
        (
            (0.0104, 0.0105, 0.0106),
            (0.0099, 0.01, 0.0101),
            True,
            torch.bfloat16,
            (9, 0),
            "paid",
            False,
        ),
    ],
)
def test_speed_sentences_follow_the_interleaved_measurement_and_the_hardware(
    monkeypatch, capsys, fp32_s, amp_s, on_gpu, amp_dtype, fast, verdict, no_difference
):
    printed = _speed_verdict(monkeypatch, capsys, fp32_s, amp_s, on_gpu, amp_dtype, fast)
    assert re.search(verdict, printed, re.S), printed
    assert ("no clear difference" in printed) == no_difference, printed
    assert ("not distinguishable" in printed) == no_difference, printed
    # No cause is given for a difference that was not measured.
    assert not (no_difference and "did not pay off" in printed), printed


def test_speed_cell_gives_no_verdict_when_a_timed_step_fails(monkeypatch, capsys):
    failed = {"AMP (bf16)": "RuntimeError: out of memory"}
    printed = _speed_verdict(monkeypatch, capsys, SLOW, FAST, False, torch.bfloat16, True, failed)
    assert "AMP (bf16): the timed step failed (RuntimeError: out of memory)" in printed
    assert "paid off" not in printed and "faster" not in printed


def test_speed_cell_times_the_trained_models_in_alternation(lesson, monkeypatch, capsys):
    """The real cell, after the lesson's training: both steps timed round-robin, and the verdict
    printed is ac.timing.compare's on those timings, not the training runs' medians."""
    calls = []
    round_robin = ac.timing.round_robin

    def spy(fns, **kwargs):
        wrapped = {name: (lambda n=name, f=fn: (calls.append(n), f())) for name, fn in fns.items()}
        return round_robin(wrapped, **kwargs)

    monkeypatch.setattr(ac.timing, "round_robin", spy)
    ns = lesson
    run_tagged(LESSON, "mnist-speed", namespace=ns)
    printed = capsys.readouterr().out
    amp_name = ns["amp_name"]
    switches = sum(a != b for a, b in itertools.pairwise(calls))
    assert switches >= 2 * 3 - 1, calls  # fp32 and AMP alternate, round after round
    measured = ns["measured"]
    expected = ac.timing.compare(measured["fp32"], measured[amp_name], ("strict fp32", amp_name))
    assert expected.sentence() in printed, printed
    assert ("no clear difference" in printed) == (expected.verdict == "indistinguishable")


def _vit_gpu_cell(
    monkeypatch, usable_gib, fixed_gib=4.8, per_image_gib=0.48, fail_at=None, one_time_gib=0.0
):
    """Lesson 00's ViT-L/16 GPU cell on the CPU, with the GPU simulated: a step's peak is
    ``fixed_gib`` + ``per_image_gib`` per image (about the H100's fp32 ViT-L/16 step), the process
    may use ``usable_gib``, a step of ``fail_at`` images or more runs out of memory, and the
    process's first step also allocates ``one_time_gib`` that stays (cuBLAS's workspace: in the
    first peak, in every later baseline)."""
    gib, batches, measured = 2**30, [], []

    def synthetic_images(batch, device=None):
        batches.append(batch)
        return torch.randn(batch, 4), torch.zeros(batch, dtype=torch.long)

    def step_peak_memory(make_step, device):
        make_step()  # builds the (stand-in) model, optimizer and batch
        if fail_at is not None and batches[-1] >= fail_at:
            raise ac.memory.OutOfMemoryError("CUDA out of memory (simulated)")
        one_time = one_time_gib if not measured else 0.0
        measured.append(batches[-1])
        return int((fixed_gib + per_image_gib * batches[-1] + one_time) * gib)

    monkeypatch.setattr(ac.memory, "usable_cuda_bytes", lambda device=None: usable_gib * gib)
    monkeypatch.setattr(ac.memory, "step_peak_memory", step_peak_memory)
    monkeypatch.setattr(ac.data, "synthetic_images", synthetic_images)
    monkeypatch.setattr(ac.models, "build_vit", lambda preset: torch.nn.Linear(4, 10))
    ns = {
        "ac": ac,
        "torch": torch,
        "F": torch.nn.functional,
        "settings": SimpleNamespace(
            on_gpu=True,
            smoke=False,
            hardware="a simulated GPU; x",
            precision=ac.precisions.FP16,  # the lesson's AMP precision: amp_dtype's row
        ),
        "VIT_PRESET": "l16",
        "VIT_GPU_BATCH": 32,
        "num_params": 304_000_000,
        "saved": {"fp32": (0.31 * gib, 0), "AMP": (0.16 * gib, 608_000_000)},
        "amp_dtype": torch.float16,
        "device": torch.device("cpu"),
    }
    run_tagged(LESSON, "vit-gpu-peak", namespace=ns)
    return batches


def test_vit_gpu_cell_picks_a_batch_that_fits_a_t4(monkeypatch, capsys):
    batches = _vit_gpu_cell(monkeypatch, usable_gib=15)
    printed = capsys.readouterr().out
    assert "4.80 GiB fixed + 492 MiB per image" in printed, printed
    assert "VIT_GPU_BATCH=32 would need" in printed and "this run uses batch 16" in printed
    assert batches == [2, 2, 4, 16, 16] and "fp32: peak 12.48 GiB at batch 16" in printed
    batches = _vit_gpu_cell(monkeypatch, usable_gib=78)
    assert "VIT_GPU_BATCH=32 fits" in capsys.readouterr().out and batches[-2:] == [32, 32]


def test_vit_gpu_cell_names_the_setting_to_lower_when_memory_runs_out(monkeypatch, capsys):
    _vit_gpu_cell(monkeypatch, usable_gib=78, fail_at=32)  # the estimate was too hopeful
    printed = capsys.readouterr().out
    assert "CUDA out of memory (simulated)" in printed and "Set VIT_GPU_BATCH lower" in printed
    _vit_gpu_cell(monkeypatch, usable_gib=5)  # not even one image fits next to the fixed state
    assert "Not even one sample fits" in capsys.readouterr().out


def test_vit_gpu_cell_plans_from_steps_after_the_first(monkeypatch, capsys):
    """On an H200 the first step's one-time allocations made the bytes per image negative and
    fit_batch planned batch -6912: the cell discards a first step before it measures."""
    batches = _vit_gpu_cell(monkeypatch, usable_gib=139, per_image_gib=0.3, one_time_gib=1.5)
    printed = capsys.readouterr().out
    assert "4.80 GiB fixed + 307 MiB per image" in printed, printed
    assert "VIT_GPU_BATCH=32 fits" in printed and batches[-2:] == [32, 32]


@pytest.fixture
def figures(monkeypatch):
    """pyplot with ``show`` a no-op, so the figure a cell draws stays open to be inspected."""
    plt.close("all")
    monkeypatch.setattr(plt, "show", lambda: None)
    yield plt
    plt.close("all")


def test_loss_plot_is_linear_and_shows_both_runs(lesson, figures):
    ns = lesson
    run_tagged(LESSON, "mnist-plot", namespace=ns)
    whole, first_steps = plt.gcf().axes
    for ax in (whole, first_steps):
        assert ax.get_yscale() == "linear"
        # Each line is named after its run and the number of steps that ran.
        expected = [f"{name}, {len(run[0])} steps" for name, run in ns["runs"].items()]
        assert [line.get_label() for line in ax.get_lines()] == expected
    assert whole.get_ylim()[0] == 0


def _memory_chart(figures):
    """The memory chart drawn from the H100's ViT-L/16 figures (only the drawing is under test)."""
    mib = 2**20
    ns = {
        "ac": ac,
        "plt": plt,
        "GLOBAL_BATCH": 4096,
        "VIT_NAME": "ViT-L/16",
        "num_params": 304_326_632,
        "saved": {"fp32": (316.5 * mib, 0), "AMP": (167.6 * mib, 579.5 * mib)},
    }
    run_tagged(LESSON, "memory-chart", namespace=ns)
    return plt.gcf(), ns


def test_memory_chart_gives_each_part_one_colour_and_keeps_the_legend_outside(figures):
    figure, _ = _memory_chart(figures)
    ax = figure.axes[0]
    parts = ac.memory.MemoryBreakdown.PARTS
    bars = [patch for container in ax.containers for patch in container]
    assert len(bars) == 2 * len(parts)
    colours = [bar.get_facecolor() for bar in bars]
    fp32, amp = colours[: len(parts)], colours[len(parts) :]
    assert fp32 == amp and len(set(fp32)) == len(parts)  # one colour per part, the same in both
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [p.replace("_", " ") for p in parts]
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    legend_box = legend.get_window_extent(renderer)
    assert legend_box.x0 >= ax.get_window_extent(renderer).x1  # beside the bars, not on them


def test_memory_chart_makes_every_part_readable(figures):
    """The stacked bars leave the small parts as slivers; the second chart shows each part on a
    log scale, wide enough to see, with its size written beside it."""
    figure, ns = _memory_chart(figures)
    each = figure.axes[1]
    assert each.get_xscale() == "log"
    left, right = (math.log10(x) for x in each.get_xlim())
    texts = [t.get_text() for t in each.texts]
    for mode, breakdown in ns["breakdowns"].items():
        for part in ac.memory.MemoryBreakdown.PARTS:
            gib = getattr(breakdown, part) / 2**30
            if gib == 0:
                assert f" {mode}: none" in texts
                continue
            assert f" {mode}: {gib:.2f} GiB" in texts
            assert (math.log10(gib) - left) / (right - left) > 0.15, (mode, part)
    labels = [t.get_text() for t in each.get_yticklabels()]
    assert labels == [p.replace("_", " ") for p in ac.memory.MemoryBreakdown.PARTS]
