"""Lesson 11's checkers: the references agree with independent oracles (ac.block_formats where the
layout is one of its formats, a per-element search over a layout's numbers otherwise), correct
answers written in several styles pass at two seeds, and each plausible mistake is rejected with
a message that says what differs."""

import math
import re

import numpy as np
import pytest
import torch

from amp_course import block_formats, exercises, fp8_recipes
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_11 as lesson
from amp_course.exercises.solutions import lesson_11 as solutions

SEEDS = (0, 12345)


def _passes(name, answer):
    return [exercises.verdict(name, answer, seed)[0] for seed in SEEDS] == ["passed"] * 2


def _rejected(name, answer, words):
    for seed in SEEDS:
        status, message = exercises.verdict(name, answer, seed)
        assert status == "failed", (seed, message)
    message = exercises.verdict(name, answer, 0)[1]
    assert re.search(words, message), message
    return message


# ---- 11.mx_roundtrip -----------------------------------------------------------------------------
def _layout_values(e, m):
    bias = 2 ** (e - 1) - 1
    values = {
        (mantissa if exponent == 0 else 2**m + mantissa) * 2.0 ** (max(exponent, 1) - bias - m)
        for exponent in range(2**e)
        for mantissa in range(2**m)
    }
    return sorted(values)


def _slow_reference(x, e, m, block):
    """The spec in Python floats: ties go to the value with the even code (its index)."""
    grid, out = _layout_values(e, m), []
    emax = math.floor(math.log2(grid[-1]))
    for values in x.double().reshape(-1, block).tolist():
        amax = max(abs(v) for v in values)
        scale = 2.0 ** (-127 if amax == 0 else max(math.floor(math.log2(amax)) - emax, -127))
        for v in values:
            target = min(abs(v) / scale, grid[-1])
            i = min(range(len(grid)), key=lambda j: (abs(grid[j] - target), j % 2))
            out.append(math.copysign(grid[i] * scale, v))
    return torch.tensor(out, dtype=torch.float32).reshape(x.shape)


def test_layout_max_follows_the_ocp_fp6_and_fp4_tables():
    assert lesson.mx.layout_max(3, 2) == 28 and lesson.mx.layout_max(2, 3) == 7.5
    assert lesson.mx.layout_max(2, 1) == 6 == block_formats.E2M1.max


@pytest.mark.parametrize("seed", SEEDS)
def test_mx_reference_agrees_with_the_spec_element_by_element(seed):
    for case in lesson.mx.mx_cases(seed):
        e, m, block = case["layout"]
        got = solutions.mx_roundtrip(case["x"], e, m, block)
        assert torch.equal(got, _slow_reference(case["x"], e, m, block)), case["name"]


def test_mx_reference_is_block_formats_mxfp4_for_e2m1():
    x = torch.randn(6, 64) * 10 ** torch.randint(-8, 8, (6, 1)).float()
    assert torch.equal(
        solutions.mx_roundtrip(x, 2, 1, 32), block_formats.block_roundtrip(x, "mxfp4")
    )


def _mx(
    log2="floor",
    emax_shift=0,
    ieee_emax=False,
    saturate=True,
    per_tensor=False,
    clamp=True,
    ties="even",
    subnormals=True,
    log2_dtype=torch.float64,
    one_sided=False,
    signed_amax=False,
):
    """An MX round trip written with torch.log2 (the amax's in ``log2_dtype``: float64 is exact
    enough for a float32 amax), with one rule changed."""

    def answer(x, e, m, block):
        bias = 2 ** (e - 1) - 1
        largest = (2 - 2.0**-m) * 2.0 ** (2**e - 1 - bias)
        emax = (2**e - 2 - bias) if ieee_emax else math.floor(math.log2(largest)) + emax_shift
        blocks = x.reshape(*x.shape[:-1], -1, block)
        amax = (blocks if signed_amax else blocks.abs()).amax(-1, keepdim=True)
        amax = amax.clamp(min=0) if signed_amax else amax
        if per_tensor:
            amax = amax.amax().expand_as(amax)
        top = getattr(torch, log2)(torch.log2(amax.to(log2_dtype))).float()
        shared = torch.where(amax > 0, top - emax, torch.tensor(-127.0))
        scale = torch.exp2(shared.clamp(min=-127) if clamp else shared)
        v = blocks / scale
        v = (v.clamp(max=largest) if one_sided else v.clamp(-largest, largest)) if saturate else v
        binade = torch.floor(torch.log2(v.abs().clamp(min=1e-45))).clamp(min=1 - bias)
        step = torch.exp2(binade - m)
        q = torch.round(v / step) if ties == "even" else torch.floor((v / step).abs() + 0.5)
        q = q if ties == "even" else torch.copysign(q, v)
        out = q * step
        if not subnormals:
            out = torch.where(v.abs() < 2.0 ** (1 - bias), 0.0, out)
        return (out * scale).reshape(x.shape).float()

    return answer


