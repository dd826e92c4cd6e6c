"""Lesson 10's checkers accept the references, reject the usual mistakes saying what differs, and
the references agree with ac.op_costs's count of real operators (an independent oracle)."""

import math
import re

import numpy
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from amp_course import exercises, op_costs, precisions
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_10 as lesson
from amp_course.exercises.solutions import lesson_10 as solutions

NAMES = ["10.matmul_intensity", "10.wave_efficiency", "10.conv_intensity"]
DTYPES = {2: torch.bfloat16, 4: torch.float32}  # the convolution cases' itemsizes


@pytest.mark.parametrize("name", NAMES)
def test_cases_differ_from_seed_to_seed(name):
    observe = exercises.get(name).observe
    cases = [[r["case"] for r in observe(exercises.solution(name), s)] for s in (0, 1, 2)]
    assert cases[0] != cases[1] != cases[2]


@pytest.mark.parametrize("seed", [0, 3])
def test_matmul_reference_matches_the_recorded_operator(seed):
    for batch, m, k, n, dtype in lesson.matmul_cases(seed):
        a = torch.empty(batch, m, k, device="meta", dtype=precisions.get(dtype).dtype)
        b = torch.empty(batch, k, n, device="meta", dtype=precisions.get(dtype).dtype)
        (op,) = op_costs.record_ops(lambda a=a, b=b: torch.bmm(a, b))
        assert op.dtype == dtype
        assert solutions.matmul_intensity(batch, m, k, n, dtype) == pytest.approx(op.intensity)


