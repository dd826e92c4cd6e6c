"""Lesson 10's checkers accept the references, reject the usual mistakes saying why, and the
references agree with ac.op_costs's count of real operators (an independent oracle)."""

import math
import re

import pytest
import torch
import torch.nn.functional as F

from amp_course import exercises, op_costs
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_10 as lesson
from amp_course.exercises.solutions import lesson_10 as solutions

NAMES = ["10.matmul_intensity", "10.wave_efficiency", "10.conv_intensity"]
DTYPES = {2: torch.bfloat16, 4: torch.float32}


@pytest.mark.parametrize("name", NAMES)
def test_cases_differ_from_seed_to_seed(name):
    observe = exercises.get(name).observe
    cases = [[r["case"] for r in observe(exercises.solution(name), s)] for s in (0, 1, 2)]
    assert cases[0] != cases[1] != cases[2]


@pytest.mark.parametrize("seed", [0, 3])
def test_matmul_reference_matches_the_recorded_operator(seed):
    for m, k, n, itemsize in lesson.matmul_cases(seed):
        a = torch.empty(m, k, device="meta", dtype=DTYPES[itemsize])
        b = torch.empty(k, n, device="meta", dtype=DTYPES[itemsize])
        (op,) = op_costs.record_ops(lambda a=a, b=b: torch.mm(a, b))
        assert solutions.matmul_intensity(m, k, n, itemsize) == pytest.approx(op.intensity)


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
    assert solutions.wave_efficiency(4096, 4096, 128, 128, 132) == pytest.approx(
        4096**2 / (8 * 132 * 128**2)
    )
    assert solutions.wave_efficiency(4104, 4104, 128, 128, 132) == pytest.approx(
        4104**2 / (9 * 132 * 128**2)
    )
    assert solutions.wave_efficiency(128, 128, 128, 128, 1) == 1.0


def _macs(m, k, n, itemsize):
    return m * k * n / (itemsize * (m * k + k * n + m * n))


def _no_output(m, k, n, itemsize):
    return 2 * m * k * n / (itemsize * (m * k + k * n))


def _elements(m, k, n, itemsize):
    return 2 * m * k * n / (m * k + k * n + m * n)


def _tiles_only(m, n, tile_m, tile_n, sms):
    return m * n / (math.ceil(m / tile_m) * math.ceil(n / tile_n) * tile_m * tile_n)


def _floor_tiles(m, n, tile_m, tile_n, sms):
    tiles = max(1, (m // tile_m) * (n // tile_n))
    return m * n / (math.ceil(tiles / sms) * sms * tile_m * tile_n)


def _conv_no_weight(batch, c_in, c_out, size, kernel, itemsize):
    flops = 2 * batch * c_out * size * size * c_in * kernel * kernel
    return flops / (itemsize * batch * (c_in + c_out) * size * size)


def _conv_macs(*case):
    return solutions.conv_intensity(*case) / 2


@pytest.mark.parametrize(
    "name, wrong, words",
    [
        ("10.matmul_intensity", _macs, "You counted multiply-adds"),
        ("10.matmul_intensity", _no_output, "The output is written to memory too"),
        ("10.matmul_intensity", _elements, "Divide by bytes, not elements"),
        ("10.matmul_intensity", lambda *case: "high", "should return a number, got 'high'"),
        ("10.wave_efficiency", _tiles_only, "That is the tile quantisation alone"),
        ("10.wave_efficiency", _floor_tiles, "Count tiles with ceil"),
        ("10.conv_intensity", _conv_no_weight, "The weight is read from memory too"),
        ("10.conv_intensity", _conv_macs, "You counted multiply-adds"),
        ("10.conv_intensity", lambda *case: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_wrong_answers_are_rejected_with_the_reason(name, wrong, words):
    with pytest.raises(ExerciseFailed, match=re.escape(words)):
        exercises.check(name, wrong)
