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
- **Mean, seed level**: where every stratum's runs come as the same seeds (`SeedStrata`: per seed, the mean over
  the stratum's other settings), the mean's interval is the t interval over the seeds of the per-seed mean over
  strata, as a sweep table's marginal means (`kdgrid.analysis.seed_level`); else the stratified bootstrap.
- **ASO** (Almost Stochastic Order, `deepsig.aso`): ε_min, an upper bound (at 95% confidence) on how far X's
  score distribution violates being stochastically larger than Y's, per stratum (never pooled across tasks: a
  task's spread would pass for a method's), both ways (X over the reference and the reference over X), with
  deepsig's Bonferroni correction over the ASO comparisons made in that stratum. ε_min < 0.5: X is better than Y
  (the smaller, the clearer); ε_min near 1: it is not. It wants several runs a side.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import trim_mean

from kdgrid.analysis.seed_level import SeedScores, average, mean_estimate

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0
IQM_TRIM = 0.25  # cut from each end: the interquartile mean
ASO_BOOTSTRAP = 1000  # deepsig's default: fewer gives unstable bounds at a handful of seeds

# stratum (e.g. "mrpc · validation") -> the method's runs there, ``[runs]``
Strata = Mapping[str, np.ndarray]
# stratum -> the method's per-seed scores there (the mean over its other settings per seed), where it has them
SeedStrata = Mapping[str, SeedScores]


@dataclass(frozen=True)
class Estimate:
    """A statistic with its 95% interval (``how``: ``stratified bootstrap`` or ``seed-level t``)."""

    value: float
    low: float
    high: float
    how: str = "stratified bootstrap"


@dataclass(frozen=True)
class MethodSummary:
    """One value of the summarised axis: its mean and IQM over strata, and against the reference (None for the
    reference itself) its probability of improvement and, per stratum, ASO's ε_min both ways (over the
    reference, and the reference's over it); ``runs`` counted over all strata."""

    method: str
    runs: int
    strata: int
    mean: Estimate
    iqm: Estimate
    improvement: Estimate | None = None
    aso: Mapping[str, tuple[float, float]] | None = None  # stratum -> (ε_min over the reference, reverse)


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


def almost_stochastic_order(
    x: Strata | np.ndarray, y: Strata | np.ndarray, num_comparisons: int = 1
) -> float:
    """ASO's ε_min of X over Y on one stratum's runs (`deepsig.aso`, seed `SEED`), with deepsig's Bonferroni
    correction for ``num_comparisons`` ASO comparisons.

    Raises:
        ValueError: runs of several strata (ASO never pools tasks).
    """
    runs = []
    for side in (x, y):
        if isinstance(side, Mapping):
            if len(side) != 1:
                raise ValueError(f"ASO compares the runs of one stratum, got {len(side)} ({', '.join(side)})")
            side = next(iter(side.values()))
        runs.append(np.asarray(side, dtype=float))
    # deepsig is imported when a summary asks for it: importing it takes seconds (pandas, joblib) and switches
    # joblib's pickler for the whole process, which no other command should pay for.
    from deepsig import aso

    return float(
        aso(
            runs[0],
            runs[1],
            confidence_level=CONFIDENCE,
            num_comparisons=num_comparisons,
            num_bootstrap_iterations=ASO_BOOTSTRAP,
            num_jobs=1,
            show_progress=False,
            seed=SEED,
        )
    )


def seed_level_mean(strata: SeedStrata) -> Estimate | None:
    """The mean over strata with the t interval over seeds of the per-seed mean over strata; None unless every
    stratum ran the same two or more seeds."""
    found = average(strata.values())
    if found is None or found.n_seeds < 2:
        return None
    estimate = mean_estimate(found)
    return Estimate(estimate.value, estimate.low, estimate.high, "seed-level t")


