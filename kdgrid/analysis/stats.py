"""Uncertainty of a metric on a dev set: bootstrap intervals, paired bootstrap tests, Holm-Bonferroni.

Conventions (every function here):

- ``gold``: the dev set's labels ``[N]`` (class ids, or scores for regression).
- Predictions: ``[N]`` for one run, or ``[K, N]`` for K seeds of one cell; every run scores the same N examples
  in the same order as ``gold``.
- ``metric``: a name of `kdgrid.metrics.ROW_METRICS` (``"accuracy"``, ``"f1"``, ``"matthews_corrcoef"``,
  ``"pearson"``, ``"spearman"``) or a function with the same contract: predictions and labels ``[R, N]`` ->
  values ``[R]``. Values are the metric's own (fractions, correlations), never percent.
- Resampling: examples with replacement, N of N (an ``[R, N]`` index matrix, drawn in blocks of rows so memory
  stays bounded on large dev sets); seeds with replacement, K of K. One replicate uses ONE example sample for all
  its runs: seeds (and the two sides of a comparison) are scored on the same dev examples - examples are crossed
  with seeds, not nested in them - so drawing a fresh sample per run would average the dev set's sampling error
  away as if each run had its own dev set.
- Randomness: one `numpy.random.Generator` from ``seed``; the same inputs and seed give the same result.
- Bad settings (fewer than 1 resample, a confidence outside (0, 1), mismatched shapes) are a `ValueError` with
  one message.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as scipy_stats

from kdgrid.metrics import (
    ROW_METRICS,
    RowMetric,
    accuracy_rows,
    centre_rows,
    pearson_of_centred,
    pearson_rows,
)

DEFAULT_RESAMPLES = 1000
"""Resamples of an interval: the percentile bounds' Monte-Carlo error is then about a tenth of their width."""

DEFAULT_TEST_RESAMPLES = 10_000
"""Resamples of a paired bootstrap test (and of the bootstrap standard error `normal_test` uses). A bootstrap p
cannot fall below 2 / (R + 1) (about 0.0002), so a Holm correction over more than ~250 of them can never reject:
the tables' marks use floor-free tests instead (`mcnemar_test`, `normal_test`, `seed_t_test`)."""

CORRECTIONS: tuple[str, ...] = ("holm", "fdr")
"""Multiple-comparison corrections: Holm-Bonferroni (family-wise error) or Benjamini-Hochberg (false discovery
rate)."""

CORRECTION_LABELS = {"holm": "Holm (family-wise error)", "fdr": "Benjamini-Hochberg (false discovery rate)"}

TEST_METHODS = {
    "bootstrap": "paired bootstrap over dev examples",
    "mcnemar": "exact McNemar test (paired accuracy on the same examples, one run each)",
    "normal": "paired z-test on the bootstrap standard error over dev examples",
    "t": "t-test over seeds (paired by seed where both ran the same seeds, else Welch)",
}
"""What each `PairedTest.method` is, in words (for the notes under a table)."""

DEFAULT_CONFIDENCE = 0.95

_INDEX_BLOCK_ELEMENTS = 1 << 21
"""Example indices drawn (and rows scored) at a time: 16 MiB of int64, whatever the dev set's size."""


@dataclass(frozen=True)
class Interval:
    """A metric on one run and its percentile bootstrap interval over dev examples."""

    value: float  # the metric on all N examples
    low: float
    high: float
    resamples: int
    confidence: float


@dataclass(frozen=True)
class SeedInterval:
    """A metric over K seeds: mean and standard deviation across seeds, and a bootstrap interval of the mean that
    covers both seed and example variation (seeds resampled, then examples)."""

    mean: float  # mean over seeds of the metric on all N examples
    std: float | None  # sample standard deviation across seeds (ddof 1); None for one seed
    low: float
    high: float
    n_seeds: int
    resamples: int
    confidence: float
    kind: str = "bootstrap"  # "bootstrap" (seeds, then examples) or "t" (`seed_t_interval`)

    @property
    def value(self) -> float:
        """The cell's number: the mean over seeds (so `Interval` and `SeedInterval` read alike)."""
        return self.mean


