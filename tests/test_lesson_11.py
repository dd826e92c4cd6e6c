"""Lesson 11 (cells executed from the notebook on the CPU): what its prose says about the recorded
gradient, the hand-made block and the optimizer counts holds, the GPU-only cells explain
themselves elsewhere, and the quiz keys agree with torch and the lesson's own arithmetic."""

import math

import matplotlib.pyplot as plt
import pytest
import torch
from conftest import quiz_key, quiz_question, run_tagged

import amp_course as ac

LESSON = "11_below_bf16"


@pytest.fixture(scope="module")
def lesson():
    """Parameters, settings and the recorded run on the CPU with the shipped MNIST subset."""
    show, load = plt.show, ac.data.load_mnist
    subset = load(source="subset")
    plt.show = lambda *args, **kwargs: None
    ac.data.load_mnist = lambda *args, **kwargs: subset
    try:
        namespace = run_tagged(LESSON, "parameters", namespace={"ac": ac})
        namespace.update(DEVICE="cpu", SMOKE=True)
        run_tagged(LESSON, "settings", "record-run", namespace=namespace)
        yield namespace
    finally:
        plt.show, ac.data.load_mnist = show, load
        plt.close("all")


def test_the_largest_gradient_rows_are_digits_the_network_gets_wrong_or_doubts(lesson):
    right, row_amax = lesson["right"], lesson["row_amax"]
    largest = row_amax.argsort(descending=True)[:4]
    assert (right[largest] < right.median()).all()
    assert len(lesson["recorded"]["gradient"]) == lesson["train_steps"]


def test_one_scale_cell_prints_the_ranges_and_fp4_needs_finer_scales(lesson, capsys):
    run_tagged(LESSON, "one-scale", namespace=lesson)
    printed = capsys.readouterr().out
    assert "e4m3: largest value 448" in printed and "a range of 12, narrower" in printed
    one_scale = lesson["one_scale"]
    assert one_scale["e4m3", "tensor"][2] < 0.05  # e4m3's range covers nearly everything
    assert one_scale["e2m1", "tensor"][2] > 3 * one_scale["e2m1", 32][2]


def test_mx_block_cell_shows_what_its_prose_says(lesson, capsys):
    run_tagged(LESSON, "mx-blocks", namespace=lesson)
    rows = lesson["rows"]
    nvfp4 = rows["NVFP4"][0]
    assert nvfp4[0].item() == pytest.approx(7.0, rel=1e-6)  # the amax comes back
    assert nvfp4[1].item() == pytest.approx(0.5 * 7 / 6, rel=1e-6)  # E2M1's grid times 7/6
    assert nvfp4[16] != 0 and rows["MXFP4 (floor, the spec)"][0, 16] == 0  # a block of its own
    assert "MXFP4 rceil: shared scale 2^1" in capsys.readouterr().out


def test_gpu_cells_explain_what_they_would_run_on_a_cpu(lesson, capsys):
    run_tagged(LESSON, "recipes", "fp8-run", "fp8-prediction", "fp8-measure", namespace=lesson)
    printed = capsys.readouterr().out
    assert "No FP8 training run here (a CPU)" in printed
    assert "No FP8 measurement here" in printed and "GEMM_SIZES" in printed
    assert "delayed scaling saturated" in printed


def test_optimizer_counts_follow_the_formats(lesson, capsys):
    run_tagged(LESSON, "state-bytes", namespace=lesson)
    measured = lesson["measured"]
    fp32 = measured["torch.optim.AdamW"]["optimizer state"]
    bf16 = measured["ac.optim_states.AdamW, bf16"]["optimizer state"]
    q8 = measured["ac.optim_states.AdamW, 8bit"]["optimizer state"]
    assert bf16 == pytest.approx(fp32 - 4, abs=1e-9) and 2 + 8 / 256 < q8 < bf16
    assert "the largest: (" in capsys.readouterr().out


