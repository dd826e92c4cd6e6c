import math

import pytest
import torch
from conftest import SECRET_SEEDS

from amp_course import exercises
from amp_course.exercises import lesson_01
from amp_course.exercises.solutions.lesson_01 import decompose_bits


def test_solution_matches_the_inspector():
    from amp_course import inspector

    formats = [
        (torch.float32, "fp32"),
        (torch.float16, "fp16"),
        (torch.bfloat16, "bf16"),
        (torch.float8_e5m2, "fp8 e5m2"),
        (torch.float8_e4m3fn, "fp8 e4m3"),
    ]
    for dtype, name in formats:
        for value in lesson_01.CASES + lesson_01.cases(12345):
            f = inspector.decompose(value, name)
            assert decompose_bits(value, dtype) == (f.sign, f.exponent, f.mantissa)


def unmasked(value, dtype):
    # Forgets that view() gives a signed integer: negative numbers break.
    e, m = lesson_01.LAYOUTS[dtype]
    view = {32: torch.int32, 16: torch.int16, 8: torch.int8}[1 + e + m]
    bits = torch.tensor(value, dtype=torch.float64).to(dtype).view(view).item()
    return bits >> (e + m), (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)


def hinted_formats_only(value, dtype):
    # Copies the three layouts the lesson spells out and stops there.
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise KeyError(dtype)
    return decompose_bits(value, dtype)


def e4m3_read_as_e5m2(value, dtype):
    # Takes every fp8 format for 1/5/2.
    if dtype == torch.float8_e4m3fn:
        bits = torch.tensor(value, dtype=torch.float64).to(dtype).view(torch.uint8).item()
        return bits >> 7, (bits >> 2) & 31, bits & 3
    return decompose_bits(value, dtype)


def fp16_layout_everywhere(value, dtype):
    # Uses fp16's 5/10 split for bf16 too.
    bits = torch.tensor(value, dtype=torch.float64).to(dtype)
    bits = bits.view(torch.int32 if dtype == torch.float32 else torch.int16).item()
    bits &= (1 << (32 if dtype == torch.float32 else 16)) - 1
    e, m = (8, 23) if dtype == torch.float32 else (5, 10)
    return bits >> (e + m), (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)


@pytest.mark.parametrize(
    "wrong",
    [
        unmasked,
        fp16_layout_everywhere,
        hinted_formats_only,
        e4m3_read_as_e5m2,
        lambda v, d: (0, 0, 0),
        lambda v, d: 1.0,
    ],
)
def test_wrong_answers_fail(wrong):
    with pytest.raises(exercises.ExerciseFailed):
        exercises.check("01.bit_fields", wrong)


def test_wrong_answers_say_what_differs():
    """The message gives the call, the fields returned, the bits torch stores and their fields."""
    with pytest.raises(exercises.ExerciseFailed) as failure:
        exercises.check("01.bit_fields", unmasked)
    assert str(failure.value) == (
        "01.bit_fields: decompose(-2.0, torch.float32) returned (sign, exponent, mantissa) = "
        "(-1, 128, 0); "
        "torch casts -2.0 to the 32 bits 11000000000000000000000000000000, whose fields are "
        "(1, 128, 0)."
    )
    with pytest.raises(exercises.ExerciseFailed, match=r"decompose\(1.0, torch.float8_e4m3fn\)"):
        exercises.check("01.bit_fields", e4m3_read_as_e5m2)
    with pytest.raises(exercises.ExerciseFailed, match=r"torch.float8_e5m2\).*raised KeyError"):
        exercises.check("01.bit_fields", hinted_formats_only)
    with pytest.raises(exercises.ExerciseFailed, match="three integers"):
        exercises.check("01.bit_fields", lambda v, d: 1.0)


def unfloored_exponent(value, dtype):
    # Takes the exponent from log2 without flooring it: 123.68 for 0.1, 127.0 for 1.0.
    sign, exponent, mantissa = decompose_bits(value, dtype)
    if value and math.isfinite(value) and exponent:
        exponent += math.log2(abs(value)) - math.floor(math.log2(abs(value)))
    return sign, exponent, mantissa