@dataclass(frozen=True)
class PairedTest:
    """Paired bootstrap comparison of runs a and b on the same dev examples."""

    difference: float  # metric(a) - metric(b) on all examples (each side's mean over its seeds)
    p_value: float  # two-sided, for "a and b differ"; see `paired_bootstrap_test`
    resamples: int
    seeds_paired: bool  # whether seed j of a was resampled together with seed j of b
    method: str = "bootstrap"  # which test gave ``p_value`` (`TEST_METHODS`)
    floor: float = 0.0  # the smallest p this test could give on these data (a family's reachability)


def bootstrap_interval(
    metric: str | RowMetric,
    gold: ArrayLike,
    predictions: ArrayLike,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """The metric of one run (predictions ``[N]``) with its percentile bootstrap interval over dev examples.

    ``low`` and ``high`` are the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the metric over
    ``resamples`` resamples of the N examples.
    """
    _check_settings(resamples, confidence)
    score = _row_metric(metric)
    labels = _gold(gold)
    runs = _runs(predictions, labels, "predictions", allow_seeds=False)
    replicates = _replicate_scores(score, labels, runs, np.random.default_rng(seed), resamples)
    return interval_from_replicates(replicates[:, 0], float(score(runs, labels[None])[0]), confidence)


def interval_from_replicates(replicates: np.ndarray, value: float, confidence: float) -> Interval:
    """`bootstrap_interval` from one run's replicate scores ``[R]`` (`replicate_scores`) and its full-data value."""
    low, high = _percentile_bounds(replicates, confidence)
    return Interval(value=value, low=low, high=high, resamples=len(replicates), confidence=confidence)


def seed_bootstrap_interval(
    metric: str | RowMetric,
    gold: ArrayLike,
    predictions_by_seed: ArrayLike,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> SeedInterval:
    """The mean metric over K seeds (predictions ``[K, N]``) with a hierarchical bootstrap interval.

    Each replicate draws K seeds with replacement and one sample of the N examples, and takes the mean over the
    drawn seeds of the metric on that sample; the bounds are percentiles of those means. With one seed the interval
    is exactly `bootstrap_interval`'s (same seed, same example samples).
    """
    _check_settings(resamples, confidence)
    score = _row_metric(metric)
    labels = _gold(gold)
    runs = _runs(predictions_by_seed, labels, "predictions_by_seed", allow_seeds=True)
    rng = np.random.default_rng(seed)
    replicates = _replicate_scores(score, labels, runs, rng, resamples)  # examples first: see the docstring
    per_seed = score(runs, np.broadcast_to(labels, runs.shape))
    return seed_interval_from_replicates(replicates, per_seed, rng, confidence)


def seed_interval_from_replicates(
    replicates: np.ndarray, per_seed: np.ndarray, rng: np.random.Generator, confidence: float
) -> SeedInterval:
    """`seed_bootstrap_interval` from the K seeds' replicate scores ``[R, K]`` (`replicate_scores`), their
    full-data values ``[K]``, and the generator as `replicate_scores` left it (the seeds are drawn from it next)."""
    resamples, n_seeds = replicates.shape
    means = _mean_over_drawn_seeds(replicates, _draw_seeds(rng, resamples, n_seeds))
    low, high = _percentile_bounds(means, confidence)
    std = float(np.std(per_seed, ddof=1)) if n_seeds > 1 else None
    return SeedInterval(
        mean=float(per_seed.mean()),
        std=std,
        low=low,
        high=high,
        n_seeds=n_seeds,
        resamples=resamples,
        confidence=confidence,
    )


def paired_bootstrap_test(
    metric: str | RowMetric,
    gold: ArrayLike,
    predictions_a: ArrayLike,
    predictions_b: ArrayLike,
    *,
    resamples: int = DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
    pair_seeds: bool = True,
) -> PairedTest:
    """Two-sided paired bootstrap test of "a and b differ" on the same dev examples.

    Each side is one run ``[N]`` or K seeds ``[K, N]``. Every replicate scores both sides on the SAME example
    sample (paired examples). When both sides have the same number of seeds (K > 1), seed j of a is drawn together
    with seed j of b (paired seeds: kdgrid's seed j of two trials of one group sees the same batches); otherwise
    each side's seeds are drawn apart (also when ``pair_seeds`` is False: sides whose seed j are not the same
    seed). A replicate's difference is mean(metric of a) - mean(metric of b) over its
    drawn seeds.

    The p-value is the percentile bootstrap's: twice the share of replicate differences on the far side of 0
    (ties at 0 count on both sides), with the +1 correction, ``p = min(1, 2 (1 + min(#{d <= 0}, #{d >= 0})) /
    (R + 1))``. Why this form: it is the smallest alpha at which the (1 - alpha) percentile interval of the
    difference excludes 0, so a cell marked significant is one whose difference interval excludes 0, as printed;
    the +1 keeps a Monte-Carlo p off 0 (its floor is 2 / (R + 1)). Unlike a permutation p, a percentile
    bootstrap p is not exact: the +1 does not make it conservative, only finite. The floor also means that a
    correction over m tests cannot reach alpha once m * 2 / (R + 1) > alpha; the tables use the floor-free tests
    below (`mcnemar_test`, `normal_test`, `seed_t_test`) and keep this one for explicit use. Identical sides
    give p = 1.
    """
    _check_settings(resamples)
    score = _row_metric(metric)
    labels = _gold(gold)
    runs_a = _runs(predictions_a, labels, "predictions_a", allow_seeds=True)
    runs_b = _runs(predictions_b, labels, "predictions_b", allow_seeds=True)
    rng = np.random.default_rng(seed)
    replicates = _replicate_scores(score, labels, np.concatenate([runs_a, runs_b]), rng, resamples)
    full = np.broadcast_to(labels, runs_a.shape), np.broadcast_to(labels, runs_b.shape)
    return paired_test_from_replicates(
        replicates[:, : len(runs_a)],
        replicates[:, len(runs_a) :],
        score(runs_a, full[0]),
        score(runs_b, full[1]),
        rng,
        pair_seeds=pair_seeds,
    )


def paired_test_from_replicates(
    replicates_a: np.ndarray,
    replicates_b: np.ndarray,
    per_seed_a: np.ndarray,
    per_seed_b: np.ndarray,
    rng: np.random.Generator,
    *,
    pair_seeds: bool = True,
) -> PairedTest:
    """`paired_bootstrap_test` from each side's replicate scores ``[R, K_a]`` and ``[R, K_b]`` (`replicate_scores`
    on the same example samples), their full-data values ``[K_a]``, ``[K_b]``, and the generator as
    `replicate_scores` left it (the seeds are drawn from it next)."""
    resamples = len(replicates_a)
    if replicates_b.shape[0] != resamples:
        raise ValueError(f"the two sides have {resamples} and {replicates_b.shape[0]} replicates")
    k_a, k_b = replicates_a.shape[1], replicates_b.shape[1]
    seeds_paired = pair_seeds and k_a == k_b > 1
    draws_a = _draw_seeds(rng, resamples, k_a)
    draws_b = draws_a if seeds_paired else _draw_seeds(rng, resamples, k_b)
    mean_a = _mean_over_drawn_seeds(replicates_a, draws_a)
    differences = mean_a - _mean_over_drawn_seeds(replicates_b, draws_b)
    far_side = min(int((differences <= 0).sum()), int((differences >= 0).sum()))
    p_value = min(1.0, 2.0 * (1 + far_side) / (resamples + 1))
    difference = float(per_seed_a.mean() - per_seed_b.mean())
    return PairedTest(
        difference=difference,
        p_value=p_value,
        resamples=resamples,
        seeds_paired=seeds_paired,
        floor=min(1.0, 2.0 / (resamples + 1)),
    )


def holm_bonferroni(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given.

    With m p-values sorted ascending, the i-th smallest (i from 1) becomes ``max over j <= i of min(1, (m - j + 1)
    p_(j))``: monotone in the raw p, never below it, at most 1. A cell is significant at level alpha when its
    adjusted p is <= alpha; that controls the family-wise error over the m cells.
    """
    values = np.asarray(p_values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"p-values must be a flat sequence, got shape {values.shape}")
    bad = [float(p) for p in values if not 0.0 <= p <= 1.0]  # NaN fails the comparison too
    if bad:
        raise ValueError(f"p-values must lie in [0, 1], got {bad}")
    m = len(values)
    order = np.argsort(values, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * values[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return [float(p) for p in adjusted]


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (false discovery rate), in the order given: the i-th smallest becomes
    ``min over j >= i of min(1, m p_(j) / j)`` (`scipy.stats.false_discovery_control`). Cells with adjusted p <=
    q keep the expected share of false discoveries among those marked at most q (independent or positively
    dependent tests)."""
    values = _p_values(p_values)
    if not len(values):
        return []
    return [float(p) for p in scipy_stats.false_discovery_control(values, method="bh")]


def adjust(p_values: Sequence[float], correction: str = "holm") -> list[float]:
    """`holm_bonferroni` or `benjamini_hochberg` (``correction`` in `CORRECTIONS`)."""
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; allowed: {', '.join(CORRECTIONS)}")
    return holm_bonferroni(p_values) if correction == "holm" else benjamini_hochberg(p_values)


def family_can_reject(floors: Sequence[float], alpha: float) -> bool:
    """Whether a family of tests whose smallest attainable p-values are ``floors`` can mark any test at ``alpha``:
    Holm and Benjamini-Hochberg both need the smallest p to be at most alpha / m for a first rejection."""
    return bool(floors) and min(floors) * len(floors) <= alpha


def mcnemar_test(gold: ArrayLike, prediction_a: ArrayLike, prediction_b: ArrayLike) -> PairedTest:
    """Exact McNemar test of "a and b have the same accuracy" for one run each ``[N]`` on the same examples.

    Only the discordant examples count: b01 where a is right and b wrong, b10 the reverse; under the null each
    discordant example is a fair coin, so p is the two-sided exact binomial p of b01 in b01 + b10 trials at 1/2
    (`scipy.stats.binomtest`'s, computed as twice the smaller tail). No resampling, so no floor beyond the data's own: ``2 * 0.5 ** (b01 + b10)``.
    Identical runs give p = 1."""
    labels = _gold(gold)
    a = _runs(prediction_a, labels, "prediction_a", allow_seeds=False)[0]
    b = _runs(prediction_b, labels, "prediction_b", allow_seeds=False)[0]
    right_a, right_b = a == labels, b == labels
    a_only = int(np.sum(right_a & ~right_b))
    discordant = a_only + int(np.sum(right_b & ~right_a))
    # At probability 1/2 the binomial is symmetric, so binomtest's two-sided p is twice the smaller tail.
    smaller_tail = scipy_stats.binom.cdf(min(a_only, discordant - a_only), discordant, 0.5)
    p_value = 1.0 if discordant == 0 else float(min(1.0, 2.0 * smaller_tail))
    return PairedTest(
        difference=float(right_a.mean() - right_b.mean()),
        p_value=min(1.0, p_value),
        resamples=0,
        seeds_paired=False,
        method="mcnemar",
        floor=min(1.0, 2.0 * 0.5**discordant) if discordant else 1.0,
    )


def normal_test(difference: float, replicate_differences: np.ndarray) -> PairedTest:
    """Paired z-test of a difference of two runs on the same examples: ``z = difference / se`` with ``se`` the
    standard deviation of the paired bootstrap replicates of the difference ``[R]`` (both sides scored on the
    same example samples), two-sided normal p. For metrics without an exact paired test (F1, MCC, Pearson); the
    bootstrap only estimates the standard error, so p has no resampling floor. A zero standard error gives p = 1
    for a zero difference and 0 otherwise."""
    se = float(np.std(replicate_differences, ddof=1)) if len(replicate_differences) > 1 else 0.0
    if se <= 0.0:
        p_value = 1.0 if abs(difference) < 1e-12 else 0.0
    else:
        p_value = float(2.0 * scipy_stats.norm.sf(abs(difference) / se))
    return PairedTest(
        difference=difference,
        p_value=p_value,
        resamples=len(replicate_differences),
        seeds_paired=False,
        method="normal",
    )


def seed_t_test(per_seed_a: ArrayLike, per_seed_b: ArrayLike, *, paired: bool) -> PairedTest:
    """Method-level test of "a and b have the same expected score over training seeds" from each side's
    per-seed scores (``[K_a]``, ``[K_b]``, at least 2 each): the paired t-test over seed differences when seed j
    of a goes with seed j of b (``paired``, equal K), else Welch's t-test. The seeds' spread contains the
    training variance and the run-to-run example noise, so the test counts both; the dev set is held fixed.
    Zero spread on both sides gives p = 1 for equal means and 0 otherwise."""
    a, b = np.asarray(per_seed_a, dtype=np.float64), np.asarray(per_seed_b, dtype=np.float64)
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"a t-test over seeds needs at least 2 seeds a side, got {len(a)} and {len(b)}")
    paired = paired and len(a) == len(b)
    difference = float(a.mean() - b.mean())
    spread = np.std(a - b, ddof=1) if paired else math.hypot(np.std(a, ddof=1), np.std(b, ddof=1))
    if spread <= 1e-15:
        p_value = 1.0 if abs(difference) < 1e-12 else 0.0
    elif paired:
        p_value = float(scipy_stats.ttest_rel(a, b).pvalue)
    else:
        p_value = float(scipy_stats.ttest_ind(a, b, equal_var=False).pvalue)
    return PairedTest(difference=difference, p_value=p_value, resamples=0, seeds_paired=paired, method="t")


@functools.lru_cache(maxsize=1024)
def t_quantile(q: float, df: float) -> float:
    """Student's t quantile, cached: a report asks for the same few (quantile, degrees of freedom) thousands of
    times (every configuration's interval, for every reference offered)."""
    return float(scipy_stats.t.ppf(q, df))


def seed_t_interval(per_seed: ArrayLike, confidence: float = DEFAULT_CONFIDENCE) -> SeedInterval:
    """Method-level interval over K >= 2 seeds' scores ``[K]``: ``mean +- t_{K-1} s / sqrt(K)`` (Student's t,
    sample standard deviation s). It covers the method's expected score on this dev set over training seeds
    (seed variance and run-to-run example noise), not the dev set's own sampling error."""
    _check_settings(1, confidence)
    values = np.asarray(per_seed, dtype=np.float64)
    if values.ndim != 1 or len(values) < 2:
        raise ValueError(f"a t interval over seeds needs at least 2 seeds, got shape {values.shape}")
    mean, std = float(values.mean()), float(np.std(values, ddof=1))
    half = t_quantile((1 + confidence) / 2, len(values) - 1) * std / math.sqrt(len(values))
    return SeedInterval(
        mean=mean,
        std=std,
        low=mean - half,
        high=mean + half,
        n_seeds=len(values),
        resamples=0,
        confidence=confidence,
        kind="t",
    )


def seed_prediction_interval(
    per_seed: ArrayLike, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float]:
    """Where one more run's score is expected to fall, from K >= 2 seeds' scores: ``mean +- t_{K-1} s sqrt(1 +
    1/K)``. A published single-run number is such a run (of the same method, on the same dev set)."""
    values = np.asarray(per_seed, dtype=np.float64)
    if len(values) < 2:
        raise ValueError("a prediction interval needs at least 2 seeds")
    mean, std = float(values.mean()), float(np.std(values, ddof=1))
    half = t_quantile((1 + confidence) / 2, len(values) - 1) * std * math.sqrt(1 + 1 / len(values))
    return mean - half, mean + half


@dataclass(frozen=True)
class OmnibusTest:
    """One test of "every candidate has the same expected score" over k >= 2 candidates (strategies)."""

    statistic: float
    p_value: float
    method: str  # "cochran" (over examples), "anova" / "anova-paired" (over seeds), "wald" (bootstrap)
    floor: float = 0.0


def friedman_over_examples(scores: ArrayLike) -> OmnibusTest:
    """Friedman test of k candidates scored per example ``[k, N]`` (e.g. 0/1 correctness, or its mean over
    seeds): examples are the blocks. On 0/1 data with ties corrected this is Cochran's Q, the k-sample McNemar;
    the p is the chi-square approximation with k - 1 degrees of freedom (good for the hundreds to thousands of
    discordant examples of a dev set). Examples where all candidates agree carry no information; none left: p 1.
    """
    values = np.asarray(scores, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] < 2:
        raise ValueError(f"scores must be [k >= 2 candidates, N examples], got shape {values.shape}")
    informative = values[:, np.ptp(values, axis=0) > 0]
    k, n = informative.shape
    if n == 0:
        return OmnibusTest(0.0, 1.0, "cochran")
    ranks = scipy_stats.rankdata(informative, axis=0)  # within each example, over candidates
    rank_sums = ranks.sum(axis=1)
    # Tie correction: the sum over each example's tie groups of t^3 - t, i.e. over its candidates of t^2 - 1
    # with t the size of the candidate's tie group.
    group_sizes = (informative[:, None, :] == informative[None, :, :]).sum(axis=1)  # [k, N]
    ties = float(np.sum(group_sizes.astype(np.float64) ** 2 - 1))
    denominator = 1.0 - ties / (n * k * (k * k - 1))
    statistic = 12.0 / (n * k * (k + 1)) * float(np.sum((rank_sums - n * (k + 1) / 2) ** 2)) / denominator
    return OmnibusTest(statistic, float(scipy_stats.chi2.sf(statistic, k - 1)), "cochran")


def anova_over_seeds(per_seed: Sequence[ArrayLike]) -> OmnibusTest:
    """One-way ANOVA F-test of k candidates from their per-seed scores (a list of ``[K_i]``, K_i >= 2): the
    method-level test of equal expected scores (seed variance counted). Zero within-candidate spread: p is 1 for
    equal means, 0 otherwise."""
    groups = [np.asarray(g, dtype=np.float64) for g in per_seed]
    if len(groups) < 2 or any(len(g) < 2 for g in groups):
        raise ValueError("an ANOVA over seeds needs >= 2 candidates of >= 2 seeds each")
    within = sum(float(np.sum((g - g.mean()) ** 2)) for g in groups)
    if within <= 1e-15:
        means = [g.mean() for g in groups]
        return OmnibusTest(math.inf, 1.0 if np.ptp(means) < 1e-12 else 0.0, "anova")
    result = scipy_stats.f_oneway(*groups)
    return OmnibusTest(float(result.statistic), float(result.pvalue), "anova")


def anova_over_paired_seeds(per_seed: ArrayLike) -> OmnibusTest:
    """Two-way ANOVA without replication of k candidates that ran the same K seeds, per-seed scores ``[k, K]``
    (row i: candidate i, column j: seed j of every candidate): the seeds are blocks, so a component that seed j
    adds to every candidate's score (its data order, its initialisation) cancels, and only each run's own
    component is noise. ``F = MS_candidates / MS_residual`` with k - 1 and (k - 1)(K - 1) degrees of freedom;
    exact under Gaussian run components of equal variance (the repeated-measures F-test). Zero residual: p is 1
    for equal means, 0 otherwise."""
    scores = np.asarray(per_seed, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] < 2 or scores.shape[1] < 2:
        raise ValueError(f"a paired ANOVA needs [k >= 2 candidates, K >= 2 seeds] scores, got {scores.shape}")
    k, n_seeds = scores.shape
    grand = scores.mean()
    candidate_effects = scores.mean(axis=1) - grand
    seed_effects = scores.mean(axis=0) - grand
    residual = scores - grand - candidate_effects[:, None] - seed_effects[None, :]
    between = n_seeds * float(np.sum(candidate_effects**2)) / (k - 1)
    error = float(np.sum(residual**2)) / ((k - 1) * (n_seeds - 1))
    if error <= 1e-30:
        return OmnibusTest(math.inf, 1.0 if np.ptp(candidate_effects) < 1e-12 else 0.0, "anova-paired")
    statistic = between / error
    p_value = float(scipy_stats.f.sf(statistic, k - 1, (k - 1) * (n_seeds - 1)))
    return OmnibusTest(statistic, p_value, "anova-paired")


def wald_equal(values: ArrayLike, replicates: ArrayLike) -> OmnibusTest:
    """Wald chi-square test that k scores ``[k]`` are equal, with their covariance estimated from paired
    bootstrap replicates ``[R, k]`` (all k scored on the same example samples): ``W = d' S^+ d`` for the k - 1
    differences d from the first score and S their bootstrap covariance (pseudo-inverse), chi-square with its
    rank as degrees of freedom. For metrics without a rank test over examples (Pearson); no resampling floor."""
    scores = np.asarray(values, dtype=np.float64)
    draws = np.asarray(replicates, dtype=np.float64)
    if scores.ndim != 1 or len(scores) < 2 or draws.ndim != 2 or draws.shape[1] != len(scores):
        raise ValueError(
            f"values must be [k >= 2] and replicates [R, k], got {scores.shape} and {draws.shape}"
        )
    contrast = np.hstack([-np.ones((len(scores) - 1, 1)), np.eye(len(scores) - 1)])
    differences = contrast @ scores
    covariance = np.atleast_2d(np.cov(draws @ contrast.T, rowvar=False))
    rank = int(np.linalg.matrix_rank(covariance, tol=1e-14))
    if rank == 0:
        return OmnibusTest(0.0, 1.0 if np.allclose(differences, 0.0) else 0.0, "wald")
    statistic = float(differences @ np.linalg.pinv(covariance, hermitian=True) @ differences)
    return OmnibusTest(statistic, float(scipy_stats.chi2.sf(statistic, rank)), "wald")


def _p_values(p_values: Sequence[float]) -> np.ndarray:
    values = np.asarray(p_values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"p-values must be a flat sequence, got shape {values.shape}")
    bad = [float(p) for p in values if not 0.0 <= p <= 1.0]  # NaN fails the comparison too
    if bad:
        raise ValueError(f"p-values must lie in [0, 1], got {bad}")
    return values


def _check_settings(resamples: int, confidence: float | None = None) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int | np.integer) or resamples < 1:
        raise ValueError(f"the bootstrap needs a whole number of resamples >= 1, got {resamples!r}")
    if confidence is not None and not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1 (e.g. 0.95), got {confidence!r}")


def _row_metric(metric: str | RowMetric) -> RowMetric:
    if callable(metric):
        return metric
    if metric not in ROW_METRICS:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(ROW_METRICS)}")
    return ROW_METRICS[metric]


