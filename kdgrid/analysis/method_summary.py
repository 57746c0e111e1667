"""Method-level summaries of a sweep: how each value of one axis (a knowledge type, a strategy, a method) does
across every task and dev set, with intervals, beyond any single cell.

Conventions (Agarwal et al., "Deep Reinforcement Learning at the Edge of the Statistical Precipice", NeurIPS
2021, for the aggregates and the probability of improvement; Dror et al., "Deep Dominance - How to Properly
Compare Deep Neural Models", ACL 2019, for Almost Stochastic Order):

- A **run** is one number of one trial on one dev set (the metric its task reports, a fraction or correlation).
  The runs of a method on a dev set are its **stratum**: its seeds, and its trials along the sweep's other axes.
- **Mean**: the mean over strata of each stratum's mean run. **IQM** (interquartile mean): the mean of the middle
  50% of all the method's runs pooled over strata (`scipy.stats.trim_mean` at 25%), robust to a few collapsed
  runs.
- **Intervals**: 95% percentile intervals of the **stratified bootstrap**: each stratum's runs resampled with
  replacement, independently, as many as it has (`RESAMPLES` times, `SEED`).
- **Probability of improvement** of X over Y: the mean over the strata both ran of P(X > Y) + 0.5 P(X = Y), each
  over all pairs of their runs (the Mann-Whitney U statistic over the product of the sizes); the interval from
  the same stratified bootstrap of both sides. 0.5: no tendency; above 0.5, X's runs tend to beat Y's.
- **ASO** (Almost Stochastic Order, `deepsig.aso`): ε_min, an upper bound (at 95% confidence) on how far X's
  score distribution violates being stochastically larger than Y's, over the runs pooled across strata. ε_min <
  0.5: X is better than Y (the smaller, the clearer); ε_min near 1: it is not. It wants several runs a side.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import trim_mean

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0
IQM_TRIM = 0.25  # cut from each end: the interquartile mean
ASO_BOOTSTRAP = 1000  # deepsig's default: fewer gives unstable bounds at a handful of seeds

# stratum (e.g. "mrpc · validation") -> the method's runs there, ``[runs]``
Strata = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Estimate:
    """A statistic with its 95% stratified-bootstrap interval."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class MethodSummary:
    """One value of the summarised axis: its mean and IQM over strata, and against the reference (None for the
    reference itself) its probability of improvement and ASO's ε_min; ``runs`` counted over all strata."""

    method: str
    runs: int
    strata: int
    mean: Estimate
    iqm: Estimate
    improvement: Estimate | None = None
    aso_epsilon: float | None = None


def aggregate_mean(strata: Strata) -> float:
    """The mean over strata of each stratum's mean run."""
    return float(np.mean([np.mean(runs) for runs in strata.values()]))


def aggregate_iqm(strata: Strata) -> float:
    """The interquartile mean of every run pooled over strata."""
    return float(trim_mean(np.concatenate([np.asarray(r, dtype=float) for r in strata.values()]), IQM_TRIM))


def probability_of_improvement(x: Strata, y: Strata) -> float:
    """Mean over the strata both ran of P(X > Y) + 0.5 P(X = Y) over all pairs of their runs."""
    shared = [name for name in x if name in y]
    if not shared:
        raise ValueError("the two methods share no stratum (task and dev set)")
    values = []
    for name in shared:
        a, b = np.asarray(x[name], dtype=float), np.asarray(y[name], dtype=float)
        greater = (a[:, None] > b[None, :]).mean()
        ties = (a[:, None] == b[None, :]).mean()
        values.append(greater + 0.5 * ties)
    return float(np.mean(values))


