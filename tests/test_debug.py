"""The NaN/inf locator against a model with a planted fp16 overflow, and the fp32 region."""

import pytest
import torch
from torch import nn

from amp_course import debug
from amp_course.recipe import AmpRecipe

FP16_MAX = torch.finfo(torch.float16).max
CPU = torch.device("cpu")
FP16 = AmpRecipe(CPU, torch.float16)


def planted_model(scale: float) -> nn.Sequential:
    """Linear -> GELU -> Linear whose first layer's outputs reach about ``scale`` x the input."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4), nn.Sequential(nn.Tanh()))
    with torch.no_grad():
        model[0].weight.fill_(scale / 8)
        model[0].bias.zero_()
        model[2].weight.mul_(1 / scale)
    return model


def test_locates_the_first_overflowing_module_in_fp16():
    model = planted_model(2 * FP16_MAX)
    inputs = torch.ones(2, 8)
    found = debug.find_first_nonfinite(model, inputs, recipe=FP16)
    assert found is not None
    assert found.name == "0" and found.module_type == "Linear"
    assert found.dtype == torch.float16
    assert found.num_inf == 2 * 16 and found.num_nan == 0
    assert found.order == 0
    # Later modules are infected too (GELU of +inf gives inf or NaN, by the CPU kernel's path and
    # the tensor's length; then inf - inf = NaN), but come later.
    with (
        debug.ActivationWatch(model) as watch,
        torch.no_grad(),
        torch.autocast("cpu", dtype=torch.float16),
    ):
        model(inputs)
    assert [f.name for f in watch.nonfinite][:2] == ["0", "1"]
    assert watch.nonfinite[2].num_nan > 0


def test_no_report_in_fp32_or_bf16_and_ranges_match_fp32():
    model = planted_model(2 * FP16_MAX)
    inputs = torch.ones(2, 8)
    for dtype in (None, torch.bfloat16):
        assert debug.find_first_nonfinite(model, inputs, recipe=AmpRecipe(CPU, dtype)) is None
    ranges = debug.activation_ranges(model, inputs, recipe=AmpRecipe(CPU))
    assert ranges[0].name == "0"
    expected = model[0](inputs).abs().max().item()
    assert ranges[0].max_abs == pytest.approx(expected)
    assert ranges[-1].name == ""  # the model itself finishes last


def test_max_finite_ignores_inf_and_nan():
    t = torch.tensor([1.0, -70000.0, float("inf"), float("nan")])
    assert debug.max_finite(t) == 70000.0
    assert debug.max_finite(torch.tensor([float("inf")])) == 0.0


def test_nan_without_inf_is_reported():
    model = nn.Sequential(nn.Identity(), nn.ReLU())
    found = debug.find_first_nonfinite(
        model, torch.tensor([[0.0, float("nan")]]), recipe=AmpRecipe(CPU)
    )
    assert found.name == "0" and found.num_nan == 1 and found.num_inf == 0


def test_hooks_are_removed():
    model = planted_model(10.0)
    with debug.ActivationWatch(model):
        pass
    assert all(not m._forward_hooks for m in model.modules())


def test_fp32_region_prevents_the_overflow_and_matches_fp32():
    model = planted_model(2 * FP16_MAX)
    inputs = torch.ones(2, 8)
    reference = model(inputs)
    fixed = nn.Sequential(debug.Fp32Region(nn.Sequential(*model[:3])), model[3])
    with torch.autocast("cpu", dtype=torch.float16):
        out = fixed(inputs.half())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, reference)
    assert debug.find_first_nonfinite(fixed, inputs, recipe=FP16) is None


def test_bad_input_is_explained():
    with pytest.raises(TypeError, match="nn.Module"):
        debug.ActivationWatch(lambda x: x)


def test_fp32_region_passes_keyword_arguments_and_casts_them():
    # torchvision's encoder block calls its attention as self_attention(x, x, x, need_weights=False)
    attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    region = debug.Fp32Region(attention)
    x = torch.randn(2, 3, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, weights = region(x.bfloat16(), key=x.bfloat16(), value=x, need_weights=False)
    assert out.dtype == torch.float32 and weights is None
