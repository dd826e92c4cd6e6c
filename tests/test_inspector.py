"""The bit inspector against torch: casts, bit patterns, subnormals, inf, NaN and fp8 saturation."""

import bisect
import functools
import math
import struct
from fractions import Fraction

import pytest
import torch

from amp_course import inspector
from amp_course.formats import get_format
from amp_course.inspector import widget as inspector_widget

TORCH_FORMATS = ["fp32", "fp16", "bf16", "fp8 e4m3", "fp8 e5m2"]
INT_VIEW = {32: torch.int32, 16: torch.int16, 8: torch.uint8}

VALUES = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.1,
    1 / 3,
    -2.5,
    3.14159,
    1e-3,
    1e-8,
    6e-8,
    1e-40,
    5e-45,
    240.0,
    448.0,
    500.0,
    57344.0,
    65504.0,
    65519.0,
    65520.0,
    1e5,
    3e38,
    -1e6,
    math.inf,
    -math.inf,
    math.nan,
]


def torch_cast(value, dtype, source=torch.float32):
    """torch's cast of ``value``, held in ``source``, to ``dtype``: value stored, and its bits."""
    stored = torch.tensor(value, dtype=source).to(dtype)
    bits = stored.view(INT_VIEW[torch.finfo(dtype).bits]).item() & (
        2 ** torch.finfo(dtype).bits - 1
    )
    return stored.to(torch.float64).item(), bits


@functools.cache
def finite_values(name):
    """Every finite value of an 8- or 16-bit format, sorted, as floats."""
    return inspector.representable_values(name, positive_only=False).tolist()


def exact_nearest(value, name):
    """The nearest finite value of ``name`` to ``value``, by exact rational distance; a tie goes to
    the neighbour whose bit pattern (torch's own encoding) ends in 0. ``value`` must lie within the
    finite values."""
    values, exact = finite_values(name), Fraction(value)
    i = bisect.bisect_left(values, value)
    neighbours = values[max(i - 1, 0) : i + 1]
    dtype = get_format(name).dtype
    nearest = min(neighbours, key=lambda v: (abs(Fraction(v) - exact), torch_cast(v, dtype)[1] & 1))
    return math.copysign(nearest, value) if nearest == 0 else nearest  # zero keeps the sign


def torch_reference(value, name):
    """What the inspector must store: torch's cast where torch rounds once (from float32, or
    float64 to fp32), else torch's cast of the exactly nearest value."""
    dtype = get_format(name).dtype
    if name == "fp32":
        return torch_cast(value, dtype, source=torch.float64)
    inside = abs(value) <= finite_values(name)[-1]  # far beyond the range: inf or saturation
    if inside and torch.tensor(value, dtype=torch.float32).item() != value:
        value = exact_nearest(value, name)  # not a float32: torch would round it twice
    return torch_cast(value, dtype)


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or (
        a == b and math.copysign(1, a) == math.copysign(1, b)
    )


@pytest.mark.parametrize("name", TORCH_FORMATS)
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_decompose_matches_torch_cast_and_bits(name, value):
    fmt = get_format(name)
    fields = inspector.decompose(value, name)
    stored, bits = torch_reference(value, name)
    # The value rebuilt from the fields is what torch's cast gives, sign of zero included.
    assert same(fields.stored, stored), (fields, stored)
    assert same(inspector.compose(fields.sign, fields.exponent, fields.mantissa, name), stored)
    # The fields are torch's own bit pattern, read through tensor.view(int dtype).
    m, e = fmt.mantissa_bits, fmt.exponent_bits
    assert (fields.sign << (e + m)) | (fields.exponent << m) | fields.mantissa == bits
    assert fields.bits.replace(" ", "") == f"{bits:0{fmt.bits}b}"