def test_fields_that_are_not_whole_numbers_fail_and_whole_floats_pass():
    """A fraction or a string is not a field; 127.0 or a torch integer is the number it holds."""
    with pytest.raises(exercises.ExerciseFailed) as failure:
        exercises.check("01.bit_fields", unfloored_exponent)
    assert str(failure.value).startswith(
        "01.bit_fields: decompose(0.1, torch.float32) returned (0, 123.6"
    ) and str(failure.value).endswith("; return three integers (sign, exponent, mantissa).")
    as_strings = lambda v, d: tuple(str(x) for x in decompose_bits(v, d))  # noqa: E731
    strings = r"returned \('0', '127', '0'\) \(a tuple\); return"
    with pytest.raises(exercises.ExerciseFailed, match=strings):
        exercises.check("01.bit_fields", as_strings)
    as_floats = lambda v, d: tuple(float(x) for x in decompose_bits(v, d))  # noqa: E731
    as_tensors = lambda v, d: tuple(torch.tensor(x) for x in decompose_bits(v, d))  # noqa: E731
    for right in (as_floats, as_tensors):
        assert exercises.verdict("01.bit_fields", right, 0) == ("passed", "")


def test_seed_zero_answers_replayed_fail_at_the_graders_seed():
    table = {(str(v), d): decompose_bits(v, d) for d in lesson_01.LAYOUTS for v in lesson_01.CASES}
    replay = lambda v, d: table.get((str(v), d), (0, 0, 0))  # noqa: E731
    assert exercises.verdict("01.bit_fields", replay, 0)[0] == "passed"
    assert exercises.verdict("01.bit_fields", replay, 12345)[0] == "failed"


# ---- Exercise 2: the value of a pattern in any IEEE-754-style layout --------------------------
VALUE_OF = "01.value_of"


@pytest.mark.parametrize(
    "dtype, e, m",
    [(torch.float16, 5, 10), (torch.bfloat16, 8, 7), (torch.float8_e5m2, 5, 2)],
)
def test_value_of_reference_reads_every_pattern_as_torch_does(dtype, e, m):
    from amp_course.exercises.solutions.lesson_01 import value_of

    width = 1 + e + m
    patterns = torch.arange(2**width, dtype=torch.int32)
    signed = torch.where(patterns >= 2 ** (width - 1), patterns - 2**width, patterns)
    view = {16: torch.int16, 8: torch.int8}[width]
    expected = signed.to(view).view(dtype).double().tolist()
    for bits, want in zip(patterns.tolist(), expected, strict=True):
        assert lesson_01._same(value_of(bits, e, m), want), (hex(bits), want)


def test_value_of_reference_on_layouts_torch_lacks():
    from fractions import Fraction

    from amp_course.exercises.solutions.lesson_01 import value_of

    # 1/3/4: bias 3. 0 011 0000 is 1; 0 000 0001 the smallest subnormal, 1/16 x 2^(1-3).
    assert value_of(0b0_011_0000, 3, 4) == 1.0
    assert value_of(0b0_000_0001, 3, 4) == float(Fraction(1, 16) * Fraction(1, 4))
    assert value_of(0b1_110_1111, 3, 4) == -float(Fraction(31, 16) * 8)
    assert value_of(0b0_111_0000, 3, 4) == float("inf")


def implicit_one_always(bits, e, m):
    sign = -1.0 if bits >> (e + m) else 1.0
    exponent, mantissa = (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)
    if exponent == (1 << e) - 1:
        return sign * float("inf") if mantissa == 0 else float("nan")
    return sign * (1 + mantissa / 2**m) * 2.0 ** (max(exponent, 1) - (2 ** (e - 1) - 1))


def no_inf(bits, e, m):
    sign = -1.0 if bits >> (e + m) else 1.0
    exponent, mantissa = (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)
    bias = 2 ** (e - 1) - 1
    if exponent == 0:
        return sign * mantissa / 2**m * 2.0 ** (1 - bias)
    return sign * (1 + mantissa / 2**m) * 2.0 ** (exponent - bias)


def bias_off_by_one(bits, e, m):
    from amp_course.exercises.solutions.lesson_01 import value_of

    value = value_of(bits, e, m)
    exponent = (bits >> m) & ((1 << e) - 1)
    return value / 2 if 0 < exponent < (1 << e) - 1 else value