def summarise_methods(
    methods: Mapping[str, Strata],
    reference: str | None,
    *,
    resamples: int = RESAMPLES,
    aso: bool = True,
    seeds: Mapping[str, SeedStrata] | None = None,
) -> list[MethodSummary]:
    """A `MethodSummary` per method (in the mapping's order); against ``reference`` (one of ``methods``, or None
    for none) the probability of improvement and, with ``aso``, ASO's ε_min per stratum both ways. ``seeds``:
    method -> its `SeedStrata`, for a seed-level mean (`seed_level_mean`) where they allow one.

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
    # each stratum's ASO comparisons, both ways for every method that shares it with the reference
    comparisons: dict[str, int] = {}
    if reference is not None:
        for name, strata in methods.items():
            for stratum in strata:
                if name != reference and stratum in methods[reference]:
                    comparisons[stratum] = comparisons.get(stratum, 0) + 2
    summaries = []
    for name, strata in methods.items():
        improvement = None
        epsilons: dict[str, tuple[float, float]] | None = None
        if reference is not None and name != reference:
            ours = methods[reference]
            improvement = _estimate(
                probability_of_improvement(strata, ours),
                [
                    probability_of_improvement(a, b)
                    for a, b in zip(draws[name], draws[reference], strict=True)
                ],
            )
            if aso:
                epsilons = {
                    stratum: (
                        almost_stochastic_order(runs, ours[stratum], comparisons[stratum]),
                        almost_stochastic_order(ours[stratum], runs, comparisons[stratum]),
                    )
                    for stratum, runs in strata.items()
                    if stratum in ours
                }
        mean = _estimate(aggregate_mean(strata), [aggregate_mean(d) for d in draws[name]])
        if seeds is not None and name in seeds and set(seeds[name]) == set(strata):
            mean = seed_level_mean(seeds[name]) or mean
        summaries.append(
            MethodSummary(
                method=name,
                runs=sum(len(r) for r in strata.values()),
                strata=len(strata),
                mean=mean,
                iqm=_estimate(aggregate_iqm(strata), [aggregate_iqm(d) for d in draws[name]]),
                improvement=improvement,
                aso=epsilons,
            )
        )
    return summaries


def summary_lines(axis: str, reference: str | None, summaries: Sequence[MethodSummary]) -> list[str]:
    """The summary as notes under a table: one line per method."""
    shown = (reference or "(none)") if reference is not None else None
    head = (
        f"method summary over tasks along {axis} ({CONFIDENCE:.0%} intervals: the mean's seed-level t over seeds "
        "where every task ran the same seeds, else the stratified bootstrap, as is the IQM's; runs: seeds and the "
        "other axes' settings; P(improvement) and, per task, ASO's ε_min both ways against "
        + (
            f"{shown}, deepsig's Bonferroni correction over each task's ASO comparisons; ε_min < 0.5: better)"
            if shown is not None
            else "no reference)"
        )
    )
    lines = [head]
    for s in summaries:
        text = (
            f"{axis}={s.method or '(none)'}: {s.runs} runs in {s.strata} stratum(s); mean {s.mean.value:.4f} "
            f"[{s.mean.low:.4f}, {s.mean.high:.4f}] ({s.mean.how}), IQM {s.iqm.value:.4f} "
            f"[{s.iqm.low:.4f}, {s.iqm.high:.4f}]"
        )
        if s.improvement is not None:
            text += f"; P(improvement) {s.improvement.value:.3f} [{s.improvement.low:.3f}, {s.improvement.high:.3f}]"
        for stratum, (over, under) in (s.aso or {}).items():
            if not (math.isnan(over) or math.isnan(under)):
                text += f"; {stratum}: ASO ε_min {over:.3f} over {shown}, {under:.3f} {shown} over it"
        if s.method == reference:
            text += " (reference)"
        lines.append(text)
    return lines


NONE_NAMES: tuple[str, ...] = ("none", "(none)")
"""How ``--summary AXIS=none`` names the empty value of an axis (no knowledge, no strategy)."""


def parse_summary(text: str) -> tuple[str, str | None]:
    """``--summary AXIS`` or ``AXIS=REFERENCE`` -> (axis, reference value or None); ``none`` names the empty
    value (``""``)."""
    axis, _, reference = text.partition("=")
    reference = reference.strip()
    if reference.lower() in NONE_NAMES:
        return axis.strip(), ""
    return axis.strip(), (reference or None)