def _resampled(strata: Strata, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {name: rng.choice(np.asarray(runs, dtype=float), size=len(runs)) for name, runs in strata.items()}


def _estimate(value: float, replicates: Sequence[float]) -> Estimate:
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(np.asarray(replicates), [tail, 1 - tail])
    return Estimate(value, float(low), float(high))


def almost_stochastic_order(x: Strata, y: Strata) -> float:
    """ASO's ε_min of X over Y, their runs pooled over strata (`deepsig.aso`, seed `SEED`)."""
    # deepsig is imported when a summary asks for it: importing it takes seconds (pandas, joblib) and switches
    # joblib's pickler for the whole process, which no other command should pay for.
    from deepsig import aso

    pooled_x = np.concatenate([np.asarray(r, dtype=float) for r in x.values()])
    pooled_y = np.concatenate([np.asarray(r, dtype=float) for r in y.values()])
    return float(
        aso(
            pooled_x,
            pooled_y,
            confidence_level=CONFIDENCE,
            num_bootstrap_iterations=ASO_BOOTSTRAP,
            num_jobs=1,
            show_progress=False,
            seed=SEED,
        )
    )


def summarise_methods(
    methods: Mapping[str, Strata], reference: str | None, *, resamples: int = RESAMPLES, aso: bool = True
) -> list[MethodSummary]:
    """A `MethodSummary` per method (in the mapping's order); against ``reference`` (one of ``methods``, or None
    for none) the probability of improvement and, with ``aso``, ASO's ε_min.

    Raises:
        ValueError: a reference that is not one of the methods, a method without runs, fewer than 1 resample.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if reference is not None and reference not in methods:
        raise ValueError(f"the reference {reference!r} is not one of: {', '.join(methods)}")
    for name, strata in methods.items():
        if not strata or any(len(r) == 0 for r in strata.values()):
            raise ValueError(f"method {name!r} has a stratum without runs")
    rng = np.random.default_rng(SEED)
    draws = {name: [_resampled(strata, rng) for _ in range(resamples)] for name, strata in methods.items()}
    summaries = []
    for name, strata in methods.items():
        improvement = epsilon = None
        if reference is not None and name != reference:
            improvement = _estimate(
                probability_of_improvement(strata, methods[reference]),
                [
                    probability_of_improvement(a, b)
                    for a, b in zip(draws[name], draws[reference], strict=True)
                ],
            )
            epsilon = almost_stochastic_order(strata, methods[reference]) if aso else None
        summaries.append(
            MethodSummary(
                method=name,
                runs=sum(len(r) for r in strata.values()),
                strata=len(strata),
                mean=_estimate(aggregate_mean(strata), [aggregate_mean(d) for d in draws[name]]),
                iqm=_estimate(aggregate_iqm(strata), [aggregate_iqm(d) for d in draws[name]]),
                improvement=improvement,
                aso_epsilon=epsilon,
            )
        )
    return summaries


def summary_lines(axis: str, reference: str | None, summaries: Sequence[MethodSummary]) -> list[str]:
    """The summary as notes under a table: one line per method."""
    head = (
        f"method summary over tasks along {axis} ({CONFIDENCE:.0%} stratified-bootstrap intervals; runs: seeds and "
        "the other axes' settings; P(improvement) and ASO's ε_min against "
        + (f"{reference}; ε_min < 0.5: better than it)" if reference else "no reference)")
    )
    lines = [head]
    for s in summaries:
        text = (
            f"{axis}={s.method}: {s.runs} runs in {s.strata} stratum(s); mean {s.mean.value:.4f} "
            f"[{s.mean.low:.4f}, {s.mean.high:.4f}], IQM {s.iqm.value:.4f} [{s.iqm.low:.4f}, {s.iqm.high:.4f}]"
        )
        if s.improvement is not None:
            text += f"; P(improvement) {s.improvement.value:.3f} [{s.improvement.low:.3f}, {s.improvement.high:.3f}]"
        if s.aso_epsilon is not None and not math.isnan(s.aso_epsilon):
            text += f"; ASO ε_min {s.aso_epsilon:.3f}"
        if s.method == reference:
            text += " (reference)"
        lines.append(text)
    return lines


def parse_summary(text: str) -> tuple[str, str | None]:
    """``--summary AXIS`` or ``AXIS=REFERENCE`` -> (axis, reference value or None)."""
    axis, _, reference = text.partition("=")
    return axis.strip(), (reference.strip() or None)