def subnormal_exponent_minus_bias(bits, e, m):
    from amp_course.exercises.solutions.lesson_01 import value_of

    value = value_of(bits, e, m)
    return value / 2 if (bits >> m) & ((1 << e) - 1) == 0 else value


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            implicit_one_always,
            r"\(sign bit 0, exponent field 0, mantissa field 1\): yours is 1.00098 x 2\^-14, the "
            r"reference's 0.000976562 x 2\^-14\.$",
        ),
        (
            subnormal_exponent_minus_bias,
            r"yours is 0.000976562 x 2\^-15, the reference's .* 2\^-14",
        ),
        (
            no_inf,
            r"encode inf \(sign bit 0, exponent field 31, .*\): the exponent field is all ones",
        ),
        (bias_off_by_one, r"yours is 1 x 2\^-1, the reference's 1 x 2\^0\.$"),
        (
            lambda bits, e, m: abs(exercises.solution(VALUE_OF)(bits, e, m)),
            r"encode -2.0 \(sign bit 1, .*\): yours has the other sign\.$",
        ),
        (lambda bits, e, m: "one", r"returned 'one' \(a str\); the reference returns a number"),
        (
            lambda bits, e, m: str(exercises.solution(VALUE_OF)(bits, e, m)),
            r"returned '1.0' \(a str\); the reference returns a number\.$",
        ),
    ],
)
def test_value_of_misreadings_fail_saying_what_differs(wrong, message):
    with pytest.raises(exercises.ExerciseFailed, match=message):
        exercises.check(VALUE_OF, wrong)


def via_bit_strings(value, dtype):
    # Another right way: the integer view read as a string of bits, sliced.
    exponent_bits, mantissa_bits = {
        torch.float32: (8, 23),
        torch.float16: (5, 10),
        torch.bfloat16: (8, 7),
        torch.float8_e5m2: (5, 2),
        torch.float8_e4m3fn: (4, 3),
    }[dtype]
    width = 1 + exponent_bits + mantissa_bits
    stored = torch.tensor(value, dtype=torch.float64).to(dtype)
    number = stored.view({32: torch.int32, 16: torch.int16, 8: torch.int8}[width]).item()
    text = format(number % (1 << width), f"0{width}b")
    return int(text[0]), int(text[1 : 1 + exponent_bits], 2), int(text[1 + exponent_bits :], 2)


@pytest.mark.parametrize("seed", [0, 12345, 987654321])
def test_right_answers_written_differently_pass(seed):
    assert exercises.verdict("01.bit_fields", via_bit_strings, seed) == ("passed", "")


# ---- Rounding, overflow and NaN (a test learner's wrong answers passed most grader seeds) -----
def through_fp16_for_e5m2(value, dtype):
    # Rounds to fp16 first, then to e5m2: a second rounding, on the e5m2 tie.
    if dtype == torch.float8_e5m2:
        value = torch.tensor(value, dtype=torch.float64).to(torch.float16).item()
    return decompose_bits(value, dtype)


def inf_above_the_largest(value, dtype):
    # Past finfo.max is inf, by hand: wrong between the largest and the overflow threshold.
    if dtype in (torch.float16, torch.bfloat16) and abs(value) > torch.finfo(dtype).max:
        e, m = lesson_01.LAYOUTS[dtype]
        return int(value < 0), (1 << e) - 1, 0
    return decompose_bits(value, dtype)


def nan_as_inf(value, dtype):
    if math.isnan(value):
        return (0, (1 << lesson_01.LAYOUTS[dtype][0]) - 1, 0)
    return decompose_bits(value, dtype)


