"""Lesson 08's exercises (a one-sided bound by hand, the seeds a comparison needs): answers written
differently from the reference pass, the usual mistakes fail with their reason (that the reference
passes: test_exercises.py)."""

import itertools
import math
import re
import statistics

import numpy
import pytest
import torch

from amp_course import exercises, stats
from amp_course.exercises import ExerciseFailed
from amp_course.exercises.lesson_08 import calls, interval, seeds
from amp_course.exercises.solutions import lesson_08 as solutions

NAME = "08.accuracy_interval"
REFERENCE = solutions.accuracy_lower_bound


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


BELOW = r"yours is {} below the mean, {} x s / sqrt\(n\), the expected bound 0.00333 below"


# Each message gives the bound's distance from the mean, in standard errors too: never the rule.
@pytest.mark.parametrize(
    "wrong, message",
    [
        (with_quantile(t_two_sided), BELOW.format("0.004337", "2.776")),
        (with_quantile(normal_one_sided), BELOW.format("0.002569", "1.645")),
        (with_quantile(lambda c, n: stats.t_quantile(c, n)), BELOW.format("0.003148", "2.015")),
        (with_quantile(t_one_sided, spread=statistics.pstdev), BELOW.format("0.002978", "1.907")),
        (with_quantile(t_one_sided, divisor=lambda n: n), BELOW.format("0.001489", "0.9534")),
        (with_quantile(t_one_sided, divisor=lambda n: 1), BELOW.format("0.007446", "4.767")),
        (with_quantile(t_one_sided, sign=1), r"yours is 0.00333 above the mean, 2.132 x s"),
        (
            lambda v, c: t_one_sided(c, len(v)) * statistics.stdev(v) / math.sqrt(len(v)),
            r"gave 0.00333005, expected 0.96987: the values' mean is 0.9732 and their sample "
            r"standard deviation s 0.003493, with n = 5; yours is 0.9699 below the mean",
        ),
        (lambda v, c: min(v), r"gave 0.969, expected 0.96987: .* yours is 0.0042 below the mean"),
        (
            lambda v, c: stats.t_interval(v, c),
            r"returned \(0.9732, 0.00433\d+\) \(a tuple\); the reference returns one number\.$",
        ),
        (lambda v, c: v[7], r"0.95\) raised IndexError: list index out of range\.$"),
        (lambda v, c: None, r"0.95\) returned None; the reference returns one number\.$"),
    ],
)
def test_wrong_answers_fail_saying_what_differs(wrong, message):
    with pytest.raises(ExerciseFailed, match=message) as failure:
        exercises.check(NAME, wrong)
    assert not re.search(r"instead|should|take|use |divide", str(failure.value)), failure.value


def _mistakes(values, confidence):
    """The bounds the usual mistakes give: two-sided t, normal quantile, n degrees of freedom,
    population spread, divided by n, not by sqrt(n), an upper bound, the distance alone."""
    n, mean, s = len(values), statistics.mean(values), statistics.stdev(values)
    t = stats.t_quantile(confidence, n - 1)
    return [
        mean - stats.t_quantile(0.5 + confidence / 2, n - 1) * s / math.sqrt(n),
        mean - statistics.NormalDist().inv_cdf(confidence) * s / math.sqrt(n),
        mean - stats.t_quantile(confidence, n) * s / math.sqrt(n),
        mean - t * statistics.pstdev(values) / math.sqrt(n),
        mean - t * s / n,
        mean - t * s,
        mean + t * s / math.sqrt(n),
        t * s / math.sqrt(n),
    ]


