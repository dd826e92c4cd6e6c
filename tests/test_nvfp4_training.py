"""ac.nvfp4_training: the NVFP4 training recipe's pieces (lesson 11, section 6), checked against
the course's NVFP4 format, hand-computed tiles and the properties each piece promises."""

import pytest
import torch

from amp_course import block_formats as bf
from amp_course import nvfp4_training as nv


def test_one_by_sixteen_blocks_are_the_format_of_section_2():
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(0)) * 3
    assert torch.equal(nv.nvfp4_roundtrip(x), bf.block_roundtrip(x, "nvfp4"))


def test_a_sixteen_by_sixteen_tile_shares_one_scale():
    tile = torch.full((16, 16), 3.0)
    tile[5, 7] = 6.0
    # Tensor scale 6 / (6 x 448); the tile's E4M3 scale 448 of it: 1.0, so 3 and 6 are exact.
    assert torch.equal(nv.nvfp4_roundtrip(tile, (16, 16)), tile)
    # Two tiles side by side: the second's values are 1/8 of the first's and keep their own scale.
    two = torch.cat([tile, tile / 8], dim=1)
    assert torch.equal(nv.nvfp4_roundtrip(two, (16, 16)), two)


def test_weight_tiles_make_the_transposed_copy_identical():
    weight = torch.randn(64, 48, generator=torch.Generator().manual_seed(1))
    assert nv.transpose_mismatch(weight, (16, 16)) == 0
    assert nv.transpose_mismatch(weight, (1, 16)) > 0.1


def test_tiles_that_do_not_divide_the_tensor_are_refused():
    with pytest.raises(ValueError, match="multiples of them; this one is \\(20, 16\\)"):
        nv.nvfp4_roundtrip(torch.ones(20, 16), (16, 16))


def test_stochastic_rounding_keeps_grid_values_and_is_unbiased_between_them():
    generator = torch.Generator().manual_seed(0)
    grid = torch.tensor([0.0, 0.5, -1.5, 3.0, 6.0])
    assert torch.equal(nv.stochastic_round_to_grid(grid, 2, 1, generator), grid)
    values = torch.full((20000,), 5.0)  # between E2M1's 4 and 6
    rounded = nv.stochastic_round_to_grid(values, 2, 1, generator)
    assert set(rounded.unique().tolist()) == {4.0, 6.0}
    assert rounded.mean().item() == pytest.approx(5.0, abs=0.03)
    small = nv.stochastic_round_to_grid(torch.full((20000,), -0.2), 2, 1, generator)
    assert set(small.unique().tolist()) == {-0.5, 0.0}  # subnormal step 0.5; sign kept
    assert (small == -0.5).float().mean().item() == pytest.approx(0.4, abs=0.02)


def test_stochastic_nvfp4_averages_to_the_tensor_where_nearest_rounding_stays_biased():
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(16, 64, generator=generator)
    nearest = bf.relative_error(x, nv.nvfp4_roundtrip(x))
    draws = torch.stack(
        [nv.nvfp4_roundtrip(x, stochastic=True, generator=generator) for _ in range(64)]
    )
    assert bf.relative_error(x, draws[0]) > nearest  # one draw is noisier
    assert bf.relative_error(x, draws.mean(0)) < nearest / 2  # the mean converges


def test_hadamard_is_orthonormal_and_the_rotation_leaves_a_product_unchanged():
    h = nv.hadamard(16)
    assert torch.allclose(h @ h.t(), torch.eye(16), atol=1e-6)
    with pytest.raises(ValueError, match="power-of-two size, not 12"):
        nv.hadamard(12)
    generator = torch.Generator().manual_seed(3)
    signs = nv.random_signs(generator=generator)
    assert set(signs.tolist()) <= {-1.0, 1.0}
    a, b = torch.randn(8, 64, generator=generator), torch.randn(5, 64, generator=generator)
    assert torch.allclose(nv.rht(a, signs) @ nv.rht(b, signs).t(), a @ b.t(), atol=1e-4)


def test_crest_factor_is_one_for_a_flat_block_and_four_for_a_single_value():
    flat, single = torch.ones(16), torch.zeros(16)
    single[3] = -2.0
    assert nv.crest_factors(torch.stack([flat, single, torch.zeros(16)])).tolist() == [1.0, 4.0]


def test_the_weight_gradient_from_nvfp4_operands_is_close_with_and_without_the_rht():
    generator = torch.Generator().manual_seed(4)
    grad_output, inputs = (
        torch.randn(64, 32, generator=generator),
        torch.rand(64, 48, generator=generator),
    )
    exact = grad_output.t() @ inputs
    plain = nv.wgrad(grad_output, inputs)
    assert torch.equal(
        plain,
        nv.nvfp4_roundtrip(grad_output.t().contiguous())
        @ nv.nvfp4_roundtrip(inputs.t().contiguous()).t(),
    )
    signs = nv.random_signs(generator=generator)
    rotated = nv.wgrad(grad_output, inputs, signs=signs)
    # The RHT turns both operands along the tokens before they are quantized (H times H^T is the
    # identity, so the product is the same gradient): another rounding, not the plain one's.
    turned = [nv.rht(t.t().contiguous(), signs) for t in (grad_output, inputs)]
    assert torch.equal(rotated, nv.nvfp4_roundtrip(turned[0]) @ nv.nvfp4_roundtrip(turned[1]).t())
    assert not torch.equal(rotated, plain)
    assert 0 < bf.relative_error(exact, plain) < 0.2 and 0 < bf.relative_error(exact, rotated) < 0.2


def test_gemm_flops_counts_a_training_step_by_module_and_kind():
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    counts = nv.gemm_flops(model, torch.empty(4, 16))
    forward = 2 * 4 * 16 * 32
    # Forward, then the input's and the weight's gradients: 3x; the first layer's input needs none.
    assert counts["Sequential.0"] == {"linear": 2 * forward, "attention": 0, "other": 0}
    assert counts["Sequential.2"]["linear"] == 3 * 2 * 4 * 32 * 8
    assert (
        counts["Global"]["linear"]
        == counts["Sequential.0"]["linear"] + counts["Sequential.2"]["linear"]
    )


def test_the_mixed_peak_weights_each_share_by_its_time():
    assert nv.mixed_peak({"fp8": 1.0, "bf16": 1.0}, {"fp8": 2.0, "bf16": 1.0}) == pytest.approx(
        4 / 3
    )
    assert nv.mixed_peak({"fp8": 0.0, "bf16": 5.0}, {"fp8": 2.0, "bf16": 1.0}) == 1.0
    with pytest.raises(ValueError, match="No peak given for fp4"):
        nv.mixed_peak({"fp4": 1.0}, {"bf16": 1.0})