def _numpy_loop(x, e, m, block):
    bias = 2 ** (e - 1) - 1
    largest = (2 - 2.0**-m) * 2.0 ** (2**e - 1 - bias)
    emax = int(np.floor(np.log2(largest)))
    out = x.numpy().astype(np.float64).reshape(-1, block).copy()
    for row in out:
        amax = np.abs(row).max()
        scale = 2.0 ** (-127 if amax == 0 else max(int(np.floor(np.log2(amax))) - emax, -127))
        v = np.clip(row / scale, -largest, largest)
        binade = np.maximum(np.floor(np.log2(np.maximum(np.abs(v), 1e-300))), 1 - bias)
        step = 2.0 ** (binade - m)
        row[:] = np.round(v / step) * step * scale  # numpy rounds halves to even
    return torch.from_numpy(out.reshape(x.shape)).to(torch.float32)


def _with_course_grid(x, e, m, block):
    bias = 2 ** (e - 1) - 1
    largest = (2 - 2.0**-m) * 2.0 ** (2**e - 1 - bias)
    emax = math.floor(math.log2(largest))
    blocks = x.float().reshape(*x.shape[:-1], -1, block)
    exponent = torch.floor(torch.log2(blocks.abs().amax(-1, keepdim=True).double())).float()
    scale = 2.0 ** (exponent.clamp(min=-127 + emax) - emax)
    v = (blocks / scale).clamp(-largest, largest)
    return (block_formats.round_to_grid(v, e, m) * scale).reshape(x.shape)


@pytest.mark.parametrize("answer", [_mx(), _numpy_loop, _with_course_grid])
def test_mx_correct_answers_in_several_styles_pass(answer):
    assert _passes("11.mx_roundtrip", answer)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (_mx(ieee_emax=True), r"comes back as .*; section 2.s rule gives"),
        (_mx(emax_shift=1), r"comes back as .*; section 2.s rule gives"),
        (_mx(log2="round"), r"comes back as .*; section 2.s rule gives"),
        (_mx(log2="ceil"), r"comes back as .*; section 2.s rule gives"),
        (_mx(saturate=False), r"row 0, block 0 .* comes back as"),
        (_mx(per_tensor=True), r"row 0, block 0 .* comes back as -?0;"),
        (_mx(clamp=False), r"row 3, block 1 .* comes back as"),
        (  # float32's log2 of 2**k less one ulp is k: one binade too high
            _mx(log2_dtype=torch.float32),
            r"row 2, block 1 \(amax 3\.81469704e-06\), element 0 = 3\.81469704e-06 comes back "
            r"as 3\.81469727e-06; section 2.s rule gives 3\.33786011e-06\.",
        ),
        (_mx(ties="away"), r"row 1, block 0"),
        (_mx(subnormals=False), r"comes back as 0;"),
        (lambda x, e, m, b: x, r"comes back as"),
        (lambda x, e, m, b: None, r"returned None; return a tensor of x's shape"),
        (
            lambda x, e, m, b: x[:, :b],
            r"E3M2 returned a float32 tensor of shape \(4, 32\); return a tensor of x's shape",
        ),
        (  # a number: no tensor for the checker to take apart
            lambda x, e, m, b: x.float().sum(),
            r"E3M2 returned a float32 tensor of shape \(\); return a tensor of x's shape",
        ),
        (lambda x, e, m, b: 0.0, r"E3M2 returned a float; return a tensor of x's shape"),
        (
            lambda x, e, m, b: solutions.mx_roundtrip(x, e, m, b).double(),
            r"E3M2 returned a float64 tensor; x is a float32 tensor, and the reference returns a "
            r"float32 tensor\.",
        ),
        (
            lambda x, e, m, b: solutions.mx_roundtrip(x, e, m, b).to(x.dtype),
            r"E3M2, x in float64 of shape \(2, 2, 64\) returned a float64 tensor; x is a float64 "
            r"tensor",
        ),
        (
            lambda x, e, m, b: solutions.mx_roundtrip(x, e, m, b).numpy(),
            r"returned an ndarray; x is a float32 tensor",
        ),
        (  # codes in 8 bits, the cast back left out
            lambda x, e, m, b: solutions.mx_roundtrip(x, e, m, b).to(torch.int8),
            r"returned an int8 tensor; x is a float32 tensor",
        ),
    ],
)
def test_mx_wrong_answers_are_rejected_saying_what_differs(wrong, words):
    message = _rejected("11.mx_roundtrip", wrong, words)
    assert "scale" not in message and "largest" not in message  # what the learner works out


