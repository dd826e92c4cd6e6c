"""Lesson 11 (cells executed from the notebook on the CPU): what its prose says about the recorded
gradient, the hand-made block and the optimizer counts holds, the GPU-only cells explain
themselves elsewhere, and the quiz keys agree with torch and the lesson's own arithmetic."""

import math
import re

import fake_torchao
import matplotlib.pyplot as plt
import pytest
import torch
from conftest import quiz_answers, quiz_key, quiz_question, run_tagged

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


def test_fp8_gemm_timings_compile_each_size_with_static_shapes(lesson, monkeypatch, capsys):
    """After the first size a plain torch.compile would recompile with symbolic shapes, and the
    bf16 and FP8 graphs would then differ in more than the dtype."""
    compiled = []

    def fake_compile(module, **options):
        compiled.append(options)
        return module

    timing = type("Timing", (), {"median": 1e-3})()
    monkeypatch.setattr(torch, "compile", fake_compile)
    monkeypatch.setattr(ac.timing, "measure", lambda *args, **kwargs: timing)
    namespace = dict(lesson, gemm_sizes=(16, 32), fp8_capable=True)
    namespace["convert_to_float8_training"] = lambda module, **kwargs: module
    namespace["h100"] = ac.fp8_recipes.fp8_roofline()
    run_tagged(LESSON, "fp8-measure", namespace=namespace)
    assert "measured 1.00x" in capsys.readouterr().out
    assert len(compiled) == 4 and all(options.get("dynamic") is False for options in compiled)


def test_optimizer_counts_follow_the_formats(lesson, capsys):
    run_tagged(LESSON, "state-bytes", namespace=lesson)
    measured = lesson["measured"]
    fp32 = measured["torch.optim.AdamW"]["optimizer state"]
    bf16 = measured["ac.optim_states.AdamW, bf16"]["optimizer state"]
    q8 = measured["ac.optim_states.AdamW, 8bit"]["optimizer state"]
    assert bf16 == pytest.approx(fp32 - 4, abs=1e-9) and 2 + 8 / 256 < q8 < bf16
    assert "the largest: (" in capsys.readouterr().out


def test_a_cpu_skips_torchaos_compiled_8bit_adamw_and_says_why(
    lesson, tmp_path, monkeypatch, capsys
):
    """torchao compiles its step per parameter shape with inductor's C++ backend on a CPU: the
    count must not wait on it (and the GPU run must not depend on a CPU step having worked)."""
    fake_torchao.install(tmp_path, monkeypatch)
    namespace = dict(lesson)
    run_tagged(LESSON, "settings", "state-bytes", namespace=namespace)
    printed = capsys.readouterr().out
    assert "torchao 0.18.0 installed" in printed
    assert "torchao.optim.AdamW8bit not counted: on a CPU" in printed and "C++" in printed
    assert "torchao.optim.AdamW8bit" not in namespace["measured"]


def test_one_scale_per_tensor_zeroes_what_the_quiz_says(lesson):
    """fp4-per-tensor's explanation: rows whose amax is below a 24th of the largest vanish, and
    the smallest row's amax is thousands of times below the largest's."""
    gradient, row_amax = lesson["gradient"], lesson["row_amax"]
    back = ac.block_formats.scaled_roundtrip(gradient, ac.block_formats.E2M1, "tensor")
    small = row_amax <= row_amax.max() / 24
    assert small.any() and (back[small] == 0).all()
    assert (back[~small].abs().amax(dim=1) > 0).all()
    assert row_amax.max() / row_amax[row_amax > 0].min() > 1000
    text = [c["explanation"] for c in quiz_question(LESSON, "fp4-per-tensor")["choices"]]
    assert any("becomes zero entirely" in t and "thousands of times" in t for t in text)


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
    assert quiz_answers(LESSON, "mx-clamp")[0].startswith("A scale of 1: the 7 is")
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
    # Slower, by the casts; not "both memory-bound".
    assert quiz_answers(LESSON, "small-gemm") == [
        "It makes it slower: the casts move more bytes than the halved GEMM time saves."
    ]


