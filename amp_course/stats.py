"""Statistics for comparing runs over seeds: Student-t confidence intervals."""

from __future__ import annotations

import functools
import math

import torch


@functools.lru_cache(maxsize=256)  # a pure function, and each call integrates a fine grid
def t_quantile(probability: float, df: int) -> float:
    """The ``probability`` quantile of Student's t with ``df`` degrees of freedom.

    Hand-written because neither torch nor the course's dependencies provide it (scipy is not one):
    the density is integrated numerically on a fine grid and the CDF inverted by interpolation.
    """
    if not 0.5 <= probability < 1:
        raise ValueError(f"probability must be in [0.5, 1), got {probability}.")
    if df < 1:
        raise ValueError(f"t needs at least 1 degree of freedom, got {df} (use >= 2 values).")
    # Integrate on u in (-pi/2, pi/2) with x = tan(u): the heavy tails become a finite interval.
    u = torch.linspace(0, math.pi / 2, 200_001, dtype=torch.float64)[:-1]
    x = torch.tan(u)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    density = torch.exp(log_norm - (df + 1) / 2 * torch.log1p(x**2 / df)) / torch.cos(u) ** 2
    steps = (density[1:] + density[:-1]) / 2 * (u[1] - u[0])
    cdf = 0.5 + torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(steps, 0)])
    index = int(torch.searchsorted(cdf, torch.tensor(probability, dtype=torch.float64)))
    lo, hi = cdf[index - 1], cdf[index]
    weight = float((probability - lo) / (hi - lo))
    return float(x[index - 1] + weight * (x[index] - x[index - 1]))


def t_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the two-sided Student-t confidence interval of ``values``."""
    values = [float(v) for v in values]
    if len(values) < 2:
        raise ValueError(f"A confidence interval needs at least 2 values, got {len(values)}.")
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, t_quantile(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)