def test_mx_cases_plant_every_decisive_block_and_vary_with_the_seed():
    layouts = [[c["layout"] for c in lesson.mx.mx_cases(s)] for s in (0, 12345, 987654321)]
    assert layouts[0] != layouts[1] != layouts[2]
    for case in [c for seed in (0, *range(1, 30), 12345) for c in lesson.mx.mx_cases(seed)]:
        e, m, block = case["layout"]
        x, emax = case["x"], math.floor(math.log2(lesson.mx.layout_max(e, m)))
        outlier = x[0, :block].abs().max().item()
        assert outlier / 2 ** math.floor(math.log2(outlier)) > lesson.mx.layout_max(e, m) / 2**emax
        negative = x[0, block : 2 * block]  # the same, negative: its block's amax is |min|
        assert (
            negative.min().abs() == negative.abs().max() == outlier * x[0, block + 3].sign().neg()
        )
        assert x[2, :block].eq(0).all()  # a block of zeros
        assert x[3, block:].abs().max() < 2.0 ** (-127 + emax)  # needs the -127 clamp
        top = x[2, block : 2 * block].abs().max()  # float32's log2 rounds up to the next binade
        assert torch.log2(top).floor().item() == math.floor(math.log2(top.item())) + 1


@pytest.mark.parametrize(
    "wrong",
    [
        lambda x, e, m, b: solutions.mx_roundtrip(x, 2, m, b),
        lambda x, e, m, b: solutions.mx_roundtrip(x, 3, m, b),
        lambda x, e, m, b: solutions.mx_roundtrip(x, e, m, 32),
        lambda x, e, m, b: solutions.mx_roundtrip(x, e, m, 16),
    ],
    ids=["exponent bits of 2", "exponent bits of 3", "blocks of 32", "blocks of 16"],
)
def test_every_seed_needs_the_exponent_bits_and_the_block_size(wrong):
    """A grader's seed draws a layout of each exponent width and a block of each size: at seeds
    that drew one width, or one size, an answer fixing it passed (seeds 1 and 7 among them)."""
    for seed in (1, 7, 10, 22, 33, 41, 45, 68, 75, 77, 78):
        assert exercises.verdict("11.mx_roundtrip", wrong, seed)[0] == "failed", seed
    for seed in range(1, 300):
        cases = [c["layout"] for c in lesson.mx.mx_cases(seed)]
        assert {e for e, _, _ in cases} == {2, 3} and {b for _, _, b in cases} == {16, 32}, seed


# ---- 11.fp8_gain --------------------------------------------------------------------------------
def _gain(out_fp8=False, cast_bytes=5, combine=max, unit=1e12, peak_only=False, fp8_twice=False):
    def answer(m, k, n, bf16_tflops, fp8_tflops, bandwidth_tbs):
        fp8_tflops = 2 * bf16_tflops if fp8_twice else fp8_tflops  # the peak given, ignored
        flops, bandwidth = 2 * m * k * n, bandwidth_tbs * unit
        inputs, out = m * k + n * k, m * n
        bf16 = combine(flops / (bf16_tflops * 1e12), 2 * (inputs + out) / bandwidth)
        fp8 = combine(
            flops / (fp8_tflops * 1e12), (inputs + (1 if out_fp8 else 2) * out) / bandwidth
        )
        if peak_only:
            return bf16, bf16 / 2, 0.0
        return bf16, fp8, cast_bytes * inputs / bandwidth

    return answer


def test_gain_reference_matches_the_lessons_helper():
    h100 = fp8_recipes.fp8_roofline()
    for m, k, n, *_ in lesson.gain.GAIN_CASES[:3]:
        p = fp8_recipes.predict_fp8_linear(m, k, n, h100)
        assert solutions.fp8_linear_times(m, k, n, 989.4, 1978.9, 3.35) == pytest.approx(
            (p.bf16_s, p.fp8_gemm_s, p.cast_s)
        )


