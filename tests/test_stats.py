import math
import statistics

import mpmath  # torch's sympy brings it: an independent, arbitrary-precision oracle
import pytest

from amp_course import stats


def oracle_cdf(t: float, df: int) -> float:
    """Student's t CDF from mpmath's regularised incomplete beta function, at 40 digits."""
    with mpmath.workdps(40):
        tail = mpmath.betainc(df / 2, 0.5, 0, df / (df + mpmath.mpf(t) ** 2), regularized=True)
        return float(1 - tail / 2) if t >= 0 else float(tail / 2)


@pytest.mark.parametrize(
    "probability, df, expected",
    [
        # Published tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2), to their 3 decimals.
        (0.975, 1, 12.706),
        (0.975, 2, 4.303),
        (0.975, 4, 2.776),
        (0.975, 10, 2.228),
        (0.975, 30, 2.042),
        (0.995, 5, 4.032),
        (0.95, 7, 1.895),
        (0.9, 3, 1.638),
    ],
)
def test_t_quantile_matches_published_tables(probability, df, expected):
    assert stats.t_quantile(probability, df) == pytest.approx(expected, abs=5e-4)


@pytest.mark.parametrize("probability", [0.5, 0.6, 0.9, 0.95, 0.975, 0.995, 0.9995])
def test_t_quantile_matches_the_closed_forms(probability):
    # One and two degrees of freedom have closed-form quantiles (Cauchy, and Hill 1970).
    assert stats.t_quantile(probability, 1) == pytest.approx(
        math.tan(math.pi * (probability - 0.5)), rel=1e-12, abs=1e-12
    )
    alpha = 4 * probability * (1 - probability)
    two = (2 * probability - 1) * math.sqrt(2 / alpha)
    assert stats.t_quantile(probability, 2) == pytest.approx(two, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 9, 29, 30, 120])
@pytest.mark.parametrize("probability", [0.6, 0.95, 0.975, 0.995])
def test_t_quantile_inverts_an_independent_cdf(probability, df):
    t = stats.t_quantile(probability, df)
    assert oracle_cdf(t, df) == pytest.approx(probability, abs=1e-13)


@pytest.mark.parametrize("df", [1, 2, 3, 6, 7])
@pytest.mark.parametrize("t", [-7.5, -1.2, 0.0, 0.3, 2.0, 40.0])
def test_t_cdf_matches_the_oracle(t, df):
    assert stats.t_cdf(t, df) == pytest.approx(oracle_cdf(t, df), abs=1e-14)


def test_t_quantile_tends_to_the_normal():
    normal = statistics.NormalDist().inv_cdf(0.975)
    assert stats.t_quantile(0.975, 1000) == pytest.approx(normal, abs=3e-3)
    assert stats.t_quantile(0.975, 1000) > normal  # heavier tails, always
    assert stats.t_quantile(0.5, 3) == 0.0


def test_t_interval():
    values = [0.97, 0.98, 0.975, 0.985]
    mean, half = stats.t_interval(values)
    assert mean == pytest.approx(statistics.mean(values))
    expected = stats.t_quantile(0.975, 3) * statistics.stdev(values) / math.sqrt(4)
    assert half == pytest.approx(expected)
    assert stats.t_interval([1.0, 1.0])[1] == 0.0


def test_two_sample_half_width():
    # Pooled variance (2 x 1 + 2 x 4) / 4 = 2.5 over 1/3 + 1/3, with t at 4 degrees of freedom.
    half = stats.two_sample_half_width([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    assert half == pytest.approx(stats.t_quantile(0.975, 4) * math.sqrt(2.5 * 2 / 3))
    assert half == pytest.approx(3.58438, abs=1e-5)  # 2.776445 x 1.290994, from t tables
    # Narrower than the two one-sample half-widths combined (t at n - 1, not 2n - 2).
    combined = math.hypot(stats.t_interval([1, 2, 3])[1], stats.t_interval([2, 4, 6])[1])
    assert half < combined


def test_paired_difference_cancels_what_the_seed_shares():
    # The seed moves both modes by a lot; the candidate is 0.002 lower at every seed but one.
    reference = [0.950, 0.980, 0.965, 0.990, 0.970]
    candidate = [0.948, 0.978, 0.963, 0.988, 0.969]
    paired = stats.paired_difference(reference, candidate)
    differences = [c - r for r, c in zip(reference, candidate, strict=True)]
    assert paired.differences == pytest.approx(differences)
    mean, half = stats.t_interval(differences)
    assert (paired.mean, paired.half_width) == pytest.approx((mean, half))
    assert paired.high < 0 and not paired.includes_zero
    assert paired.within(0.005) and not paired.within(0.0015)
    # Taken as independent samples, the same runs cannot tell the modes apart.
    (m_ref, h_ref), (m_can, h_can) = stats.t_interval(reference), stats.t_interval(candidate)
    assert m_ref - h_ref < m_can + h_can
    assert stats.paired_difference(reference, reference).includes_zero


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="at least 2"):
        stats.t_interval([0.9])
    with pytest.raises(ValueError, match="probability"):
        stats.t_quantile(1.5, 3)
    with pytest.raises(ValueError, match="whole number"):
        stats.t_quantile(0.975, 2.5)
    with pytest.raises(ValueError, match="at least 2"):
        stats.two_sample_half_width([0.9], [0.9, 0.91])
    with pytest.raises(ValueError, match="one value per seed"):
        stats.paired_difference([0.9, 0.91], [0.9])


def test_fixed_cost_splits_two_timings_along_a_line():
    """time = fixed + per_item x batch: 8.24 ms at a batch and 24.2 ms at 8x it leave 5.96 ms
    fixed; noise that puts the line's ends outside [0, small] is clamped; 1x is refused."""
    assert stats.fixed_cost(8.24e-3, 24.2e-3, 8) == pytest.approx(5.96e-3, abs=1e-5)
    assert stats.fixed_cost(0.010, 0.085, 8) == 0.0  # grew more than 8x: no fixed cost shows
    assert stats.fixed_cost(0.010, 0.009, 8) == 0.009  # shrank: all of the shorter step is fixed
    with pytest.raises(ValueError, match="more than 1x"):
        stats.fixed_cost(0.010, 0.010, 1)
