"""Lesson 09 (cells executed from the notebook): the pure-bf16 runs print and plot the steps that
ran, every line of their plot stays visible, the checkpointing cost is read from the numbers, and
on a GPU its timing batch pays for both models it holds."""

import types

import fake_torchao
import matplotlib.pyplot as plt
import pytest
import torch
from conftest import run_tagged

import amp_course as ac

LESSON = "09_beyond_autocast"


@pytest.fixture
def lesson(monkeypatch):
    """The parameters and settings cells on the CPU, with figures kept open and the shipped
    MNIST subset as the data (whatever else the machine has)."""
    plt.close("all")
    monkeypatch.setattr(plt, "show", lambda: None)
    subset = ac.data.load_mnist(source="subset")
    monkeypatch.setattr(ac.data, "load_mnist", lambda *a, **k: subset)
    namespace = run_tagged(LESSON, "parameters", namespace={"ac": ac})
    namespace.update(DEVICE="cpu", SMOKE=True)
    yield namespace
    plt.close("all")


def test_pure_bf16_runs_say_and_plot_the_steps_that_ran_and_every_line_shows(lesson, capsys):
    # Full mode asks for more steps than the shipped subset's 4,000 training digits hold.
    lesson.update(SMOKE=False, BF16_STEPS=100)
    run_tagged(LESSON, "settings", "pure-bf16-tools", "pure-bf16-runs", namespace=lesson)
    held = len(lesson["data"].train) // 64
    assert held < 100 and lesson["steps_run"] == held
    assert all(len(losses) == held for losses, _, _ in lesson["results"].values())
    printed = capsys.readouterr().out
    assert f"each run: {held} steps of 64 digits (100 asked for" in printed
    assert f"of {held} steps" in printed
    loss_axes, gap_axes = plt.gcf().axes
    assert loss_axes.get_title() == f"{held} steps"

    lines = loss_axes.get_lines()
    assert [line.get_label() for line in lines] == list(lesson["results"])
    looks = {(line.get_color(), str(line.get_linestyle()), line.get_linewidth()) for line in lines}
    assert len(looks) == len(lines)  # no two runs drawn alike
    reference, others = lines[0], lines[1:]
    assert all(reference.get_zorder() < line.get_zorder() for line in others)  # drawn beneath
    assert all(reference.get_linewidth() > line.get_linewidth() for line in others)  # and wider
    # The zoomed panel shows the runs that keep small updates, not round-to-nearest's gap.
    zoomed = [line.get_label() for line in gap_axes.get_lines()]
    assert "bf16, round to nearest" not in zoomed and "bf16 + Kahan" in zoomed


def test_torchaos_bf16_adamw_is_not_built_where_its_compiled_step_cannot_run(
    lesson, tmp_path, monkeypatch, capsys
):
    """On a CPU torchao would compile its step in C++ per parameter shape: the run is skipped
    with the reason, and the other runs go on (a GPU below 8.0 is decided the same way:
    tests/test_torchao_support.py)."""
    fake_torchao.install(tmp_path, monkeypatch)
    lesson.update(BF16_STEPS=4)
    run_tagged(LESSON, "settings", "pure-bf16-tools", "pure-bf16-runs", namespace=lesson)
    printed = capsys.readouterr().out
    assert "torchao 0.18.0 installed" in printed
    assert "torchao's AdamW run skipped: on a CPU" in printed
    assert "bf16 + stochastic rounding" in lesson["results"]
    assert not any(label.startswith("torchao") for label in lesson["results"])


@pytest.mark.parametrize(
    "checkpointed_s, verdict",
    [
        (0.03, "slower per FLOP"),
        (0.009, "no cost of the recompute"),
        (0.0101, "not distinguishable"),
    ],
)
def test_checkpointing_cost_is_read_from_the_measurement(
    lesson, monkeypatch, capsys, checkpointed_s, verdict
):
    # Timings faked both ways: the sentence follows the numbers, not a rule of thumb.
    def fake_round_robin(fns, **kwargs):
        times = {"plain": 0.01, "checkpointed": checkpointed_s}
        # Runs 2% either side of the median: the quartiles the verdict reads.
        return {
            k: types.SimpleNamespace(
                median=times[k], iqr=0.001, times=[times[k] * f for f in (0.98, 1.0, 1.02)]
            )
            for k in fns
        }, {}

    monkeypatch.setattr(ac.timing, "round_robin", fake_round_robin)
    run_tagged(LESSON, "settings", "checkpoint-cost", namespace=lesson)
    printed = capsys.readouterr().out
    extra = lesson["extra_flops"]
    assert 0.1 < extra < 0.34  # the recompute: less than one more forward, a third of a step
    assert f"{checkpointed_s / 0.01 - 1:+.0%} time" in printed
    assert verdict in printed