@pytest.mark.parametrize("name", TORCH_FORMATS)
def test_every_pattern_of_small_formats_composes_like_torch(name):
    fmt = get_format(name)
    if fmt.bits == 32:
        patterns = [
            0,
            1,
            0x007FFFFF,
            0x00800000,
            0x3F800000,
            0x7F7FFFFF,
            0x7F800000,
            0x7FC00000,
            0x80000001,
            0xFF800000,
        ]
    else:
        patterns = range(2**fmt.bits)
    patterns = torch.tensor(list(patterns), dtype=torch.int64)
    signed = (
        torch.where(patterns >= 2 ** (fmt.bits - 1), patterns - 2**fmt.bits, patterns)
        if fmt.bits > 8
        else patterns
    )
    expected = signed.to(INT_VIEW[fmt.bits]).view(fmt.dtype).to(torch.float64).tolist()
    m, e = fmt.mantissa_bits, fmt.exponent_bits
    for p, want in zip(patterns.tolist(), expected, strict=True):
        got = inspector.compose(p >> (e + m), (p >> m) & (2**e - 1), p & (2**m - 1), name)
        assert same(got, want), (name, hex(p), got, want)


@pytest.mark.parametrize("name", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, -1.0, 0.1, 1e-8, 1e-40, -3e4, 1000.0])
def test_next_up_matches_torch_nextafter(name, value):
    dtype = get_format(name).dtype
    x = torch.tensor([value], dtype=torch.float64).to(dtype)
    expected = torch.nextafter(x, torch.tensor([math.inf], dtype=dtype)).item()
    assert inspector.decompose(value, name).next_up == expected


def _ties(name):
    """Rounding ties between neighbouring finite values of ``name``: subnormal, normal, near the
    top, and around 1; each as (lower neighbour, tie, upper neighbour)."""
    values = [v for v in finite_values(name) if v > 0]
    one = values.index(1.0)
    picks = [0, 1, len(values) // 3, one - 1, one, one + 1, len(values) - 2]
    return [(values[i], (values[i] + values[i + 1]) / 2, values[i + 1]) for i in picks]


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8 e4m3", "fp8 e5m2"])
def test_a_double_beside_a_rounding_tie_is_rounded_once_to_its_nearest_value(name):
    dtype = get_format(name).dtype
    twice = []
    for lower, tie, upper in _ties(name):
        assert torch.tensor(tie, dtype=torch.float32).item() == tie  # a float32 itself
        # The tie itself: torch rounds it once (from float32), to the even neighbour.
        assert inspector.decompose(tie, name).stored == torch_cast(tie, dtype)[0]
        assert inspector.decompose(tie, name).stored == exact_nearest(tie, name)
        for value, nearest in [
            (math.nextafter(tie, math.inf), upper),
            (math.nextafter(tie, -math.inf), lower),
            (-math.nextafter(tie, math.inf), -upper),
        ]:
            assert exact_nearest(value, name) == nearest
            assert inspector.decompose(value, name).stored == nearest, (name, value)
            twice.append(torch_cast(value, dtype, source=torch.float64)[0] != nearest)
    # The test can fail: torch's float64 cast goes through float32 and misses some of these.
    assert any(twice)


@pytest.mark.parametrize(
    "name, tie, below, at_and_above",
    [
        ("fp16", 65520.0, 65504.0, math.inf),  # halfway from the max to 2^16: ties to even, inf
        ("bf16", 2.0**128 - 2.0**119, 2.0**128 - 2.0**120, math.inf),
        ("fp8 e5m2", 61440.0, 57344.0, math.inf),
        ("fp8 e4m3", 464.0, 448.0, 448.0),  # e4m3fn has no inf: torch saturates
    ],
)
def test_overflow_ties_round_once_like_torch(name, tie, below, at_and_above):
    dtype = get_format(name).dtype
    assert torch_cast(tie, dtype)[0] == at_and_above  # torch's own cast from float32
    assert inspector.decompose(math.nextafter(tie, -math.inf), name).stored == below
    assert inspector.decompose(tie, name).stored == at_and_above
    assert inspector.decompose(math.nextafter(tie, math.inf), name).stored == at_and_above


def test_kinds_subnormals_and_limits():
    assert inspector.decompose(2.0**-24, "fp16").kind == "subnormal"
    assert inspector.decompose(2.0**-14, "fp16").kind == "normal"
    assert inspector.decompose(1e-8, "fp16").kind == "zero"  # underflow
    assert inspector.decompose(65520.0, "fp16").kind == "inf"  # overflow
    assert math.isnan(inspector.decompose(65504.0, "fp16").gap)  # nothing finite above the max
    assert inspector.decompose(1.0, "fp16").gap == 2.0**-10
    assert inspector.decompose(1.0, "bf16").gap == 2.0**-7
    assert inspector.decompose(1.0, "fp8 e4m3").gap == 2.0**-3
    assert inspector.decompose(1.0, "fp8 e5m2").gap == 2.0**-2
    nan = inspector.decompose(math.nan, "fp16")
    assert nan.kind == "nan" and math.isnan(nan.error) and math.isnan(nan.gap)


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="torch without fp8")
def test_e4m3fn_has_no_inf():
    # All-ones exponent is still a normal number in e4m3fn: 0 1111 110 is 448, the max.
    assert inspector.compose(0, 15, 6, "fp8 e4m3") == 448.0
    assert math.isnan(inspector.compose(0, 15, 7, "fp8 e4m3"))
    for value in (math.inf, 1e6, 449.0):
        fields = inspector.decompose(value, "fp8 e4m3")
        # Whatever this torch does with out-of-range values (saturate to 448 or give NaN),
        # never inf.
        assert fields.kind != "inf"
        assert fields.stored == 448.0 or math.isnan(fields.stored)
    assert math.isnan(inspector.decompose(448.0, "fp8 e4m3").next_up)  # nothing above the max
    assert inspector.decompose(1e6, "fp8 e5m2").kind == "inf"  # e5m2 keeps IEEE inf


