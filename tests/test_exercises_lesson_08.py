"""Lesson 08's exercises (the interval by hand, the seeds a comparison needs): answers written
differently from the reference pass, the usual mistakes fail with their reason (that the reference
passes: test_exercises.py)."""

import itertools
import math
import statistics

import pytest

from amp_course import exercises, stats
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_08 as lesson
from amp_course.exercises.solutions import lesson_08 as solutions

NAME = "08.accuracy_interval"


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
        [row["result"] for row in lesson.observe(solutions.accuracy_interval, 0)["rows"]]
    )

    def hard_coded(values, confidence):
        return next(answers)

    assert exercises.check(NAME, hard_coded)
    with pytest.raises(ExerciseFailed):
        lesson.compare(
            lesson.observe(hard_coded, 1), lesson.observe(solutions.accuracy_interval, 1), 1
        )


# ---- 08.seeds_needed ----------------------------------------------------------------------------
SEEDS = "08.seeds_needed"


def planner(spread, quantile, divisor=math.sqrt, first=2, shift=0):
    """A seeds_needed written with one of the usual mistakes swapped in."""

    def seeds_needed(reference, candidate, margin, confidence=0.95):
        s = spread(reference, candidate)
        n = first
        while quantile(confidence, n) * s / divisor(n) > margin:
            n += 1
        return n + shift

    return seeds_needed


def paired_spread(reference, candidate):
    return statistics.stdev(c - r for r, c in zip(reference, candidate, strict=True))


def right_t(confidence, n):
    return stats.t_quantile(0.5 + confidence / 2, n - 1)


def test_a_hand_written_seeds_answer_passes():
    assert exercises.check(SEEDS, planner(paired_spread, right_t))


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            planner(lambda r, c: math.hypot(statistics.stdev(r), statistics.stdev(c)), right_t),
            "spread of the accuracies, as if the two modes' runs were independent",
        ),
        (planner(paired_spread, normal), "normal quantile"),
        (
            planner(paired_spread, lambda c, n: stats.t_quantile(0.5 + c / 2, n)),
            "n degrees of freedom",
        ),
        (
            planner(paired_spread, lambda c, n: stats.t_quantile(c, n - 1)),
            "two-sided interval leaves",
        ),
        (
            planner(
                lambda r, c: statistics.pstdev(b - a for a, b in zip(r, c, strict=True)), right_t
            ),
            "population standard deviation",
        ),
        (planner(paired_spread, right_t, divisor=float), "divided by n"),
        (planner(paired_spread, right_t, shift=-1), "still too wide"),
        (planner(paired_spread, right_t, shift=1), "one seed more"),
        (lambda r, c, m, conf=0.95: 4.0, "returned a float"),
        (lambda r, c, m, conf=0.95: 1, "needs at least 2 seeds"),
        (lambda r, c, m, conf=0.95: 4, "expected 10: the fewest n >= 2"),
        (lambda r, c, m, conf=0.95: r[5], "raised IndexError"),
    ],
)
def test_seeds_mistakes_fail_with_the_reason(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(SEEDS, wrong)


def test_seeds_inputs_vary_with_the_seed_and_stay_unambiguous():
    answers = [row["result"] for row in lesson.observe_seeds(solutions.seeds_needed, 0)["rows"]]
    remembered = iter(answers)

    def hard_coded(reference, candidate, margin, confidence=0.95):
        return next(remembered)

    assert exercises.check(SEEDS, hard_coded)
    for seed in (1, 7):
        cases = lesson._seeds_cases(seed)
        assert cases != lesson.SEEDS_CASES
        assert all(lesson._unambiguous(*case) for case in cases)
