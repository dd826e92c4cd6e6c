"""ac.fp8_recipes: the FP8 roofline's figures, the prediction counted by hand and against lesson
11's reference, and delayed scaling's history and saturation."""

import pytest
import torch

from amp_course import block_formats as bf
from amp_course import fp8_recipes as recipes
from amp_course.exercises.solutions.lesson_11 import fp8_linear_times


def test_the_h100_sxm_roofline_has_the_cited_peaks_and_bandwidth():
    h100 = recipes.fp8_roofline()
    assert h100.peak_flops["bf16"] == 989.4e12 and h100.peak_flops["fp8"] == 1978.9e12
    assert h100.bandwidth == 3.35e12
    assert recipes.fp8_roofline("NVIDIA H200").bandwidth == 4.8e12  # the same compute
    for other in ("NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "Tesla T4", "CPU x86"):
        assert recipes.fp8_roofline(other) is None, other  # no FP8 figure on file


def test_prediction_of_a_1024_cube_by_hand():
    p = recipes.predict_fp8_linear(1024, 1024, 1024, recipes.fp8_roofline())
    flops, elements = 2 * 1024**3, 1024 * 1024
    assert p.bf16_s == pytest.approx(flops / 989.4e12)  # compute-bound: 341 FLOP per byte
    assert p.fp8_gemm_s == pytest.approx(4 * elements / 3.35e12)  # memory-bound in FP8
    assert p.cast_s == pytest.approx(5 * 2 * elements / 3.35e12)  # 5 bytes per input element
    assert p.speedup < 1  # the casts outweigh the halved GEMM


@pytest.mark.parametrize("shape", [(16, 8192, 8192), (12608, 768, 3072), (4096, 4096, 4096)])
def test_prediction_agrees_with_the_exercise_reference(shape):
    h100 = recipes.fp8_roofline()
    p = recipes.predict_fp8_linear(*shape, h100)
    ours = (p.bf16_s, p.fp8_gemm_s, p.cast_s)
    assert ours == pytest.approx(fp8_linear_times(*shape, 989.4, 1978.9, 3.35))


def test_speedup_stays_below_the_peak_ratio_and_grows_with_size():
    h100 = recipes.fp8_roofline()
    speedups = [recipes.predict_fp8_linear(n, n, n, h100).speedup for n in (256, 2048, 32768)]
    assert speedups == sorted(speedups) and speedups[-1] < 2


def test_delayed_scaling_uses_the_history_and_counts_saturation():
    scaler = recipes.DelayedScaling(bf.E4M3, history_len=2)
    first, saturated = scaler.roundtrip(torch.tensor([1.0, -2.0]))
    assert saturated == 0 and first.tolist() == [1.0, -2.0]  # no history: its own amax
    _, saturated = scaler.roundtrip(torch.tensor([4.0, 3.0, 1.0]))  # history amax 2
    assert saturated == 2
    assert scaler.amax(torch.zeros(1)) == 4.0  # the largest of the last two steps
    scaler.roundtrip(torch.tensor([0.5]))
    scaler.roundtrip(torch.tensor([0.5]))
    assert scaler.amax(torch.zeros(1)) == 0.5  # the 4 has left the history


def test_saturated_values_come_back_at_the_delayed_amax():
    scaler = recipes.DelayedScaling(bf.E4M3)
    scaler.roundtrip(torch.tensor([2.0]))
    back, saturated = scaler.roundtrip(torch.tensor([8.0, 1.0]))
    assert saturated == 1 and back.tolist() == [2.0, 1.0]


def test_current_scaling_tensorwise_and_rowwise():
    x = torch.tensor([[100.0, 1.0], [0.001, 0.002]])
    tensorwise = recipes.current_roundtrip(x, bf.E4M3)
    rowwise = recipes.current_roundtrip(x, bf.E4M3, "row")
    assert tensorwise[0, 0] == 100.0  # scale 448 / 100: the amax lands on 448 exactly
    # Rowwise: scale 2^floor(log2(448 / 100)) = 4, and 400 is a tie between e4m3's 384 and 416.
    assert rowwise[0, 0] == 96.0
    assert bf.relative_error(x[1], rowwise[1]) < bf.relative_error(x[1], tensorwise[1]) + 1e-9
