"""Lesson 00's GPU-count exercise: the reference passes, the usual wrong accountings fail."""

import itertools
import math

import pytest

from amp_course import exercises
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_00 as lesson

NAME = "00.gpus_for"
GIB = 2**30


def test_solution_passes():
    assert exercises.check(NAME, exercises.solution(NAME))


def whole_job_over_one_gpu(num_params, activation, batch, gpu_gib, amp):
    total = (16 + 2 * amp) * num_params + activation * batch
    return math.ceil(total / (0.9 * gpu_gib * GIB))


def weights_only(num_params, activation, batch, gpu_gib, amp):
    room = 0.9 * gpu_gib * GIB - (4 + 2 * amp) * num_params
    return math.ceil(batch / (room // activation)) if room >= activation else None


def no_weight_copies(num_params, activation, batch, gpu_gib, amp):
    room = 0.9 * gpu_gib * GIB - 16 * num_params
    return math.ceil(batch / (room // activation)) if room >= activation else None


def whole_gpu(num_params, activation, batch, gpu_gib, amp):
    room = gpu_gib * GIB - (16 + 2 * amp) * num_params
    return math.ceil(batch / (room // activation)) if room >= activation else None


def zero_instead_of_none(num_params, activation, batch, gpu_gib, amp):
    return lesson.gpus_for(num_params, activation, batch, gpu_gib, amp) or 0


@pytest.mark.parametrize(
    "wrong, message",
    [
        (whole_job_over_one_gpu, "every GPU holds all of them, and only the batch is split"),
        (weights_only, "counted 4 bytes per parameter"),
        (no_weight_copies, "left out the 2-byte weight copies"),
        (whole_gpu, "keep 10% free"),
        (zero_instead_of_none, "return None when not even one image per GPU fits"),
        (lambda *case: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_wrong_answers_fail_with_the_reason(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)


def test_inputs_vary_with_the_seed():
    seed0 = [row["result"] for row in lesson.observe(lesson.gpus_for, 0)["rows"]]

    answers = itertools.cycle(seed0)

    def hard_coded(*case):  # the seed-0 answers, whatever the case
        return next(answers)

    for seed in (1, 2):
        with pytest.raises(ExerciseFailed):
            lesson.compare(
                lesson.observe(hard_coded, seed), lesson.observe(lesson.gpus_for, seed), seed
            )
        lesson.compare(
            lesson.observe(lesson.gpus_for, seed), lesson.observe(lesson.gpus_for, seed), seed
        )


def test_observations_are_plain_data():
    observed = lesson.observe(lambda *case: 8.0, 0)
    assert {row["result"] for row in observed["rows"]} == {8}  # 8.0 counts as 8
    assert lesson.observe(lambda *case: "eight", 0)["rows"][0]["result"] == "'eight'"