@pytest.mark.parametrize("seed", [0, 3])
def test_conv_reference_matches_the_recorded_operator(seed):
    for batch, c_in, c_out, size, kernel, itemsize in lesson.conv_cases(seed):
        dtype = DTYPES[itemsize]
        x = torch.empty(batch, c_in, size, size, device="meta", dtype=dtype)
        w = torch.empty(c_out, c_in, kernel, kernel, device="meta", dtype=dtype)
        ops = op_costs.record_ops(lambda x=x, w=w, p=kernel // 2: F.conv2d(x, w, padding=p))
        (op,) = [o for o in ops if o.flops]
        assert op.bytes_written == batch * c_out * size * size * itemsize  # the size is kept
        assert solutions.conv_intensity(
            batch, c_in, c_out, size, kernel, itemsize
        ) == pytest.approx(op.intensity)


def test_wave_efficiency_of_the_lessons_shapes():
    # 32 x 32 = 1024 tiles fill 7.76 waves of 132 SMs: 8 waves; 4104 needs 33 x 33 = 1089
    # tiles, 8.25 waves: 9.
    assert solutions.wave_efficiency(1, 4096, 4096, 128, 128, 132) == pytest.approx(
        4096**2 / (8 * 132 * 128**2)
    )
    assert solutions.wave_efficiency(1, 4104, 4104, 128, 128, 132) == pytest.approx(
        4104**2 / (9 * 132 * 128**2)
    )
    assert solutions.wave_efficiency(1, 128, 128, 128, 128, 1) == 1.0
    # A batch shares the waves: 768 matrices of 2 x 2 tiles are 3072 tiles, 23.3 waves of 132:
    # 24, not 768 waves of one matrix's 4 tiles each.
    assert solutions.wave_efficiency(768, 197, 197, 128, 128, 132) == pytest.approx(
        768 * 197**2 / (24 * 132 * 128**2)
    )


SIZES = {"fp32": 4, "fp16": 2, "bf16": 2}


def _macs(batch, m, k, n, dtype):
    return solutions.matmul_intensity(batch, m, k, n, dtype) / 2


def _no_output(batch, m, k, n, dtype):
    return 2 * batch * m * k * n / (SIZES[dtype] * batch * (m * k + k * n))


def _one_input(batch, m, k, n, dtype):
    return 2 * batch * m * k * n / (SIZES[dtype] * batch * (m * k + m * n))


def _two_bytes_always(batch, m, k, n, dtype):
    return 2 * batch * m * k * n / (2 * batch * (m * k + k * n + m * n))


def _elements(batch, m, k, n, dtype):
    return 2 * batch * m * k * n / (batch * (m * k + k * n + m * n))


def _batch_in_flops_only(batch, m, k, n, dtype):
    return 2 * batch * m * k * n / (SIZES[dtype] * (m * k + k * n + m * n))


def _batch_in_bytes_only(batch, m, k, n, dtype):
    return 2 * m * k * n / (SIZES[dtype] * batch * (m * k + k * n + m * n))


def _tiles_only(batch, m, n, tile_m, tile_n, sms):
    return m * n / (math.ceil(m / tile_m) * math.ceil(n / tile_n) * tile_m * tile_n)


def _floor_tiles(batch, m, n, tile_m, tile_n, sms):
    tiles = max(1, batch * (m // tile_m) * (n // tile_n))
    return batch * m * n / (math.ceil(tiles / sms) * sms * tile_m * tile_n)


def _floor_waves(batch, m, n, tile_m, tile_n, sms):
    tiles = batch * math.ceil(m / tile_m) * math.ceil(n / tile_n)
    return batch * m * n / (max(1, tiles // sms) * sms * tile_m * tile_n)


def _waves_per_matrix(batch, m, n, tile_m, tile_n, sms):
    tiles = math.ceil(m / tile_m) * math.ceil(n / tile_n)
    return batch * m * n / (batch * math.ceil(tiles / sms) * sms * tile_m * tile_n)


def _tile_sides_swapped(batch, m, n, tile_m, tile_n, sms):
    tiles = batch * math.ceil(m / tile_n) * math.ceil(n / tile_m)  # m cut by the tile's width
    return batch * m * n / (math.ceil(tiles / sms) * sms * tile_m * tile_n)


def _one_matrix_useful(batch, m, n, tile_m, tile_n, sms):
    tiles = batch * math.ceil(m / tile_m) * math.ceil(n / tile_n)
    return m * n / (math.ceil(tiles / sms) * sms * tile_m * tile_n)


@pytest.mark.parametrize(
    "name, wrong, words",
    [
        (
            "10.matmul_intensity",
            _macs,
            "1,907,539,968 FLOPs: half the reference's; or, at its FLOPs, 196,684,800 bytes, every "
            "element at 4 bytes.",
        ),
        (
            "10.matmul_intensity",
            _no_output,
            "38,731,776 bytes: the reference's count without the output",
        ),
        ("10.matmul_intensity", _one_input, "without the left input or the right input"),
        ("10.matmul_intensity", _two_bytes_always, "1, 12608, 768, 3072, 'fp32') returned"),
        ("10.matmul_intensity", _two_bytes_always, "101,548,032 bytes: every element at 2 bytes"),
        (
            "10.matmul_intensity",
            _elements,
            "49,171,200 bytes: every element at 1 byte; or, over its bytes, 7,630,159,872 FLOPs: "
            "twice the reference's.",
        ),
        ("10.matmul_intensity", _batch_in_flops_only, "one product's bytes, against the FLOPs"),
        ("10.matmul_intensity", _batch_in_bytes_only, "one product's FLOPs, against the bytes"),
        (
            "10.matmul_intensity",
            lambda *case: "high",
            "returned 'high' (a str); the reference returns a",
        ),
        ("10.wave_efficiency", _tiles_only, "1,024 tile slots: not a whole number of waves of 108"),
        ("10.wave_efficiency", _floor_tiles, "792 tile slots: 6 waves of 132"),
        ("10.wave_efficiency", _tile_sides_swapped, "16, 1100, 3000, 256, 128, 40) returned"),
        ("10.wave_efficiency", _floor_waves, "972 tile slots: 9 waves of 108"),
        ("10.wave_efficiency", _waves_per_matrix, "101,376 tile slots: 768 waves of 132"),
        ("10.wave_efficiency", _one_matrix_useful, "38,809 useful elements: one matrix"),
        ("10.conv_intensity", lambda *case: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_wrong_answers_are_rejected_with_the_reason(name, wrong, words):
    with pytest.raises(ExerciseFailed, match=re.escape(words)):
        exercises.check(name, wrong)


def _matmul_without_batch(batch, m, k, n, dtype):
    # The batch cancels: each product has its own inputs and output.
    itemsize = torch.finfo(precisions.get(dtype).dtype).bits // 8
    return 2 * m * k * n / (itemsize * (m * k + k * n + m * n))


def _matmul_by_itemsize(batch, m, k, n, dtype):
    elements = batch * m * k + batch * k * n + batch * m * n
    return (2 * batch * m * k * n) / (elements * precisions.get(dtype).dtype.itemsize)


def _waves_by_integer_ceil(batch, m, n, tile_m, tile_n, sms):
    tiles = batch * (-(-m // tile_m)) * (-(-n // tile_n))
    return batch * m * n / (-(-tiles // sms) * sms * tile_m * tile_n)


def _waves_as_two_shares(batch, m, n, tile_m, tile_n, sms):
    tiles = batch * math.ceil(m / tile_m) * math.ceil(n / tile_n)
    tile_share = batch * m * n / (tiles * tile_m * tile_n)
    return tile_share * tiles / (math.ceil(tiles / sms) * sms)


@pytest.mark.parametrize(
    "name, answer",
    [
        ("10.matmul_intensity", _matmul_without_batch),
        ("10.matmul_intensity", _matmul_by_itemsize),
        ("10.wave_efficiency", _waves_by_integer_ceil),
        ("10.wave_efficiency", _waves_as_two_shares),
    ],
)
@pytest.mark.parametrize("seed", [0, 12345, 987654321])
def test_right_answers_written_differently_pass(name, answer, seed):
    assert exercises.verdict(name, answer, seed)[0] == "passed"


# ---- 10.conv_intensity: wrong answers told by what differs, right ones written differently -----
def _conv(flops, elements, itemsize):
    return flops / (itemsize * elements)


def _conv_macs(batch, c_in, c_out, size, kernel, itemsize):
    return solutions.conv_intensity(batch, c_in, c_out, size, kernel, itemsize) / 2


def _conv_no_weight(batch, c_in, c_out, size, kernel, itemsize):
    flops = 2 * batch * c_out * size * size * c_in * kernel * kernel
    return _conv(flops, batch * (c_in + c_out) * size * size, itemsize)


def _conv_unfolded_input(batch, c_in, c_out, size, kernel, itemsize):
    """im2col's input: every input element once per kernel position."""
    flops = 2 * batch * c_out * size * size * c_in * kernel * kernel
    elements = (batch * c_in * size**2 + c_out * c_in) * kernel**2 + batch * c_out * size**2
    return _conv(flops, elements, itemsize)


def _conv_elements(batch, c_in, c_out, size, kernel, itemsize):
    return solutions.conv_intensity(batch, c_in, c_out, size, kernel, 1)


def _conv_two_bytes(batch, c_in, c_out, size, kernel, itemsize):
    return solutions.conv_intensity(batch, c_in, c_out, size, kernel, 2)


def _conv_padded_input(batch, c_in, c_out, size, kernel, itemsize):
    padded = size + 2 * (kernel // 2)
    flops = 2 * batch * c_out * size * size * c_in * kernel * kernel
    elements = batch * c_in * padded**2 + c_out * c_in * kernel**2 + batch * c_out * size**2
    return _conv(flops, elements, itemsize)


def _conv_no_kernel_area(batch, c_in, c_out, size, kernel, itemsize):
    flops = 2 * batch * c_out * size * size * c_in
    elements = batch * c_in * size**2 + c_out * c_in * kernel**2 + batch * c_out * size**2
    return _conv(flops, elements, itemsize)


def _conv_no_padding(batch, c_in, c_out, size, kernel, itemsize):
    out = size - kernel + 1
    flops = 2 * batch * c_out * out * out * c_in * kernel * kernel
    elements = batch * c_in * size**2 + c_out * c_in * kernel**2 + batch * c_out * out**2
    return _conv(flops, elements, itemsize)


def _conv_with_bias(batch, c_in, c_out, size, kernel, itemsize):
    flops = 2 * batch * c_out * size * size * c_in * kernel * kernel
    elements = batch * c_in * size**2 + c_out * (c_in * kernel**2 + 1) + batch * c_out * size**2
    return _conv(flops, elements, itemsize)


# The first case is the MNIST CNN's first layer, (128, 1, 32, 28, 3, 4): 57,802,752 FLOPs over
# 401,408 + 1,152 + 12,845,056 = 13,247,616 bytes.
def _conv_output_in_fp32(batch, c_in, c_out, size, kernel, itemsize):
    """The output written at 4 bytes (an fp32 accumulator), the rest at itemsize."""
    flops = 2 * batch * c_out * size * size * c_in * kernel * kernel
    inputs = itemsize * (batch * c_in * size * size + c_out * c_in * kernel * kernel)
    return flops / (inputs + 4 * batch * c_out * size * size)


CONV_WRONG = [
    (
        _conv_macs,
        "means 28,901,376 FLOPs: half the reference's; or, at its FLOPs, 26,495,232 bytes, every "
        "element at 8 bytes.",
    ),
    (_conv_no_weight, "means 13,246,464 bytes: the reference's count without the weight."),
    (
        _conv_unfolded_input,
        "16,458,880 bytes: the reference's count with the input counted 9 times",
    ),
    (
        _conv_elements,
        "means 3,311,904 bytes: every element at 1 byte; or, over its bytes, 231,211,008 FLOPs: 4 "
        "times the reference's.",
    ),
    (
        _conv_two_bytes,
        "means 6,623,808 bytes: every element at 2 bytes; or, over its bytes, 115,605,504 FLOPs: "
        "twice the reference's.",
    ),
    # The second case's output is twice its input: both readings of the extra bytes are said.
    (
        _conv_output_in_fp32,
        "32,149,504 bytes: the reference's count with the input counted 3 times or the output "
        "counted 2 times.",
    ),
    (_conv_padded_input, "13,307,008 bytes, 59,392 more than the reference's (14,848 elements"),
    (_conv_no_kernel_area, "means 6,422,528 FLOPs: 1/9 of the reference's."),
    (
        _conv_no_padding,
        "Your value is the FLOPs over bytes of a 26 x 26 output (49,840,128 FLOPs over 11,478,144 "
        "bytes); the reference's is 28 x 28.",
    ),
    (_conv_with_bias, "13,247,744 bytes, 128 more than the reference's (32 elements of 4 bytes)"),
    (lambda *case: "high", "returned 'high' (a str); the reference returns a number."),
]


def _conv_in_float32(batch, c_in, c_out, size, kernel, itemsize):
    """Right, computed in torch's default dtype: a few float32 roundings off, one byte in 13M."""
    case = torch.tensor([batch, c_in, c_out, size, kernel], dtype=torch.float32)
    b, ci, co, s, k = case
    flops = 2 * b * co * s * s * ci * k * k
    elements = b * ci * s * s + co * ci * k * k + b * co * s * s
    return flops / (itemsize * elements)


def _matmul_as_numpy_float32(batch, m, k, n, dtype):
    """Right, a numpy float32 scalar (not a Python float)."""
    return numpy.float32(solutions.matmul_intensity(batch, m, k, n, dtype))


def _conv_as_a_tensor(*case):
    return torch.tensor(solutions.conv_intensity(*case), dtype=torch.float64)


@pytest.mark.parametrize(
    "name, right",
    [
        ("10.conv_intensity", _conv_in_float32),
        ("10.matmul_intensity", _matmul_as_numpy_float32),
        ("10.conv_intensity", _conv_as_a_tensor),
    ],
)
def test_right_numbers_in_float32_numpy_or_tensors_pass(name, right):
    for seed in (0, 1, 2, 3, 12345):
        assert exercises.verdict(name, right, seed) == ("passed", ""), seed


@pytest.mark.parametrize("wrong, words", CONV_WRONG, ids=[w.__name__ for w, _ in CONV_WRONG])
def test_conv_wrong_answers_are_told_what_differs(wrong, words):
    with pytest.raises(ExerciseFailed) as failure:
        exercises.check("10.conv_intensity", wrong)
    message = str(failure.value)
    assert words in message
    # The first case, its values and the reference's breakdown, where the answer differs there
    # (an output at 4 bytes differs only where the itemsize is 2).
    right_at_first = wrong is _conv_output_in_fp32
    if wrong.__name__ != "<lambda>" and not right_at_first:
        account = (
            "conv_intensity(128, 1, 32, 28, 3, 4) returned {}, expected 4.36326. The reference "
            "counts 57,802,752 FLOPs over 13,247,616 bytes (the input 128 x 1 x 28 x 28: 401,408, "
            "the weight 32 x 1 x 3 x 3: 1,152, the output 128 x 32 x 28 x 28: 12,845,056, at 4 "
            "bytes per element)."
        )
        assert account.format(f"{wrong(128, 1, 32, 28, 3, 4):.6g}") in message
    for guess in ("You counted", "is read from memory too", "forgot", "you "):
        assert guess not in message


@pytest.mark.parametrize("wrong", [w for w, _ in CONV_WRONG][:-1])
@pytest.mark.parametrize("seed", [12345, 987654321])
def test_conv_wrong_answers_fail_at_the_graders_seeds(wrong, seed):
    status, message = exercises.verdict("10.conv_intensity", wrong, seed)
    assert status == "failed" and "The reference counts" in message


def test_every_seed_runs_both_itemsizes():
    """An answer that ignores ``itemsize`` (fixed at 2 bytes) fails at every seed."""
    for seed in (0, 1, 2, 3, 12345, 987654321):
        assert {case[-1] for case in lesson.conv_cases(seed)} == {2, 4}


def _conv_counted_by_torch(batch, c_in, c_out, size, kernel, itemsize):
    dtype = DTYPES[itemsize]
    x = torch.empty(batch, c_in, size, size, device="meta", dtype=dtype)
    w = torch.empty(c_out, c_in, kernel, kernel, device="meta", dtype=dtype)
    with FlopCounterMode(display=False) as counter:
        y = F.conv2d(x, w, padding=kernel // 2)
    moved = sum(t.numel() * t.element_size() for t in (x, w, y))
    return counter.get_total_flops() / moved


def _conv_per_output_element(batch, c_in, c_out, size, kernel, itemsize):
    out = (size + 2 * (kernel // 2) - kernel) // 1 + 1  # the output's size, in general
    outputs = batch * c_out * out * out
    per_output = 2 * c_in * kernel * kernel  # FLOPs of one output element
    elements = batch * c_in * size * size + c_out * c_in * kernel * kernel + outputs
    return outputs * per_output / elements / itemsize


@pytest.mark.parametrize("answer", [_conv_counted_by_torch, _conv_per_output_element])
@pytest.mark.parametrize("seed", [0, 12345, 987654321])
def test_conv_right_answers_written_differently_pass(answer, seed):
    assert exercises.verdict("10.conv_intensity", answer, seed)[0] == "passed"


def _waves_of_own_tiles_when_few(batch, m, n, tile_m, tile_n, sms):
    """A launch of fewer tiles than SMs charged for its own tiles, not for a whole wave."""
    tiles = batch * math.ceil(m / tile_m) * math.ceil(n / tile_n)
    slots = tiles if tiles < sms else math.ceil(tiles / sms) * sms
    return batch * m * n / (slots * tile_m * tile_n)


def _smaller_tile_along_m(batch, m, n, tile_m, tile_n, sms):
    """The tile's shorter side laid along m: right wherever tile_m <= tile_n."""
    tile_m, tile_n = sorted((tile_m, tile_n))
    tiles = batch * math.ceil(m / tile_m) * math.ceil(n / tile_n)
    return batch * m * n / (math.ceil(tiles / sms) * sms * tile_m * tile_n)


def _waves_plus_one(batch, m, n, tile_m, tile_n, sms):
    """tiles // sms + 1 for a ceiling: a wave too many where the tiles fill whole waves."""
    tiles = batch * math.ceil(m / tile_m) * math.ceil(n / tile_n)
    return batch * m * n / ((tiles // sms + 1) * sms * tile_m * tile_n)


def _tiles_plus_one(batch, m, n, tile_m, tile_n, sms):
    """m // tile_m + 1 for a ceiling: a tile too many where a side is a whole number of them."""
    tiles = batch * (m // tile_m + 1) * (n // tile_n + 1)
    return batch * m * n / (math.ceil(tiles / sms) * sms * tile_m * tile_n)


def _waves_rounded(batch, m, n, tile_m, tile_n, sms):
    """Waves rounded to the nearest: a wave too few where the last is less than half full."""
    tiles = batch * math.ceil(m / tile_m) * math.ceil(n / tile_n)
    return batch * m * n / (max(1, round(tiles / sms)) * sms * tile_m * tile_n)


# The first passed 977 grader seeds of 1000, which drew no launch of fewer tiles than SMs; the
# second every seed, which drew tile_m = 64 always, never above tile_n; the next two 106 and 180
# of 200, which drew no whole tiles in whole waves; the last 6 of 100, whose every last wave was
# at least half full.
@pytest.mark.parametrize(
    "wrong",
    [
        _waves_of_own_tiles_when_few,
        _smaller_tile_along_m,
        _waves_plus_one,
        _tiles_plus_one,
        _waves_rounded,
    ],
)
def test_wave_slips_fail_at_every_seed(wrong):
    for seed in range(41):
        assert exercises.verdict("10.wave_efficiency", wrong, seed)[0] == "failed", seed


def _conv_flops_over_one_side(batch, c_in, c_out, size, kernel, itemsize):
    """The FLOPs with size for size**2: a slip of FLOPs, not of bytes."""
    elements = batch * c_in * size**2 + c_out * c_in * kernel**2 + batch * c_out * size**2
    return 2 * batch * c_out * size * c_in * kernel**2 / (itemsize * elements)


def test_a_flop_slip_is_not_told_as_a_tensor_counted_many_times():
    """It said 'the weight counted 310492 times', sending the learner to the bytes."""
    message = exercises.verdict("10.conv_intensity", _conv_flops_over_one_side, 0)[1]
    assert message.endswith("FLOPs: 1/28 of the reference's.") and "counted" not in message


def test_a_value_that_reads_two_ways_is_told_both():
    """At seed 7 (batch 2, fp32) bytes counted for one product are also every element at 2 bytes,
    and at seed 2 a percentage's slots are also whole waves: the message named one reading only,
    a guess at the slip; now every reading that fits is said."""

    def bytes_of_one_product(batch, m, k, n, dtype):
        size = {"fp32": 4, "fp16": 2, "bf16": 2}[dtype]
        return 2 * batch * m * k * n / ((m * k + k * n + m * n) * size)

    def percent(batch, m, n, tile_m, tile_n, sms):
        tiles = batch * math.ceil(m / tile_m) * math.ceil(n / tile_n)
        return 100 * batch * m * n / (math.ceil(tiles / sms) * sms * tile_m * tile_n)

    status, message = exercises.verdict("10.matmul_intensity", bytes_of_one_product, 7)
    assert status == "failed" and "every element at 2 bytes" in message, message
    assert "one product's bytes, against the FLOPs of all 2" in message
    status, message = exercises.verdict("10.wave_efficiency", percent, 2)
    assert status == "failed" and "3 waves of 108" in message, message
    assert "100 times the reference's value" in message
    for seed in (0, 7):  # no whole waves there: the multiple alone
        message = exercises.verdict("10.wave_efficiency", percent, seed)[1]
        assert message.endswith("Your value is 100 times the reference's value."), message