def test_compiled_autocast_is_explicit_casts_and_emulation_restores_eagers_rounding(lesson, capsys):
    run_tagged(LESSON, "settings", "compile-graph", "compile-numerics", namespace=lesson)
    printed = capsys.readouterr().out
    # Section 5's prose: casts before the three matmuls (the input once per matmul reading it),
    # none between the matmuls and silu/mul, and no autocast op left in the graph.
    assert "forward graph: 13 ops, 5 of them casts to bf16" in printed
    assert "_to_copy, _to_copy, t, mm, silu, _to_copy, _to_copy, t, mm, mul.Tensor" in printed
    results = lesson["results"]
    assert not (results["compiled"] == results["eager"]).all()  # fusion changed the last bits
    assert (results["compiled"] != results["eager"]).float().mean() > 0.2
    assert (results["compiled"].float() - results["eager"].float()).abs().max() < 0.01
    assert results["compiled, emulate_precision_casts"].equal(results["eager"])
    # The cell compiles a copy of the block already in bf16 (no casts to build kernels for); its
    # eager outputs are the fp32 block's under autocast, to the bit.
    with torch.no_grad():
        assert results["eager"].equal(lesson["mlp_under_autocast"](lesson["block_input"]))


def test_the_fp8_matmul_on_a_cpu_computes_the_first_outputs_with_their_own_reference(
    lesson, capsys
):
    """On a CPU with AMX torch._scaled_mm is oneDNN's reference kernel (about 15 s for the
    layer's 4,096 outputs on a 2-core Xeon; elsewhere torch emulates it in fp32): the cell computes
    128 of them and measures their error against the same 128 columns of the fp32 product, where
    it is the scaled casts' error, as on a GPU."""
    run_tagged(LESSON, "settings", "fp8-matmul", namespace=lesson)
    printed = capsys.readouterr().out
    try:  # with AMX, oneDNN refuses it with its ISA capped below AVX512-FP16
        one, tiny = torch.ones(()), torch.ones(16, 16).to(torch.float8_e4m3fn)
        torch._scaled_mm(tiny, tiny.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    except RuntimeError:
        assert "torch._scaled_mm does not run on this device/build: " in printed
        return
    assert "(128 of 4,096 outputs)" in printed
    line = next(line for line in printed.splitlines() if line.startswith("torch._scaled_mm"))
    error = float(line.split("error ")[1].split("%")[0]) / 100
    emulated = lesson["errors"]["e4m3 casts, per-tensor amax scales"]
    assert error == pytest.approx(emulated, rel=0.05)


def test_on_a_gpu_the_timing_batch_pays_for_both_timed_models(monkeypatch, lesson):
    """The checkpointing timing holds the plain and the checkpointed ViT-L/16 at once (their steps
    alternate), so the batch it plans on a GPU pays for two models' fp32 weights besides one
    step's gradients and autocast's weight copies (the CUDA stand-in plays an H100)."""
    from cuda_double import FakeGpu

    class Planned(Exception):
        pass

    FakeGpu(monkeypatch, "H100 SXM")
    with torch.device("meta"):
        model = ac.models.build_vit("l16")
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    planned = {}

    def fit_batch(wanted, bytes_per_sample, fixed_bytes, available_bytes, **kwargs):
        planned["fixed"] = fixed_bytes
        raise Planned

    monkeypatch.setattr(ac.memory, "fit_batch", fit_batch)
    lesson.update(DEVICE="cuda", SMOKE=False)
    run_tagged(LESSON, "settings", namespace=lesson)
    num_params = ac.models.count_parameters(model)
    copies = 2 * num_params  # autocast's bf16 copy of each weight
    per_image = types.SimpleNamespace(peak=lambda checkpointed: 2**20)
    lesson.update(
        num_params=num_params,
        weight_copies={"AMP": copies, "fp32": 0},
        stacks={"AMP": per_image, "fp32": per_image},
    )
    with pytest.raises(Planned):
        run_tagged(LESSON, "checkpoint-cost", namespace=lesson)
    assert planned["fixed"] == 2 * weights + weights + copies  # two models, one's gradients