def test_full_mode_asks_for_no_more_steps_than_the_data_holds(lesson):
    namespace = dict(lesson, SMOKE=False, TRAIN_STEPS=10_000)
    run_tagged(LESSON, "settings", namespace=namespace)
    assert namespace["train_steps"] == len(namespace["data"].train) // namespace["BATCH_SIZE"]


# ---- the quiz's keys ---------------------------------------------------------------------------
def test_e8m0_cast_key_follows_torch():
    stored = torch.tensor(1.5).to(torch.float8_e8m0fnu).float().item()
    assert quiz_key(LESSON, "e8m0-cast")["2.0"] and stored == 2.0


def test_mx_clamp_and_rceil_keys_follow_the_rules():
    block = torch.zeros(1, 32)
    block[0, 0] = 7.0
    assert ac.block_formats.block_roundtrip(block, "mxfp4")[0, 0] == 6.0
    assert ac.block_formats.block_roundtrip(block, "mxfp4", scale_rounding="rceil")[0, 0] == 8.0
    key = quiz_key(LESSON, "mx-clamp")
    assert [text for text, right in key.items() if right][0].startswith("A scale of 1: the 7 is")
    # RCEIL differs from floor exactly above max_elem / 2^emax_elem of the binade: 1.5 and 1.75.
    for element, ratio in ((ac.block_formats.E2M1, 1.5), (ac.block_formats.E4M3, 1.75)):
        assert element.max / 2**element.emax == ratio


def test_numeric_keys_follow_the_formats():
    assert (
        quiz_question(LESSON, "nvfp4-bits")["answer"]
        == ac.block_formats.FORMATS["nvfp4"].bits_per_value()
    )
    assert quiz_question(LESSON, "adam-8bit-bytes")["answer"] == 4 + 4 + 2 * (1 + 4 / 256)


def test_small_gemm_key_follows_the_roofline():
    h100 = ac.fp8_recipes.fp8_roofline()
    p = ac.fp8_recipes.predict_fp8_linear(1024, 1024, 1024, h100)
    assert p.speedup < 1 and p.cast_s > p.bf16_s  # the casts alone outlast the bf16 GEMM
    intensity = 2 * 1024**3 / (2 * 3 * 1024**2)
    assert round(intensity) == 341 and round(h100.ridge("bf16")) == 295
    assert h100.regime(intensity, "bf16") == "compute-bound"


def test_fp4_per_tensor_key_follows_e2m1():
    e2m1 = ac.block_formats.E2M1
    assert e2m1.max / e2m1.smallest_subnormal == 12
    assert math.isclose(e2m1.max / (e2m1.smallest_subnormal / 2), 24)  # "a 24th" of the amax
    tie = torch.tensor([6.0, 0.25 + 1e-6, 0.25])  # amax 6: the tie 0.25 goes to 0
    assert ac.block_formats.round_to_element(tie, e2m1).tolist() == [6.0, 0.5, 0.0]


@pytest.mark.parametrize("model, fp8", [("T4", "no"), ("A100 40GB", "no"), ("H100 SXM", "yes")])
def test_the_settings_say_where_fp8_tensor_cores_are(monkeypatch, capsys, model, fp8):
    """On a GPU the settings cell asks ac.gpus whether it has FP8 tensor cores (the CUDA
    stand-in plays the GPU; the data stay the shipped subset)."""
    from cuda_double import FakeGpu

    FakeGpu(monkeypatch, model)
    subset = ac.data.load_mnist(source="subset")
    monkeypatch.setattr(ac.data, "load_mnist", lambda *args, **kwargs: subset)
    namespace = run_tagged(LESSON, "parameters", namespace={"ac": ac})
    namespace.update(DEVICE="cuda", SMOKE=True)
    with ac.precision.tf32(False):
        run_tagged(LESSON, "settings", namespace=namespace)
    assert f"FP8 tensor cores here: {fp8}" in capsys.readouterr().out