@pytest.mark.parametrize(
    "answer",
    [_gain(), lambda *a: list(_gain()(*a)), lambda *a: tuple(np.float64(t) for t in _gain()(*a))],
)
def test_gain_correct_answers_pass(answer):
    assert _passes("11.fp8_gain", answer)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (_gain(out_fp8=True), r"your FP8 GEMM time is .* \(yours / expected = 0\.99"),
        (_gain(cast_bytes=3), r"your amax-and-cast time .* \(yours / expected = 0\.6\)"),
        (_gain(cast_bytes=1), r"your amax-and-cast time .* \(yours / expected = 0\.2\)"),
        (_gain(combine=lambda a, b: a + b), r"your bf16 GEMM time"),
        (_gain(unit=1e9), r"your bf16 GEMM time .* \(yours / expected = 43"),
        (_gain(peak_only=True), r"your (FP8 GEMM|amax-and-cast) time"),
        (lambda *a: 1.5, r"returned 1\.5 \(a float\); return three numbers in seconds"),
        (lambda *a: _gain()(*a)[:2], r"return three numbers"),
        (
            lambda *a: tuple(max(t, 2e-6) for t in _gain()(*a)),  # torchao's 2 us a kernel
            r"fp8_linear_times\(32, 1024, 1024, .*: your bf16 GEMM time is 2e-06 s",
        ),
        (
            lambda *a: dict(zip(("bf16", "fp8", "cast"), _gain()(*a), strict=True)),
            r"returned \{'bf16': [^;]{60,} \.\.\. \(a dict\); return three numbers in seconds",
        ),
    ],
)
def test_gain_wrong_answers_are_rejected_saying_what_differs(wrong, words):
    _rejected("11.fp8_gain", wrong, words)


def _gain_counting_one_flop_per_multiply_add(m, k, n, bf16_tflops, fp8_tflops, bandwidth_tbs):
    return _gain()(m, k, n, bf16_tflops * 2, fp8_tflops * 2, bandwidth_tbs)  # half the FLOPs


@pytest.mark.parametrize("seed", range(1, 9))
def test_every_seed_runs_a_compute_bound_gemm_so_a_wrong_flop_count_fails(seed):
    status, message = exercises.verdict(
        "11.fp8_gain", _gain_counting_one_flop_per_multiply_add, seed
    )
    assert status == "failed" and "your bf16 GEMM time" in message, message


# ---- 11.moment_bytes ---------------------------------------------------------------------------
def _moments(absmax=True, rule=True, moments=2, per_tensor_scale=False, bf16_bytes=2, sides=None):
    def answer(shape, state):
        n = math.prod(shape[:sides])
        if state == "bf16":
            return moments * bf16_bytes * n
        if state == "8bit" and (not rule or (n >= 4096 and n % 256 == 0)):
            scales = (4 if per_tensor_scale else 4 * math.ceil(n / 256)) if absmax else 0
            return moments * (n + scales)
        return moments * 4 * n

    return answer


def test_moment_reference_matches_what_the_optimizer_holds():
    from amp_course import optim_states

    for shape in [(4096,), (300, 20), (64, 64), (63, 64), (512, 768)]:
        for state in lesson.moments.STATE_KINDS:
            p = torch.nn.Parameter(torch.zeros(shape))
            p.grad = torch.ones(shape)
            optimizer = optim_states.AdamW([p], state=state)
            optimizer.step()
            held = optim_states.state_bytes(optimizer) - 4  # less the step counter
            assert solutions.moment_bytes(shape, state) == held, (shape, state)


@pytest.mark.parametrize(
    "answer",
    [_moments(), lambda s, k: float(_moments()(s, k)), lambda s, k: np.int64(_moments()(s, k))],
)
def test_moment_correct_answers_pass(answer):
    assert _passes("11.moment_bytes", answer)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            _moments(absmax=False),
            r"'8bit'\) returned [\d,]+ bytes .* expected [\d,]+ \(2\.03125 bytes",
        ),
        (_moments(rule=False), r"'8bit'\) returned .* expected [\d,]+ \(8 bytes per value\)"),
        (_moments(moments=1), r"'fp32'\) returned .* \(8 bytes per value\)"),
        (_moments(per_tensor_scale=True), r"'8bit'\) returned"),
        (_moments(bf16_bytes=4), r"'bf16'\) returned .* \(4 bytes per value\)"),
        (lambda s, k: "many", r"returned 'many' \(a str\); return a number of bytes"),
    ],
)
def test_moment_wrong_answers_are_rejected_saying_what_differs(wrong, words):
    _rejected("11.moment_bytes", wrong, words)


