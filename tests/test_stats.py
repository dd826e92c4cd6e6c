import math
import statistics

import pytest

from amp_course import stats


@pytest.mark.parametrize(
    "df, expected", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423)]
)
def test_t_quantile_matches_published_tables(df, expected):
    assert stats.t_quantile(0.975, df) == pytest.approx(expected, abs=2e-3)


def test_t_quantile_tends_to_the_normal():
    assert stats.t_quantile(0.975, 1000) == pytest.approx(1.96, abs=3e-3)
    assert stats.t_quantile(0.5, 3) == pytest.approx(0.0, abs=1e-4)


def test_t_interval():
    values = [0.97, 0.98, 0.975, 0.985]
    mean, half = stats.t_interval(values)
    assert mean == pytest.approx(statistics.mean(values))
    expected = stats.t_quantile(0.975, 3) * statistics.stdev(values) / math.sqrt(4)
    assert half == pytest.approx(expected)
    assert stats.t_interval([1.0, 1.0])[1] == 0.0


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="at least 2"):
        stats.t_interval([0.9])
    with pytest.raises(ValueError, match="probability"):
        stats.t_quantile(1.5, 3)