def _gold(gold: ArrayLike) -> np.ndarray:
    labels = np.asarray(gold)
    if labels.ndim != 1 or len(labels) == 0:
        raise ValueError(f"gold must be the dev set's labels [N] with N >= 1, got shape {labels.shape}")
    return labels


def _runs(predictions: ArrayLike, gold: np.ndarray, name: str, *, allow_seeds: bool) -> np.ndarray:
    """Predictions as ``[K, N]`` (one run: K = 1), checked against the gold labels' N."""
    runs = np.asarray(predictions)
    if runs.ndim == 1:
        runs = runs[None]
    expected = "[N] or [K seeds, N]" if allow_seeds else "[N]"
    if runs.ndim != 2 or runs.shape[0] == 0 or (runs.shape[0] > 1 and not allow_seeds):
        raise ValueError(f"{name} must be {expected}, got shape {np.shape(predictions)}")
    if runs.shape[1] != len(gold):
        raise ValueError(f"{name} score {runs.shape[1]} examples but gold has {len(gold)}")
    return runs


def _index_blocks(rng: np.random.Generator, n: int, resamples: int) -> Iterator[tuple[int, np.ndarray]]:
    """(first replicate, example indices ``[rows, n]``) blocks covering ``resamples`` replicates, in order."""
    rows = max(1, _INDEX_BLOCK_ELEMENTS // n)
    for start in range(0, resamples, rows):
        yield start, rng.integers(0, n, size=(min(rows, resamples - start), n))


def replicate_scores(
    metric: str | RowMetric, gold: ArrayLike, runs: ArrayLike, rng: np.random.Generator, resamples: int
) -> np.ndarray:
    """``[R, K]``: the metric of every run (``runs [K, N]``) on each of R example samples, one sample shared by
    all K runs, drawn from ``rng`` (which is left where the seed draws of an interval or test continue).

    The example samples depend only on the generator's state, N and R, never on the runs: scoring runs in one
    call or in several calls from equal states gives the same columns (`kdgrid.analysis.cell_stats` relies on it to
    score every cell on a dev set at once)."""
    _check_settings(resamples)
    labels = _gold(gold)
    return _replicate_scores(
        _row_metric(metric), labels, _runs(runs, labels, "runs", allow_seeds=True), rng, resamples
    )


def full_scores(metric: str | RowMetric, gold: ArrayLike, runs: ArrayLike) -> np.ndarray:
    """``[K]``: the metric of every run (``runs [K, N]``) on all N examples."""
    labels = _gold(gold)
    checked = _runs(runs, labels, "runs", allow_seeds=True)
    return _row_metric(metric)(checked, np.broadcast_to(labels, checked.shape))


_EXACT_COUNT_LIMIT = 1 << 24
"""Below this many examples, float32 sums of 0/1 weighted by resample counts are exact integers."""


def _replicate_scores(
    score: RowMetric, gold: np.ndarray, runs: np.ndarray, rng: np.random.Generator, resamples: int
) -> np.ndarray:
    """``[R, K]``: the metric of every run on each of R example samples (one sample shared by all K runs).

    Accuracy takes a shortcut with the same numbers: a replicate's accuracy is (resample counts [N]) @ (correct
    [N]) / N, an exact integer count over N as the mean of 0/1 is, so a block of samples is one matrix product for
    all runs instead of a gather per run. Pearson centres the resampled labels once per block for all runs (the
    same operations on the same values as `pearson_rows`)."""
    n = len(gold)
    out = np.empty((resamples, len(runs)))
    by_counts = score is accuracy_rows
    if by_counts:
        dtype = np.float32 if n < _EXACT_COUNT_LIMIT else np.float64
        correct = (runs == gold[None]).T.astype(dtype)  # [N, K]
    by_centring = score is pearson_rows
    if by_centring:  # float64 once, not per block (the same values: float32 -> float64 is exact)
        runs, gold = runs.astype(np.float64), gold.astype(np.float64)
    for start, indices in _index_blocks(rng, n, resamples):
        rows = len(indices)
        if by_counts:
            flat = (indices + (np.arange(rows) * n)[:, None]).ravel()
            counts = np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(dtype)
            out[start : start + rows] = (counts @ correct).astype(np.float64) / n
            continue
        if by_centring:  # the labels' side of Pearson once per block, not once per run
            labels = centre_rows(gold[indices])
            for k, run in enumerate(runs):
                out[start : start + rows, k] = pearson_of_centred(centre_rows(run[indices]), labels)
            continue
        resampled_gold = gold[indices]
        for k, run in enumerate(runs):
            out[start : start + rows, k] = score(run[indices], resampled_gold)
    return out


def _draw_seeds(rng: np.random.Generator, resamples: int, n_seeds: int) -> np.ndarray:
    """``[R, K]`` seed positions drawn with replacement; one seed is always itself (and draws nothing)."""
    if n_seeds == 1:
        return np.zeros((resamples, 1), dtype=np.int64)
    return rng.integers(0, n_seeds, size=(resamples, n_seeds))


def _mean_over_drawn_seeds(replicates: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """``[R]``: per replicate, the mean of the replicate scores ``[R, K]`` at its drawn seeds ``[R, K]``."""
    return np.take_along_axis(replicates, draws, axis=1).mean(axis=1)


def _percentile_bounds(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [tail, 1.0 - tail])
    return float(low), float(high)
