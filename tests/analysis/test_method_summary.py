"""Method-level summaries (`kdgrid.analysis.method_summary`) against numbers computed here by hand: the mean over
strata, the interquartile mean, the probability of improvement, the stratified bootstrap, and Almost Stochastic
Order against the exact violation ratio of two normal distributions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from kdgrid.analysis import method_summary as ms

X = {"mrpc": np.array([0.80, 0.82, 0.84]), "rte": np.array([0.60, 0.70])}
Y = {"mrpc": np.array([0.81, 0.79]), "rte": np.array([0.60, 0.55, 0.50])}


def test_aggregates_by_hand() -> None:
    assert ms.aggregate_mean(X) == pytest.approx(((0.80 + 0.82 + 0.84) / 3 + (0.60 + 0.70) / 2) / 2)
    # IQM of the 5 pooled runs [0.60, 0.70, 0.80, 0.82, 0.84]: 25% cut from each end = 1.25 runs; scipy cuts
    # int(0.25 * 5) = 1 run each side: the mean of 0.70, 0.80, 0.82
    assert ms.aggregate_iqm(X) == pytest.approx((0.70 + 0.80 + 0.82) / 3)


def test_probability_of_improvement_by_hand() -> None:
    # mrpc: 0.80 beats 0.79 only (1), 0.82 and 0.84 beat both (2 + 2): 5 of 6 pairs
    # rte: 0.60 ties 0.60 and beats 0.55 and 0.50 (2 + 0.5), 0.70 beats all three (3): 5.5 of 6
    expected = (5 / 6 + 5.5 / 6) / 2
    assert ms.probability_of_improvement(X, Y) == pytest.approx(expected)
    assert ms.probability_of_improvement(Y, X) == pytest.approx(1 - expected)  # ties split evenly
    with pytest.raises(ValueError, match="share no stratum"):
        ms.probability_of_improvement(X, {"qqp": np.array([0.5])})


def test_summaries_carry_stratified_bootstrap_intervals() -> None:
    [x, y] = ms.summarise_methods({"x": X, "y": Y}, "y", resamples=500, aso=False)
    assert y.improvement is None and y.method == "y" and (x.runs, x.strata) == (5, 2)
    assert x.mean.value == pytest.approx(ms.aggregate_mean(X))
    assert x.mean.low <= x.mean.value <= x.mean.high and x.iqm.low <= x.iqm.value <= x.iqm.high
    assert x.improvement is not None and x.improvement.low <= x.improvement.value <= x.improvement.high
    # a stratum's resamples never mix strata: the mean's interval stays inside the strata means' extremes
    assert x.mean.low >= 0.5 * (0.80 + 0.60) and x.mean.high <= 0.5 * (0.84 + 0.70)
    again = ms.summarise_methods({"x": X, "y": Y}, "y", resamples=500, aso=False)
    assert again[0] == x  # seeded: the same numbers every time
    with pytest.raises(ValueError, match="not one of"):
        ms.summarise_methods({"x": X}, "y")


def exact_violation_ratio(a: norm, b: norm) -> float:
    """Dror et al.'s violation ratio of A over B from their quantile functions: the share of the squared quantile
    gap where A's quantile is below B's."""
    gap = lambda t: (a.ppf(t) - b.ppf(t)) ** 2  # noqa: E731
    below = lambda t: gap(t) if a.ppf(t) < b.ppf(t) else 0.0  # noqa: E731
    return quad(below, 1e-6, 1 - 1e-6, limit=200)[0] / quad(gap, 1e-6, 1 - 1e-6, limit=200)[0]


@pytest.mark.slow  # deepsig's bootstrap: several seconds a call on 2 cores
def test_almost_stochastic_order_bounds_the_exact_violation_ratio() -> None:
    # N(0.5, 1) over N(0, 1): A's quantiles are above B's everywhere, so the exact violation ratio is 0 (and 1 the
    # other way); ε_min, an upper bound at 95% confidence, says A is better (< 0.5) and B is not
    a, b = norm(0.5, 1.0), norm(0.0, 1.0)
    assert exact_violation_ratio(a, b) == pytest.approx(0.0) and exact_violation_ratio(b, a) == pytest.approx(1.0)
    runs_a, runs_b = {"t": a.rvs(50, random_state=2)}, {"t": b.rvs(50, random_state=3)}
    assert ms.almost_stochastic_order(runs_a, runs_b) <= 0.2
    assert ms.almost_stochastic_order(runs_b, runs_a) >= 0.9
    # N(0.3, 1.5) over N(0.25, 1): the quantiles cross, an exact ratio between 0 and 1; ε_min never falls below it
    a, b = norm(0.3, 1.5), norm(0.25, 1.0)
    exact = exact_violation_ratio(a, b)
    assert 0.3 < exact < 0.7
    bound = ms.almost_stochastic_order({"t": a.rvs(50, random_state=2)}, {"t": b.rvs(50, random_state=3)})
    assert exact - 0.05 <= bound < 1.0