def wide_neighbours(value, mantissa_bits):
    """The two values of fp32's exponent range with ``mantissa_bits`` bits around normal
    ``value``, found by masking the float64 bit pattern (an oracle apart from the inspector's
    rational rounding): (the one towards zero, the next one away from zero)."""
    dropped = 52 - mantissa_bits
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    toward_zero = bits >> dropped << dropped
    down = struct.unpack("<d", struct.pack("<Q", toward_zero))[0]
    up = struct.unpack("<d", struct.pack("<Q", toward_zero + (1 << dropped)))[0]
    return down, up, (toward_zero >> dropped) & 1  # the last kept bit of the lower one


def nearest_wide(value, mantissa_bits):
    """Nearest value with ``mantissa_bits`` bits by exact distance; a tie to the even mantissa."""
    down, up, odd = wide_neighbours(value, mantissa_bits)
    below, above = abs(Fraction(value) - Fraction(down)), abs(Fraction(up) - Fraction(value))
    if below != above:
        return down if below < above else up
    return up if odd else down


WIDE = {"fp32": 23, "tf32": 10}


def wide_ties(name):
    """(lower, tie, upper) triples of fp32 or TF32 values near 1, a large and a small number."""
    bits = WIDE[name]
    triples = []
    for lower in (1.0, 1.5, -3.0, 2.0**100 * 1.25, 2.0**-100 * 1.75):
        step = math.ldexp(1.0, math.frexp(abs(lower))[1] - 1 - bits)
        upper = lower + math.copysign(step, lower)
        triples.append((lower, (lower + upper) / 2, upper))
    return triples


@pytest.mark.parametrize("name", ["fp32", "tf32"])
def test_fp32_and_tf32_ties_and_near_ties_round_once_to_nearest_even(name):
    for lower, tie, upper in wide_ties(name):
        even = lower if nearest_wide(tie, WIDE[name]) == lower else upper
        assert inspector.decompose(tie, name).stored == even, (name, tie)
        assert inspector.decompose(tie, name).mantissa % 2 == 0  # ties go to the even mantissa
        for value, nearest in [
            (math.nextafter(tie, math.copysign(math.inf, upper)), upper),
            (math.nextafter(tie, math.copysign(math.inf, -upper)), lower),
        ]:
            assert nearest_wide(value, WIDE[name]) == nearest  # the oracle agrees
            assert inspector.decompose(value, name).stored == nearest, (name, value)


