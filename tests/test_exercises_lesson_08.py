"""Lesson 08's exercises (a one-sided bound by hand, the seeds a comparison needs): answers written
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


def test_hand_written_bounds_pass():
    def bound(values, confidence=0.95):
        n = len(values)
        t = stats.t_quantile(confidence, n - 1)
        return statistics.mean(values) - t * statistics.stdev(values) / math.sqrt(n)

    def from_sums(values, confidence=0.95):  # another style: sums by hand, numbers as floats
        n = len(values)
        mean = sum(values) / n
        variance = sum((v - mean) ** 2 for v in values) / (n - 1)
        return mean - stats.t_quantile(confidence, n - 1) * math.sqrt(variance / n)

    for right in (bound, from_sums):
        for seed in (0, 12345):
            assert exercises.verdict(NAME, right, seed) == ("passed", ""), (right, seed)


def with_quantile(quantile, spread=statistics.stdev, divisor=math.sqrt, sign=-1):
    def lower_bound(values, confidence=0.95):
        n = len(values)
        half = quantile(confidence, n) * spread(values) / divisor(n)
        return statistics.mean(values) + sign * half

    return lower_bound


def normal_one_sided(confidence, n):
    return statistics.NormalDist().inv_cdf(confidence)


def normal(confidence, n):  # two-sided, for seeds_needed
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


def t_one_sided(confidence, n):
    return stats.t_quantile(confidence, n - 1)


def t_two_sided(confidence, n):  # the lesson's interval: the transcription
    return stats.t_quantile(0.5 + confidence / 2, n - 1)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            with_quantile(t_two_sided),
            r"lower end of the two-sided 95% interval.*leaves all 0.05 below it, so its t is "
            r"taken at 0.95, not at 0.975",
        ),
        (with_quantile(normal_one_sided), r"normal quantile \(1.64\) instead of Student's t"),
        (with_quantile(lambda c, n: stats.t_quantile(c, n)), "uses n = 5 degrees of freedom"),
        (with_quantile(t_one_sided, spread=statistics.pstdev), "population standard deviation"),
        (with_quantile(t_one_sided, divisor=lambda n: n), "divides by n"),
        (with_quantile(t_one_sided, divisor=lambda n: 1), r"does not divide by sqrt\(n\)"),
        (with_quantile(t_one_sided, sign=1), "above the mean: that is an upper bound"),
        (
            lambda v, c: t_one_sided(c, len(v)) * statistics.stdev(v) / math.sqrt(len(v)),
            "distance below the mean, not the bound itself",
        ),
        (lambda v, c: min(v), r"gave 0.969, expected 0.96987: yours is 0.0042 below the mean"),
        (lambda v, c: stats.t_interval(v, c), "not one number"),
        (lambda v, c: v[7], "raised IndexError"),
    ],
)
def test_wrong_answers_fail_with_the_reason(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)


def test_the_mistakes_are_told_apart_at_every_seed():
    """Every mistake gives a bound at least 1e-5 from the right one (zero spread aside)."""
    for seed in (0, 12345, 987654321):
        for values, confidence in lesson._cases(seed):
            if statistics.stdev(values) == 0:
                continue
            right = solutions.accuracy_lower_bound(values, confidence)
            for mistake, value in lesson._mistakes(values, confidence).items():
                assert abs(value - right) > 1e-5, (seed, values, mistake)


def test_inputs_vary_with_the_seed():
    answers = itertools.cycle(
        [row["result"] for row in lesson.observe(solutions.accuracy_lower_bound, 0)["rows"]]
    )

    def hard_coded(values, confidence):
        return next(answers)

    assert exercises.check(NAME, hard_coded)
    with pytest.raises(ExerciseFailed):
        lesson.compare(
            lesson.observe(hard_coded, 1), lesson.observe(solutions.accuracy_lower_bound, 1), 1
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
