"""Lesson 08's confidence-interval exercise: the reference passes, the usual mistakes fail."""

import itertools
import math
import statistics

import pytest

from amp_course import exercises, stats
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_08 as lesson

NAME = "08.accuracy_interval"


def test_solution_passes():
    assert exercises.check(NAME, exercises.solution(NAME))


def test_a_hand_written_interval_passes():
    def interval(values, confidence=0.95):
        n = len(values)
        t = stats.t_quantile(0.5 + confidence / 2, n - 1)
        return statistics.mean(values), t * statistics.stdev(values) / math.sqrt(n)

    assert exercises.check(NAME, interval)


def with_quantile(quantile, spread=statistics.stdev, divisor=math.sqrt):
    def interval(values, confidence=0.95):
        n = len(values)
        return statistics.mean(values), quantile(confidence, n) * spread(values) / divisor(n)

    return interval


def normal(confidence, n):
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


def t_two_sided(confidence, n):
    return stats.t_quantile(0.5 + confidence / 2, n - 1)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (with_quantile(normal), "used the normal quantile \\(1.96\\) instead of Student's t"),
        (
            with_quantile(lambda c, n: stats.t_quantile(0.5 + c / 2, n)),
            "used n = 5 degrees of freedom",
        ),
        (with_quantile(t_two_sided, spread=statistics.pstdev), "population standard deviation"),
        (
            with_quantile(lambda c, n: stats.t_quantile(c, n - 1)),
            "a two-sided 95% interval leaves 0.025 in each tail",
        ),
        (with_quantile(t_two_sided, divisor=lambda n: n), "divided by n"),
        (with_quantile(t_two_sided, divisor=lambda n: 1), "did not divide by sqrt\\(n\\)"),
        (lambda values, confidence: (values[0], 0.01), "the mean of the values is 0.9732"),
        (lambda values, confidence: 0.01, "not a pair of numbers"),
    ],
)
def test_wrong_answers_fail_with_the_reason(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)


def test_inputs_vary_with_the_seed():
    answers = itertools.cycle(
        [row["result"] for row in lesson.observe(lesson.accuracy_interval, 0)["rows"]]
    )

    def hard_coded(values, confidence):
        return next(answers)

    lesson.check_accuracy_interval(hard_coded)
    with pytest.raises(ExerciseFailed):
        lesson.compare(
            lesson.observe(hard_coded, 1), lesson.observe(lesson.accuracy_interval, 1), 1
        )