def test_a_bound_computed_in_float32_passes():
    """torch.tensor's default dtype: right, a few float32 steps from the float64 reference."""

    def in_float32(values, confidence=0.95):
        a = torch.tensor(values)
        t = stats.t_quantile(confidence, a.numel() - 1)
        return (a.mean() - t * a.std() / math.sqrt(a.numel())).item()

    def numpy_float32(values, confidence=0.95):  # a numpy scalar, not a Python float
        a = numpy.asarray(values, dtype=numpy.float32)
        t = numpy.float32(stats.t_quantile(confidence, len(a) - 1))
        return a.mean() - t * a.std(ddof=1) / numpy.float32(math.sqrt(len(a)))

    def tensor_result(values, confidence=0.95):  # a 0-dim tensor, .item() left out
        a = torch.tensor(values, dtype=torch.float64)
        return a.mean() - stats.t_quantile(confidence, a.numel() - 1) * a.std() / a.numel() ** 0.5

    for right in (in_float32, numpy_float32, tensor_result):
        for seed in (0, 3, 4, 5, 6, 12345):
            assert exercises.verdict(NAME, right, seed) == ("passed", ""), (right, seed)


def test_the_mistakes_are_told_apart_at_every_seed():
    """Every mistake gives a bound at least 1e-5 from the right one (zero spread aside)."""
    for seed in (0, 12345, 987654321):
        for values, confidence in interval._cases(seed):
            if statistics.stdev(values) == 0:
                continue
            right = solutions.accuracy_lower_bound(values, confidence)
            for index, value in enumerate(_mistakes(values, confidence)):
                assert abs(value - right) > 1e-5, (seed, values, index)
                assert abs(value - right) > interval.ABS_TOL


def test_inputs_vary_with_the_seed():
    answers = itertools.cycle(
        [row["result"] for row in interval.observe_interval(REFERENCE, 0)["rows"]]
    )

    def hard_coded(values, confidence=0.95):
        return next(answers)

    assert exercises.check(NAME, hard_coded)
    with pytest.raises(ExerciseFailed):
        interval.compare_interval(
            interval.observe_interval(hard_coded, 1), interval.observe_interval(REFERENCE, 1), 1
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


HALF = (
    r"returned {}, expected 4: .* half-width is {} at n = {} \({} the margin\) and 0.0006899 at "
    r"n = 4 \(within the margin\), for a margin of 0.001\.$"
)


# Each message gives the interval's half-width at the count returned and at the expected one.
@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            planner(lambda r, c: math.hypot(statistics.stdev(r), statistics.stdev(c)), right_t),
            r"returned 142, expected 4: .* 7.193e-05 at n = 142 \(within the margin\)",
        ),
        (planner(paired_spread, normal), HALF.format(2, "0.003896", 2, "wider than")),
        (
            planner(paired_spread, lambda c, n: stats.t_quantile(0.5 + c / 2, n)),
            HALF.format(3, "0.001077", 3, "wider than"),
        ),
        (
            planner(paired_spread, lambda c, n: stats.t_quantile(c, n - 1)),
            HALF.format(3, "0.001077", 3, "wider than"),
        ),
        (
            planner(
                lambda r, c: statistics.pstdev(b - a for a, b in zip(r, c, strict=True)), right_t
            ),
            HALF.format(3, "0.001077", 3, "wider than"),
        ),
        (
            planner(paired_spread, right_t, divisor=float),
            HALF.format(3, "0.001077", 3, "wider than"),
        ),
        (planner(paired_spread, right_t, shift=-1), HALF.format(3, "0.001077", 3, "wider than")),
        (
            planner(paired_spread, right_t, shift=1),
            HALF.format(5, "0.0005384", 5, "within")[:-3] + r": n = 4 already fits\.$",
        ),
        (lambda r, c, m, conf=0.95: 4.0, r"returned 4.0 \(a float\); the reference returns an int"),
        (lambda r, c, m, conf=0.95: 1, r"none at n = 1 \(n - 1 = 0 degrees of freedom\)"),
        (lambda r, c, m, conf=0.95: r[5], "raised IndexError"),
    ],
)
def test_seeds_mistakes_fail_saying_what_differs(wrong, message):
    with pytest.raises(ExerciseFailed, match=message) as failure:
        exercises.check(SEEDS, wrong)
    assert not re.search(r"instead|should|take|use |divide", str(failure.value)), failure.value