def test_tf32_rounds_once_from_the_exact_value():
    # Just above the tie between 1.0 and 1 + 2^-10: the nearest TF32 value is the upper one.
    # Rounding to fp32 first (1 + 2^-11, exactly the tie) and then to TF32 would give 1.0.
    value = 1.0004882812509095
    assert 1 + 2**-11 < value < 1 + 2**-11 + 2**-23
    assert torch.tensor(value, dtype=torch.float64).to(torch.float32).item() == 1 + 2**-11
    assert inspector.decompose(value, "tf32").stored == 1 + 2**-10
    for value in [0.1, 1 / 3, 1.0 + 3 * 2**-11, -7.77, 1e-30, 3e38]:
        fields = inspector.decompose(value, "tf32")
        assert fields.stored == nearest_wide(value, 10), value
        # TF32 keeps fp32's exponent: the same field unless rounding carried into it.
        fp32_exponent = inspector.decompose(value, "fp32").exponent
        assert fields.exponent == fp32_exponent or fields.mantissa == 0
    assert inspector.decompose(1.0 + 2**-11, "tf32").stored == 1.0  # a tie goes to even
    assert inspector.decompose(1.0, "tf32").gap == 2.0**-10
    assert inspector.decompose(2.0**128 - 2.0**116, "tf32").kind == "inf"  # the overflow tie
    assert (
        inspector.decompose(math.nextafter(2.0**128 - 2.0**116, 0), "tf32").stored
        == (2 - 2**-10) * 2.0**127
    )


def test_representable_values_count_and_order():
    e4m3 = inspector.representable_values("fp8 e4m3")
    assert len(e4m3) == 126 and e4m3.max().item() == 448.0  # 127 positive patterns minus NaN
    e5m2 = inspector.representable_values("fp8 e5m2")
    assert len(e5m2) == 123 and e5m2.max().item() == 57344.0  # 127 minus inf and 3 NaNs
    fp16 = inspector.representable_values("fp16")
    assert fp16.min().item() == 2.0**-24 and fp16.max().item() == 65504.0
    assert bool((fp16[1:] > fp16[:-1]).all())


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="do not fit"):
        inspector.compose(0, 32, 0, "fp16")
    with pytest.raises(ValueError, match="too many"):
        inspector.representable_values("fp32")
    with pytest.raises(ValueError, match="Unknown format"):
        inspector.decompose(1.0, "fp12")


def test_text_and_html_rendering():
    text = inspector.describe(inspector.decompose(1.0, "fp16"))
    assert "0 01111 0000000000" in text
    page = inspector.to_html(0.1)
    for name in inspector.INSPECTED_FORMATS:
        assert f"<td>{name}</td>" in page


def test_top_of_a_format_reads_largest_finite():
    for value, name in [(65504.0, "fp16"), (448.0, "fp8 e4m3"), (57344.0, "fp8 e5m2")]:
        fields = inspector.decompose(value, name)
        assert inspector.gap_text(fields) == "largest finite"
        assert inspector.describe(fields).endswith("gap to next largest finite")
        assert "<td>largest finite</td>" in inspector.to_html(value, [name])
    assert inspector.gap_text(inspector.decompose(1.0, "fp16")) == "0.000977"
    assert inspector.gap_text(inspector.decompose(-65504.0, "fp16")) == "32"  # towards -inf: finite
    nan = inspector.decompose(math.nan, "fp16")
    assert inspector.gap_text(nan) == "-" and "largest" not in inspector.describe(nan)


def test_lost_values_are_named():
    overflow = inspector.decompose(65520.0, "fp16")
    assert overflow.outcome == "overflow: rounds to +inf (the largest finite fp16 value is 65504)"
    line = inspector.describe(overflow)
    assert "nan" not in line and line.endswith(overflow.outcome)  # no "+nan", no "gap ... nan"
    assert inspector.error_text(overflow) == "-" and inspector.gap_text(overflow) == "-"
    assert "overflow" in inspector.decompose(-1e39, "fp32").outcome
    saturated = inspector.decompose(65520.0, "fp8 e4m3")
    if saturated.stored == 448.0:  # this torch saturates (the lesson prints which)
        assert saturated.outcome.startswith("saturated: clamped to 448")
    underflow = inspector.decompose(1e-8, "fp16")
    assert underflow.outcome.startswith("underflow: rounds to 0 (at or below 2.98e-08")
    # Nothing is said where nothing was lost beyond ordinary rounding.
    for value, name in [(449.0, "fp8 e4m3"), (0.1, "fp16"), (0.0, "fp16"), (math.inf, "fp16")]:
        assert inspector.decompose(value, name).outcome == "", (value, name)
    page = inspector.to_html(65520.0, ["fp16"])
    assert "<th>lost</th>" in page and "overflow: rounds to +inf" in page