def another_nan(value, dtype):
    # A right answer: a NaN other than the one torch stores (the sign set, every mantissa bit).
    if math.isnan(value):
        e, m = lesson_01.LAYOUTS[dtype]
        return 1, (1 << e) - 1, (1 << m) - 1
    return decompose_bits(value, dtype)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (through_fp16_for_e5m2, r"decompose\(1.12500095.*, torch.float8_e5m2\) .* \(0, 15, 0\);"),
        (
            inf_above_the_largest,
            r"decompose\(65510.0, torch.float16\) .* fields are \(0, 30, 1023\)",
        ),
        (nan_as_inf, r"\(0, 255, 0\), which is no NaN in torch.float32: a NaN has every exponent"),
    ],
)
def test_rounding_overflow_and_nan_mistakes_fail_at_every_seed(wrong, message):
    with pytest.raises(exercises.ExerciseFailed, match=message):
        exercises.check("01.bit_fields", wrong)
    for seed in (1, 2, 3, *SECRET_SEEDS):
        assert exercises.verdict("01.bit_fields", wrong, seed)[0] == "failed", seed


def test_any_nan_pattern_answers_a_nan():
    for seed in (0, *SECRET_SEEDS):
        assert exercises.verdict("01.bit_fields", another_nan, seed) == ("passed", "")


def rounded_once_by_numpy(value, dtype):
    """Right: NumPy's (and struct's) casts round a Python float once, where torch's go through
    float32; for fp16 it reads NumPy's bits, for the others torch's."""
    import numpy as np

    if dtype != torch.float16:
        return via_bit_strings(value, dtype)
    with np.errstate(over="ignore"):
        bits = int(np.array(value, dtype=np.float16).view(np.uint16))
    return bits >> 15, (bits >> 10) & 0x1F, bits & 0x3FF


def test_drawn_values_round_the_same_once_as_through_float32():
    """A value just above an fp16 tie (-14484.000155, seed 223) rounded once to -14488 and, through
    float32, to -14480: a right NumPy answer failed there. Drawn values are float32 numbers."""
    for seed in (223, *range(1, 40), *SECRET_SEEDS):
        assert all(
            math.isnan(v) or math.isinf(v) or torch.tensor(v, dtype=torch.float32).item() == v
            for v in lesson_01.cases(seed)[len(lesson_01.EDGES) :]
        ), seed
        assert exercises.verdict("01.bit_fields", rounded_once_by_numpy, seed) == ("passed", "")


def test_the_rounding_cases_round_the_same_through_float32_and_once():
    """torch's cast goes through float32; each rounding case is exact in float32, so a learner
    who rounds once by hand gets the fields torch stores."""
    for value in lesson_01.ROUNDING:
        assert math.isnan(value) or torch.tensor(value, dtype=torch.float32).item() == value


def _subnormal(bits, e, m):
    return (bits >> m) & ((1 << e) - 1) == 0


@pytest.mark.parametrize(
    "slip",
    [
        lambda v, bits, e, m: abs(v) if math.isinf(v) else v,  # -inf read as inf
        lambda v, bits, e, m: abs(v) if _subnormal(bits, e, m) and v else v,  # a subnormal's sign
        lambda v, bits, e, m: -0.0 if v == 0 else v,  # +0 read as -0
    ],
)
def test_value_of_sign_slips_fail_at_every_seed(slip):
    def wrong(bits, e, m):
        return slip(exercises.solution(VALUE_OF)(bits, e, m), bits, e, m)

    for seed in range(30):
        assert exercises.verdict(VALUE_OF, wrong, seed)[0] == "failed", seed


def test_value_of_computed_in_float32_fails_at_every_seed():
    """Layouts of 2 to 8 exponent and 1 to 12 mantissa bits all fit float32, so an answer that
    computed in it passed every seed; each seed now decodes a layout wider than float32."""

    def in_float32(bits, e, m):
        sign = -1.0 if bits >> (e + m) else 1.0
        exponent, mantissa, bias = (
            (bits >> m) & ((1 << e) - 1),
            bits & ((1 << m) - 1),
            2 ** (e - 1) - 1,
        )
        if exponent == (1 << e) - 1:
            return sign * math.inf if mantissa == 0 else math.nan
        scale = torch.tensor(2.0) ** (max(exponent, 1) - bias)
        return (sign * scale * ((exponent > 0) + torch.tensor(mantissa / 2**m))).item()

    for seed in (0, *SECRET_SEEDS[:3], 7):
        status, message = exercises.verdict(VALUE_OF, in_float32, seed)
        assert status == "failed" and "encode" in message, (seed, message)
