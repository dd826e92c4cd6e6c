"""ac.block_formats against independent oracles: torch's own fp8 casts, an exhaustive search over
each element format's numbers, a per-element float64 implementation of the MX and NVFP4 rules,
and blocks computed by hand (ties to even, saturation, zeros, tiny values, one outlier)."""

import math

import pytest
import torch

from amp_course import block_formats as bf

FP8 = [bf.E4M3, bf.E5M2]


def element_values(element) -> list[float]:
    """Every finite non-negative number of a layout with no inf, from its bit patterns."""
    e, m, bias = element.exponent_bits, element.mantissa_bits, element.bias
    values = set()
    for exponent in range(2**e):
        for mantissa in range(2**m):
            if exponent == 0:
                value = mantissa * 2.0 ** (1 - bias - m)
            else:
                value = (1 + mantissa / 2**m) * 2.0 ** (exponent - bias)
            if value <= element.max:  # e4m3fn's top pattern is NaN, e5m2's top exponent inf/NaN
                values.add(value)
    return sorted(values)


def nearest_even(v: float, grid: list[float]) -> float:
    """Round ``v`` to the nearest of ``grid`` (sorted, with their codes in order): ties go to the
    value with an even code, as IEEE rounding does; beyond the top, saturate."""
    magnitude = min(abs(v), grid[-1])
    best = min(range(len(grid)), key=lambda i: (abs(grid[i] - magnitude), i % 2))
    return math.copysign(grid[best], v)


def test_element_formats_agree_with_torch_finfo_and_the_spec():
    for element in FP8:
        info = torch.finfo(element.dtype)
        assert (element.max, element.smallest_normal) == (info.max, info.smallest_normal)
        assert element.smallest_subnormal == info.smallest_normal * info.eps
    assert (bf.E4M3.emax, bf.E5M2.emax, bf.E2M1.emax) == (8, 15, 2)  # the spec's emax_elem
    assert element_values(bf.E2M1) == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert element_values(bf.E4M3)[-1] == 448 and element_values(bf.E5M2)[-1] == 57344


@pytest.mark.parametrize("element", FP8, ids=lambda e: e.name)
def test_round_to_grid_equals_torchs_fp8_cast(element):
    generator = torch.Generator().manual_seed(0)
    exponents = torch.randint(-30, 17, (20000,), generator=generator).float()
    x = torch.randn(20000, generator=generator) * torch.exp2(exponents)
    x = x.clamp(-element.max, element.max)
    grid = torch.tensor(element_values(element))
    ties = torch.cat([(grid[1:] + grid[:-1]) / 2, -(grid[1:] + grid[:-1]) / 2])  # exact midpoints
    for values in (x, ties):
        ours = bf.round_to_grid(values, element.exponent_bits, element.mantissa_bits)
        assert torch.equal(ours, values.to(element.dtype).float())


def test_e2m1_rounding_equals_an_exhaustive_search_with_ties_to_even():
    grid = element_values(bf.E2M1)
    values = [i / 64 for i in range(-640, 641)] + [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0]
    ours = bf.round_to_element(torch.tensor(values), bf.E2M1).tolist()
    assert ours == [nearest_even(v, grid) for v in values]
    # The ties by hand: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4.
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    assert bf.round_to_element(ties, bf.E2M1).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]


def reference_mx(x: torch.Tensor, fmt: bf.BlockFormat) -> torch.Tensor:
    """The spec's Algorithm 1, one block at a time in Python floats."""
    grid = element_values(fmt.element)
    out = []
    for block in x.double().reshape(-1, fmt.block_size).tolist():
        amax = max(abs(v) for v in block)
        shared = -127 if amax == 0 else max(math.floor(math.log2(amax)) - fmt.element.emax, -127)
        scale = 2.0**shared
        out += [nearest_even(v / scale, grid) * scale for v in block]
    return torch.tensor(out, dtype=torch.float32).reshape(x.shape)


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp4"])
def test_mx_round_trip_equals_the_specs_algorithm_block_by_block(name):
    fmt = bf.get_format(name)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(12, 64, generator=generator) * 10 ** torch.randint(-12, 12, (12, 1)).float()
    x[3, :32] = 0.0
    x[5, 7] = 5e3 * x[5].abs().max()  # one outlier
    assert torch.equal(bf.block_roundtrip(x, name), reference_mx(x, fmt))