def test_widget_box_and_slider_follow_each_other():
    w = inspector_widget.BitInspector(1.0)
    assert "value = 1.0" in w.table.value and w.slider.value == 1.0
    w.box.value = "65520"  # typed: the table and the slider follow
    assert "value = 65520.0" in w.table.value and "<td>inf</td>" in w.table.value
    assert w.slider.value == pytest.approx(65520.0)
    assert "overflow" in w.table.value
    assert w.slider.readout and w.slider.readout_format == ".3g"  # the slider shows its position
    w.slider.value = 1e-8  # dragged: the box and the table follow
    assert float(w.box.value) == pytest.approx(1e-8) and "<td>zero</td>" in w.table.value
    w.box.value = "-3"
    assert w.slider.value == pytest.approx(3.0)
    w.slider.value = 100.0
    assert w.box.value == "-100"  # the slider sets the magnitude and keeps the sign
    for beyond in ("1e-40", "inf", "nan", "0"):  # outside the slider: it stays, the box keeps it
        w.box.value = beyond
        assert w.box.value == beyond and w.slider.value == pytest.approx(100.0)
    w.box.value = "a tenth"
    assert "is not a number" in w.table.value


def test_widget_keeps_a_typed_value_when_the_browser_snaps_the_slider():
    w = inspector_widget.BitInspector(0.1)
    w.box.value = "65504"
    w.slider.value = 10**4.816  # the browser's slider moves in steps of 10^0.001, echoes back
    assert w.box.value == "65504" and "value = 65504.0" in w.table.value
    w.slider.value = 10**4.9  # a real drag, further than one step
    assert float(w.box.value) == pytest.approx(10**4.9, rel=1e-5)


def test_widget_format_buttons_choose_the_rows():
    w = inspector_widget.BitInspector(0.1, formats=("fp16", "bf16"))
    assert w.formats == ["fp16", "bf16"]
    assert "<td>fp16</td>" in w.table.value and "<td>fp32</td>" not in w.table.value
    w.buttons["fp32"].value = True
    w.buttons["fp16"].value = False
    assert w.formats == ["fp32", "bf16"]  # always in the inspector's order
    on, off = w.buttons["fp32"], w.buttons["fp16"]
    assert (on.button_style, on.icon) == ("info", "check") and (off.button_style, off.icon) == (
        "",
        "",
    )
    assert "<td>fp32</td>" in w.table.value and "<td>fp16</td>" not in w.table.value
    for button in w.buttons.values():
        button.value = False
    assert "at least one format" in w.table.value


@pytest.fixture
def displayed(monkeypatch):
    """What show() hands to IPython's display, one entry per call."""
    calls = []
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: calls.append((objs, kw)))
    return calls


@pytest.mark.parametrize("front_end_renders_widgets", [True, False])
def test_show_picks_the_widget_where_widgets_render_and_displays_once(
    monkeypatch, displayed, front_end_renders_widgets
):
    import ipywidgets

    from amp_course import display

    monkeypatch.setattr(display, "widgets_available", lambda: front_end_renders_widgets)
    monkeypatch.setattr("IPython.get_ipython", lambda: object())  # as inside a kernel
    assert inspector.show(0.1) is None  # nothing returned, so a cell does not show it again
    ((objs, kw),) = displayed
    if front_end_renders_widgets:
        assert isinstance(objs[0], ipywidgets.VBox)
    else:  # one output: an HTML table with the text lines as its plain-text fallback
        (bundle,) = objs
        assert kw == {"raw": True} and "<table>" in bundle["text/html"]
        assert "0 01011 1001100110" in bundle["text/plain"]


def test_fixed_rendering_prints_text(capsys):
    assert inspector.show(0.1, interactive=False) is None
    out = capsys.readouterr().out
    assert "fp16" in out and "0 01011 1001100110" in out
