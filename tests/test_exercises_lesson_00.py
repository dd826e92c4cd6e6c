"""Lesson 00's GPU-count exercise: the reference passes, the usual wrong accountings fail."""

import itertools
import math

import pytest

from amp_course import exercises
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_00 as lesson
from amp_course.exercises.solutions import lesson_00 as solutions

NAME = "00.gpus_for"
GIB = 2**30


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
    return solutions.gpus_for(num_params, activation, batch, gpu_gib, amp) or 0


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
    seed0 = [row["result"] for row in lesson.observe(solutions.gpus_for, 0)["rows"]]

    answers = itertools.cycle(seed0)

    def hard_coded(*case):  # the seed-0 answers, whatever the case
        return next(answers)

    for seed in (1, 2):
        with pytest.raises(ExerciseFailed):
            lesson.compare(
                lesson.observe(hard_coded, seed), lesson.observe(solutions.gpus_for, seed), seed
            )
        lesson.compare(
            lesson.observe(solutions.gpus_for, seed), lesson.observe(solutions.gpus_for, seed), seed
        )


def test_observations_are_plain_data():
    observed = lesson.observe(lambda *case: 8.0, 0)
    assert {row["result"] for row in observed["rows"]} == {8}  # 8.0 counts as 8
    assert lesson.observe(lambda *case: "eight", 0)["rows"][0]["result"] == "'eight'"


# 00.largest_batch: the batch one GPU holds, for optimizers the lesson did not count.
BATCH = "00.largest_batch"
STATE = {"adamw": 8, "sgd_momentum": 4, "sgd": 0}


def batch_with(bytes_per_param, usable=0.9, gib_bytes=GIB, rounding=math.floor, clamp=True):
    """A largest_batch answer that counts ``bytes_per_param(optimizer, amp)`` per parameter."""

    def answer(num_params, activation, gpu_gib, optimizer, amp):
        room = usable * gpu_gib * gib_bytes - bytes_per_param(optimizer, amp) * num_params
        count = int(rounding(room / activation))
        return max(0, count) if clamp else count

    return answer


def right(optimizer, amp):
    return 8 + STATE[optimizer] + 2 * amp


def test_largest_batch_accepts_a_correct_answer_written_differently():
    assert exercises.check(BATCH, batch_with(right))


@pytest.mark.parametrize(
    "wrong, message",
    [
        (batch_with(lambda opt, amp: 16 + 2 * amp), "AdamW's 8 bytes of state whatever"),
        (batch_with(lambda opt, amp: 4 + STATE[opt] + 2 * amp), "left out the gradients"),
        (batch_with(lambda opt, amp: 8 + STATE[opt]), "left out the 2-byte weight copies"),
        (
            batch_with(lambda opt, amp: (8 + STATE[opt]) / (2 if amp else 1)),
            "halved the fp32 state under AMP",
        ),
        (batch_with(right, usable=1.0), "keep 10% free"),
        (batch_with(right, gib_bytes=1e9), "a GiB as 10\\*\\*9 bytes"),
        (batch_with(right, rounding=math.ceil), "rounded up"),
        (batch_with(right, clamp=False), "return 0 when not even one image fits"),
        (lambda *case: 2.5, "a whole number of images"),
        (lambda *case: {}["adamw"], "raised KeyError"),
    ],
)
def test_largest_batch_wrong_answers_fail_with_the_reason(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(BATCH, wrong)


def test_largest_batch_inputs_vary_with_the_seed():
    reference = solutions.largest_batch
    seed0 = [row["result"] for row in lesson.observe_batch(reference, 0)["rows"]]
    answers = itertools.cycle(seed0)
    for seed in (1, 2):
        observed = lesson.observe_batch(lambda *case: next(answers), seed)
        with pytest.raises(ExerciseFailed):
            lesson.compare_batch(observed, lesson.observe_batch(reference, seed), seed)
        cases = lesson.observe_batch(reference, seed)["rows"]
        assert {row["case"][3] for row in cases} == set(STATE)  # every optimizer, every seed
        assert 0 in {row["result"] for row in cases}  # and a job that does not fit