def _moments_misreading(threshold):
    """8-bit moments wherever ``threshold(n)`` says so (the right rule: n >= 4096, n % 256 == 0)."""

    def answer(shape, state):
        n = math.prod(shape)
        if state == "8bit":
            return 2 * (n + 4 * (n // 256)) if threshold(n) else 2 * 4 * n
        return _moments()(shape, state)

    return answer


@pytest.mark.parametrize(
    "wrong",
    [
        _moments_misreading(lambda n: n > 4096 and n % 256 == 0),  # 4096 itself kept fp32
        _moments_misreading(lambda n: n % 256 == 0),  # no size limit
        lambda shape, state: (
            2 * 4 * math.prod(shape) if math.prod(shape) < 4096 else _moments()(shape, state)
        ),
    ],
    ids=["above 4096", "no size limit", "bf16 moments fp32 under 4096"],
)
@pytest.mark.parametrize("seed", range(1, 7))
def test_every_seed_meets_the_rules_boundaries(wrong, seed):
    assert exercises.verdict("11.moment_bytes", wrong, seed)[0] == "failed"


def test_a_byte_count_off_by_a_little_shows_the_difference():
    def off(shape, state):
        return _moments()(shape, state) + 1

    message = exercises.verdict("11.moment_bytes", off, 12345)[1]
    mine, expected = re.search(r"returned ([\d,]+) bytes .* expected ([\d,]+) ", message).groups()
    assert int(mine.replace(",", "")) == int(expected.replace(",", "")) + 1, message


def test_wrong_answers_name_the_call_they_failed_on():
    with pytest.raises(ExerciseFailed, match=r"mx_roundtrip\(x, 3, 2, 32\) for MXFP6 E3M2"):
        exercises.check("11.mx_roundtrip", _mx(log2="ceil"))


def test_an_mx_roundtrip_that_overwrites_its_input_fails():
    def scaled_in_place(x, exponent_bits, mantissa_bits, block_size):
        out = solutions.mx_roundtrip(x.clone(), exponent_bits, mantissa_bits, block_size)
        x.mul_(2)  # the caller's tensor, changed on the way
        return out

    with pytest.raises(ExerciseFailed, match=r"the x your code was given changed during the call"):
        exercises.check("11.mx_roundtrip", scaled_in_place)


# Each passed most grader seeds (123, 31, 62 and 62 of them) where no case told it apart: a
# clamp with one side and an amax without abs() while every planted amax was positive, the FP8
# peak taken as twice the bf16 one while every drawn device had that, a count of the first two
# sides while every drawn shape had two or fewer.
@pytest.mark.parametrize(
    "name, wrong",
    [
        ("11.mx_roundtrip", _mx(one_sided=True)),
        ("11.mx_roundtrip", _mx(signed_amax=True)),
        ("11.fp8_gain", _gain(fp8_twice=True)),
        ("11.moment_bytes", _moments(sides=2)),
    ],
    ids=["one-sided clamp", "signed amax", "fp8 peak from bf16", "first two sides"],
)
def test_slips_that_passed_most_grader_seeds_fail_at_every_seed(name, wrong):
    for seed in range(31):
        assert exercises.verdict(name, wrong, seed)[0] == "failed", seed


def test_an_mx_roundtrip_for_two_dimensions_only_fails_in_the_notebook_and_at_grading():
    """The text asks for the last dimension of any x; every case was (4, 2 x block), so an answer
    unpacking ``rows, cols = x.shape`` passed every seed. The float64 case has three."""

    def two_dimensions(x, e, m, b):
        rows, cols = x.shape
        return solutions.mx_roundtrip(x.reshape(rows, cols), e, m, b)

    for seed in (0, 1, 2, 12345):
        status, message = exercises.verdict("11.mx_roundtrip", two_dimensions, seed)
        assert status == "failed" and "of shape (2, 2, " in message and "ValueError" in message

    def one_off_in_three_dimensions(x, e, m, b):
        y = solutions.mx_roundtrip(x, e, m, b)
        if x.dim() == 3:
            y[1, 0, 5] += 1
        return y

    status, message = exercises.verdict("11.mx_roundtrip", one_off_in_three_dimensions, 0)
    assert re.search(r"shape \(2, 2, 64\): row \(1, 0\), block 0 .* element 5 = ", message)