def test_seeds_inputs_vary_with_the_seed_and_stay_unambiguous():
    answers = [row["result"] for row in seeds.observe_seeds(solutions.seeds_needed, 0)["rows"]]
    remembered = iter(answers)

    def hard_coded(reference, candidate, margin, confidence=0.95):
        return next(remembered)

    assert exercises.check(SEEDS, hard_coded)
    for seed in (1, 7):
        cases = seeds._seeds_cases(seed)
        assert cases != seeds.SEEDS_CASES
        assert all(seeds._unambiguous(*case) for case in cases)


def _seeds_rule(spread_of=statistics.stdev, degrees=lambda n: n - 1, cast=int):
    """seeds_needed by a linear search, with the spread and the degrees of freedom given."""

    def seeds_needed(reference, candidate, margin, confidence=0.95):
        spread = spread_of([c - r for r, c in zip(reference, candidate, strict=True)])
        n = 2
        while stats.t_quantile(0.5 + confidence / 2, degrees(n)) * spread / math.sqrt(n) > margin:
            n += 1
        return cast(n)

    return seeds_needed


def test_seeds_needed_right_as_a_numpy_integer_passes():
    for seed in (0, 1, 2, 3, 12345):
        assert exercises.verdict(SEEDS, _seeds_rule(cast=numpy.int64), seed) == ("passed", "")


@pytest.mark.parametrize(
    "wrong",
    [_seeds_rule(spread_of=statistics.pstdev), _seeds_rule(degrees=lambda n: n)],
    ids=["population standard deviation", "n degrees of freedom"],
)
def test_seeds_needed_slips_fail_at_every_seed(wrong):
    for seed in range(40):
        assert exercises.verdict(SEEDS, wrong, seed)[0] == "failed", seed


# Each passed some grader seeds (62 and 33 of 1000) where no case told it from the right rule:
# every seed now draws a case for each of the usual slips.
@pytest.mark.parametrize(
    "wrong",
    [
        planner(paired_spread, right_t, divisor=lambda n: math.sqrt(n - 1)),
        lambda r, c, m, conf=0.95: planner(paired_spread, right_t, first=len(r))(r, c, m, conf),
        planner(lambda r, c: statistics.pstdev(b - a for a, b in zip(r, c, strict=True)), right_t),
        planner(paired_spread, lambda c, n: stats.t_quantile(0.5 + c / 2, n)),
    ],
    ids=["sqrt(n - 1)", "from the pilot's size", "population spread", "n degrees"],
)
def test_seeds_slips_fail_at_every_seed(wrong):
    for seed in range(41):
        assert exercises.verdict(SEEDS, wrong, seed)[0] == "failed", seed


def _flat_pilot_gives(count):
    """The right rule, except that a pilot with no spread (every difference the same) gives
    ``count(reference)`` seeds."""

    def seeds_needed(reference, candidate, margin, confidence=0.95):
        if paired_spread(reference, candidate) < 1e-9:
            return count(reference)
        return planner(paired_spread, right_t)(reference, candidate, margin, confidence)

    return seeds_needed


# Each passed every grader seed of 60: only the notebook's cases held a pilot with no spread.
@pytest.mark.parametrize(
    "wrong",
    [_flat_pilot_gives(lambda reference: 1), _flat_pilot_gives(len)],
    ids=["one seed", "the pilot's size"],
)
def test_a_pilot_with_no_spread_is_told_at_every_seed(wrong):
    for seed in range(41):
        assert exercises.verdict(SEEDS, wrong, seed)[0] == "failed", seed