def test_fp4_per_tensor_key_follows_e2m1():
    e2m1 = ac.block_formats.E2M1
    assert e2m1.max / e2m1.smallest_subnormal == 12
    assert math.isclose(e2m1.max / (e2m1.smallest_subnormal / 2), 24)  # "a 24th" of the amax
    tie = torch.tensor([6.0, 0.25 + 1e-6, 0.25])  # amax 6: the tie 0.25 goes to 0
    assert ac.block_formats.round_to_element(tie, e2m1).tolist() == [6.0, 0.5, 0.0]
    # E2M1 has a zero: its range is what runs out.
    assert quiz_answers(LESSON, "fp4-per-tensor") == [
        "E2M1 spans only 0.5 to 6: values at most a 24th of the amax round to zero."
    ]


def test_nvfp4_training_cells_show_what_section_6_says(lesson, capsys):
    run_tagged(LESSON, "nvfp4-tiles", "nvfp4-rht", "nvfp4-sr", namespace=lesson)
    printed = capsys.readouterr().out
    mismatch = lesson["mismatch"]
    # "most of its values came out different" (quiz nvfp4-weight-tiles): with 1x16 blocks.
    assert mismatch[16, 16] == 0 and mismatch[1, 16] > 0.5
    # "The rotation flattens the gradient's blocks": grad_output.T's mean crest factor drops.
    grad_t, signs = lesson["grad_t"], lesson["signs"]
    nv = ac.nvfp4_training
    assert nv.crest_factors(nv.rht(grad_t, signs)).mean() < nv.crest_factors(grad_t).mean()
    # "... but not the input's: its flat blocks (one background pixel in 16 digits) start at 1,
    # which a rotation can only raise": such blocks exist, are printed, and rise.
    before = nv.crest_factors(lesson["input_t"])
    flat = before < 1 + 1e-4
    shown = re.search(r"input\.T .*flat blocks (\d+)%\)", printed)
    assert shown and int(shown.group(1)) > 0, printed
    assert flat.any() and (nv.crest_factors(nv.rht(lesson["input_t"], signs))[flat] > 1.5).all()
    medians = lesson["medians"]
    verdict = "lowered" if medians["with the RHT"] < medians["round to nearest"] else "raised"
    assert f"the RHT {verdict} the median error here" in printed
    # "One stochastic draw is less accurate than rounding to nearest; the mean converges."
    averaged, nearest = lesson["averaged"], bf_error(lesson)
    assert averaged[1] > nearest > averaged[64]


def bf_error(lesson):
    return ac.block_formats.relative_error(lesson["gradient"], lesson["nearest"])


def test_layer_split_and_mfu_cells_match_their_prose_and_quiz(lesson, capsys):
    if "nv" not in lesson:  # the nvfp4-tiles cell names the module; a test run alone skips it
        run_tagged(LESSON, "nvfp4-tiles", namespace=lesson)
    run_tagged(LESSON, "fp8-prediction", "nvfp4-layers", "mfu-fp8", namespace=lesson)
    printed = capsys.readouterr().out
    split, total = lesson["split"], lesson["total"]
    assert sum(split.values()) == total and "105.15 GFLOP" in printed  # the course's counted step
    assert split["NVFP4 linear layers"] > split["bf16 linear layers (last blocks, head)"]
    # A module swap misses the attention projections (not called as modules) and the head (1000).
    assert len(lesson["fp8_modules"]) == 24
    assert all(".mlp." in name for name in lesson["fp8_modules"])
    # Quiz mfu-under-fp8 quotes the three readings of one step.
    assert "the mixed roof  reads 0.68x" in printed and "the FP8 peak    reads 0.50x" in printed
    # Quiz nvfp4-weight-tiles: a 16x16 tile costs 4.03 bits per value against NVFP4's 4.5.
    assert f"{4 + 8 / 256:.2f}" == "4.03"


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
    with ac.recipe.tf32(False):
        run_tagged(LESSON, "settings", namespace=namespace)
    assert f"FP8 tensor cores here: {fp8}" in capsys.readouterr().out