def test_hand_computed_mxfp4_block():
    block = torch.full((1, 32), 0.1)
    block[0, :5] = torch.tensor([7.0, 0.5, 1.25, 0.3, -2.5])
    # floor(log2 7) - 2 = 0: scale 1. 7 saturates at 6; 1.25 and -2.5 are ties (to 1 and -2, even
    # mantissas); 0.3 is nearer 0.5 than 0; 0.1 is under 0.25 and rounds to 0.
    expected = [6.0, 0.5, 1.0, 0.5, -2.0] + [0.0] * 27
    assert bf.block_roundtrip(block, "mxfp4")[0].tolist() == expected
    # RCEIL: ceil(log2(7 / 6)) = 1, scale 2: 3.5 ties up to 4 (x2 = 8), 0.25 ties down to 0.
    rceil = bf.block_roundtrip(block, "mxfp4", scale_rounding="rceil")[0]
    assert rceil[:5].tolist() == [8.0, 0.0, 1.0, 0.0, -2.0]


def test_mxfp8_saturates_where_a_plain_cast_would_overflow():
    block = torch.ones(1, 32)
    block[0, :3] = torch.tensor([500.0, 300.0, -510.0])  # floor(log2 510) = 8: scale 2^0
    assert bf.block_roundtrip(block, "mxfp8_e4m3")[0, :3].tolist() == [448.0, 288.0, -448.0]
    block[0, :3] = torch.tensor([63000.0, 1000.0, -40000.0])  # floor(log2 63000) = 15: scale 1
    assert torch.isinf(torch.tensor(63000.0).to(torch.float8_e5m2).float())  # the cast alone
    assert bf.block_roundtrip(block, "mxfp8_e5m2")[0, :3].tolist() == [57344.0, 1024.0, -40960.0]


def test_zero_blocks_get_the_smallest_scale_and_stay_zero():
    x = torch.zeros(2, 64)
    amax = x.reshape(2, 2, 32).abs().amax(-1)
    assert bf.mx_scale_exponents(amax, bf.E4M3).unique().tolist() == [-127.0]
    for name in bf.FORMATS:
        back = bf.block_roundtrip(x, name)
        assert torch.equal(back, x) and not back.isnan().any(), name


def test_tiny_values_use_the_smallest_scale_2_to_the_minus_127():
    x = torch.full((1, 32), 1e-40)  # fp32 subnormals: floor(log2) - 8 is below -127
    amax = x.abs().amax(-1, keepdim=True)
    assert bf.mx_scale_exponents(amax, bf.E4M3).item() == -127
    # 1e-40 / 2^-127 = 0.017 lands among e4m3's subnormals (steps of 2^-9): 9 steps.
    element = round(float(torch.tensor(1e-40)) * 2.0**127 * 2**9) * 2.0**-9
    assert bf.block_roundtrip(x, "mxfp8_e4m3")[0, 0].item() == pytest.approx(
        element * 2.0**-127, rel=1e-6
    )


def test_one_outlier_costs_its_own_block_only():
    x = torch.ones(1, 64)
    x[0, 0] = 1000.0  # floor(log2 1000) - 2 = 7: scale 128 for MXFP4's first block
    back = bf.block_roundtrip(x, "mxfp4")[0]
    assert back[0].item() == 6 * 128  # 1000 / 128 = 7.8, saturated at 6
    assert back[1:32].eq(0).all()  # 1 / 128 is far under E2M1's smallest step
    assert back[32:].eq(1).all()  # the next block has its own scale


def test_non_finite_values_poison_their_block_only():
    x = torch.ones(2, 32)
    x[0, 3] = math.inf
    back = bf.block_roundtrip(x, "mxfp8_e4m3")
    assert back[0].isnan().all() and back[1].eq(1).all()


def test_rceil_differs_from_floor_only_where_floor_clamps():
    amax = torch.tensor([6.0, 6.5, 7.0, 8.0, 448.0, 449.0, 0.75])
    floor = bf.mx_scale_exponents(amax, bf.E2M1).tolist()
    rceil = bf.mx_scale_exponents(amax, bf.E2M1, "rceil").tolist()
    assert floor == [0, 0, 0, 1, 6, 6, -3] and rceil == [0, 1, 1, 1, 7, 7, -3]
    e4m3 = torch.tensor([448.0, 449.0, 256.0])
    assert bf.mx_scale_exponents(e4m3, bf.E4M3).tolist() == [0, 0, 0]
    assert bf.mx_scale_exponents(e4m3, bf.E4M3, "rceil").tolist() == [0, 1, 0]


