import pytest
import torch

from amp_course import formats


def test_table_matches_torch_finfo():
    rows = {f.name: f for f in formats.format_table()}
    for name, dtype in [("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)]:
        info = torch.finfo(dtype)
        row = rows[name]
        assert row.max == info.max
        assert row.eps == info.eps
        assert row.smallest_normal == info.smallest_normal
        assert row.bits == info.bits == 1 + row.exponent_bits + row.mantissa_bits


def test_known_limits():
    rows = {f.name: f for f in formats.format_table()}
    assert rows["fp16"].max == 65504.0  # not 65535
    assert rows["fp16"].smallest_subnormal == 2.0**-24
    assert rows["bf16"].smallest_subnormal == 2.0**-133
    assert rows["fp32"].smallest_subnormal == 2.0**-149
    assert rows["tf32"].eps == rows["fp16"].eps == 2.0**-10
    assert rows["tf32"].smallest_normal == rows["fp32"].smallest_normal


def test_smallest_subnormal_is_representable_and_half_of_it_is_not():
    for fmt in formats.format_table():
        if fmt.dtype is None or fmt.name.startswith("fp8"):
            continue

        def cast(value, dtype=fmt.dtype):
            return torch.tensor(value, dtype=torch.float64).to(dtype).item()

        assert cast(fmt.smallest_subnormal) == fmt.smallest_subnormal, fmt.name
        # Half of it lies halfway between it and zero: the tie rounds to the even one, zero.
        assert cast(fmt.smallest_subnormal / 2) == 0, fmt.name
        assert cast(fmt.smallest_subnormal * 0.75) == fmt.smallest_subnormal, fmt.name


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="torch without fp8")
def test_fp8_rows():
    rows = {f.name: f for f in formats.format_table()}
    assert rows["fp8 e4m3"].max == 448.0
    assert rows["fp8 e5m2"].max == 57344.0


def test_unknown_format_lists_valid():
    with pytest.raises(ValueError, match="fp16"):
        formats.get_format("fp12")


def test_markdown_has_every_row():
    text = formats.format_table_markdown()
    for f in formats.format_table():
        assert f"| {f.name} |" in text