def test_an_answer_that_does_not_return_is_stopped_and_said_so(monkeypatch):
    """A search that steps n by one towards a margin a hundred times too small calls t_quantile
    for every n, each costing time in proportion to n: it ran for over 15 minutes. The check
    stops a call after CALL_LIMIT_S and does not run the cases after it."""
    monkeypatch.setattr(calls, "CALL_LIMIT_S", 0.5)
    monkeypatch.setattr(calls, "STOPPED", "was stopped after 0.5 s; the reference returns ...")
    made = []

    def margin_in_percent(reference, candidate, margin, confidence=0.95):
        made.append(margin)
        return planner(paired_spread, right_t)(reference, candidate, margin / 100, confidence)

    status, message = exercises.verdict(SEEDS, margin_in_percent, 0)
    assert status == "failed" and len(made) == 1
    assert message.endswith("0.001, 0.95) was stopped after 0.5 s; the reference returns ...")

    def never_returns(values, confidence=0.95):
        made.append(values)
        while True:
            try:
                values = [v for v in values]
            except Exception:  # an answer's own except Exception does not swallow the stop
                pass

    assert exercises.verdict(NAME, never_returns, 0)[0] == "failed"
    assert len(made) == 2


def test_a_count_far_past_the_search_limit_is_explained_quickly():
    """t_quantile's time grows with its degrees of freedom: a count of a billion seeds is told
    as a bound on its half-width, not computed."""
    status, message = exercises.verdict(SEEDS, lambda r, c, m, conf=0.95: 10**9, 0)
    assert status == "failed"
    assert re.search(
        r"half-width is below 8.499e-06 at n = 1000000000 \(within the margin\) and 0.0006899 "
        r"at n = 4 \(within the margin\), for a margin of 0.001: n = 4 already fits\.$",
        message,
    ), message


# The normal quantile from 30 seeds on, a textbook rule of thumb: both passed every seed a test
# learner tried while no case had nine seeds or more, or needed more than 24.
def _normal_from_30(probability, df):
    if df + 1 >= 30:
        return statistics.NormalDist().inv_cdf(probability)
    return stats.t_quantile(probability, df)


@pytest.mark.parametrize(
    "name, wrong",
    [
        (NAME, with_quantile(lambda c, n: _normal_from_30(c, n - 1))),
        (SEEDS, planner(paired_spread, lambda c, n: _normal_from_30(0.5 + c / 2, n - 1))),
    ],
    ids=["one-sided bound", "seeds needed"],
)
def test_a_normal_quantile_for_large_samples_fails_at_every_seed(name, wrong):
    for seed in range(41):
        status, message = exercises.verdict(name, wrong, seed)
        assert status == "failed" and (" gave " in message or " returned " in message), message
        assert "raised" not in message, message


def test_a_default_other_than_the_texts_fails():
    """Every call named its confidence, so `confidence=0.9` as the default passed; the check calls
    the answer once without one too, as the text's signature allows."""
    reference = solutions.accuracy_lower_bound

    def default_09(accuracies, confidence=0.9):
        return reference(accuracies, confidence)

    for seed in (0, 12345):
        status, message = exercises.verdict(NAME, default_09, seed)
        assert status == "failed" and "left at the default, 0.95, gave" in message, message


@pytest.mark.parametrize("default", [0.9, 0.99, None], ids=["0.9", "0.99", "required"])
def test_a_seeds_needed_default_other_than_the_texts_fails_at_every_seed(default):
    """Every call named its confidence, so a default of 0.9 or 0.99, or none, passed every seed;
    the check calls the answer once without one, on a case whose count that default decides."""
    rule = planner(paired_spread, right_t)

    def with_default(reference, candidate, margin, confidence=default):
        return rule(reference, candidate, margin, confidence)

    def required(reference, candidate, margin, confidence):
        return rule(reference, candidate, margin, confidence)

    answer = required if default is None else with_default
    for seed in range(41):
        status, message = exercises.verdict(SEEDS, answer, seed)
        assert status == "failed" and "left at the default, 0.95," in message, (seed, message)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_bound_that_is_not_a_number_is_said_so(value):
    """'yours is nan below the mean, nan x s / sqrt(n)' read as arithmetic on a number."""
    status, message = exercises.verdict(NAME, lambda values, confidence=0.95: value, 0)
    assert status == "failed" and f"returned {value}; the reference returns a finite" in message
    assert "sqrt(n)" not in message, message