def reference_nvfp4(x: torch.Tensor) -> torch.Tensor:
    """NVIDIA's two-level rule in float64, the E4M3 scale rounded by torch's cast."""
    grid = element_values(bf.E2M1)
    tensor_amax = x.abs().max().item()
    tensor_scale = tensor_amax / (6 * 448) if tensor_amax else 1.0
    out = []
    for block in x.double().reshape(-1, 16).tolist():
        wanted = max(abs(v) for v in block) / 6 / tensor_scale
        stored = torch.tensor(min(wanted, 448.0)).to(torch.float8_e4m3fn).item()
        scale = stored * tensor_scale
        out += [nearest_even(v / scale, grid) * scale if scale else 0.0 for v in block]
    return torch.tensor(out, dtype=torch.float64).reshape(x.shape)


def test_nvfp4_follows_nvidias_two_level_rule():
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(8, 64, generator=generator) * 10 ** torch.rand(8, 1, generator=generator)
    x[2, 16:32] = 0.0
    x[4, :16] *= 1e-7  # a block whose E4M3 scale lands among E4M3's subnormals or at 0
    ours = bf.block_roundtrip(x, "nvfp4").double()
    assert torch.allclose(ours, reference_nvfp4(x), rtol=1e-6, atol=0)
    # The largest block's scale is E4M3's largest value: the tensor's amax comes back exactly.
    assert ours.abs().max().item() == pytest.approx(x.abs().max().item(), rel=1e-6)
    assert torch.equal(bf.block_roundtrip(torch.zeros(2, 16), "nvfp4"), torch.zeros(2, 16))


@pytest.mark.parametrize("name, size", [("mxfp4", 32), ("mxfp8_e4m3", 32), ("nvfp4", 16)])
def test_a_last_dimension_off_the_block_size_is_refused_naming_the_size(name, size):
    with pytest.raises(ValueError, match=f"blocks of {size}: it must be a multiple of {size}"):
        bf.block_roundtrip(torch.ones(4, size + 8), name)
    with pytest.raises(ValueError, match="Unknown block format"):
        bf.block_roundtrip(torch.ones(4, 32), "mxfp6")


def test_bits_per_value_include_the_scales():
    assert bf.get_format("mxfp8_e4m3").bits_per_value() == 8.25
    assert bf.get_format("mxfp8_e5m2").bits_per_value() == 8.25
    assert bf.get_format("mxfp4").bits_per_value() == 4.25
    assert bf.get_format("nvfp4").bits_per_value() == 4.5
    assert bf.get_format("nvfp4").bits_per_value(numel=64) == 4.5 + 0.5


def test_scaled_roundtrip_per_tensor_row_and_block():
    x = torch.tensor([[1000.0, 1.0] * 16, [0.01, 0.02] * 16])
    for granularity in ("tensor", "row", 32):
        back = bf.scaled_roundtrip(x, bf.E4M3, granularity)
        assert back.shape == x.shape
    tensor = bf.scaled_roundtrip(x, bf.E2M1, "tensor")
    row = bf.scaled_roundtrip(x, bf.E2M1, "row")
    assert tensor[1].eq(0).all() and row[1].ne(0).all()  # the small row needs its own scale
    assert bf.flushed_share(x, tensor) == 0.75  # the small row and the 1s of the large one
    with pytest.raises(ValueError, match="blocks of 16"):
        bf.scaled_roundtrip(torch.ones(2, 40), bf.E4M3, 16)


def test_amax_roundtrip_with_power_of_two_scales_never_saturates():
    x = torch.randn(16, 32) * torch.logspace(-3, 3, 16)[:, None]
    amax = x.abs().amax(dim=1, keepdim=True)
    back = bf.amax_roundtrip(x, bf.E4M3, amax, power_of_two=True)
    scale = torch.exp2(torch.floor(torch.log2(bf.E4M3.max / amax)))  # rounded down: a power of 2
    assert (x.abs() * scale <= bf.E4M3.max).all()  # so nothing reaches the clamp
    assert torch.equal(back, bf.round_to_grid(x * scale, 4, 3) / scale)


def test_error_helpers():
    x = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    assert bf.relative_error(x, x) == 0.0 and bf.relative_error(torch.zeros(2), torch.ones(2)) == 0
    assert bf.row_errors(x, torch.zeros(2, 2)).tolist() == [1.0, 0.0]
    assert bf.flushed_share(x, torch.zeros(2, 2)) == 1.0
