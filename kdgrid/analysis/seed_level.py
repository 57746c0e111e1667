"""One uncertainty model for a sweep's own table: every number (cell, marginal mean, pairwise difference, a
cell's difference from its reference) gets its interval and its test from the same procedure.

- **Seed level** (every side ran two or more seeds): the unit is the training seed. A mean's interval is the t
  interval over its seeds' scores (`mean ± t(K-1) s/√K`); a difference is paired by seed where both sides ran
  the same seeds (the t interval and the paired t-test over the per-seed differences), else Welch's (interval
  and test with the Welch-Satterthwaite degrees of freedom). An average over several cells (a marginal) is
  averaged per seed first, so its spread holds the seed variance shared by its cells and their own.
- **Run to run** (one seed a side): the unit is the dev example. A mean's interval is the percentile bootstrap
  over examples; a difference is the paired z-test on the bootstrap standard error of the difference (examples
  resampled together on both sides) with the interval ``d ± z(0.975) se``. It says these trained models differ
  on this dev set; it does not count training-seed variance.

Either way a difference's 95% interval excludes 0 exactly when its test's raw two-sided p is at most 0.05 (the
interval and the test share their standard error and degrees of freedom). Nothing here reads the store.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from kdgrid.analysis import stats

SEED_LEVEL = "seed-level"
"""Label of a number whose uncertainty is over training seeds (a method-level statement)."""

RUN_TO_RUN = "run-to-run"
"""Label of a number whose uncertainty is over dev examples only (one seed: these trained models, not the method)."""

LEVEL_WORDS = {
    SEED_LEVEL: "seed-level (t over seeds: intervals mean ± t(K-1) s/√K; differences paired by seed, Welch where "
    "the seeds differ)",
    RUN_TO_RUN: "run-to-run (one seed: dev examples resampled; differences by the paired z-test on the bootstrap "
    "standard error; training-seed variance left out)",
}
"""Each level in words, for the note under a table."""

SeedKey = tuple[float, int]
"""A run's place in a cell: (its seed, which run of that seed: 0 unless two trials of the cell share a seed)."""


@dataclass(frozen=True)
class SeedScores:
    """Per-seed scores of a cell or of an average of cells: ``keys`` (`SeedKey`, sorted) and ``scores`` ``[K]``."""

    keys: tuple[SeedKey, ...]
    scores: np.ndarray

    @property
    def n_seeds(self) -> int:
        return len(self.keys)


@dataclass(frozen=True)
class Estimate:
    """A number with its 95% interval and, for a difference, the two-sided p of "it is 0" (NaN for a mean).

    ``level``: `SEED_LEVEL` or `RUN_TO_RUN`; ``method``: ``t`` (a mean over seeds), ``paired t``, ``Welch t``,
    ``percentile`` (a run-to-run mean), ``z`` (a run-to-run difference)."""

    value: float
    low: float
    high: float
    p: float
    level: str
    method: str

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0


def seed_keys(seeds: Sequence[float]) -> tuple[SeedKey, ...]:
    """Each run's `SeedKey`, in the order given (a repeated seed counts its runs 0, 1, ...)."""
    seen: dict[float, int] = {}
    keys = []
    for seed in seeds:
        keys.append((float(seed), seen.get(float(seed), 0)))
        seen[float(seed)] = seen.get(float(seed), 0) + 1
    return tuple(keys)


def seed_scores(seeds: Sequence[float], scores: Sequence[float]) -> SeedScores:
    """A cell's runs as `SeedScores` (sorted by seed)."""
    pairs = sorted(zip(seed_keys(seeds), (float(s) for s in scores), strict=True))
    return SeedScores(tuple(k for k, _ in pairs), np.array([s for _, s in pairs], dtype=np.float64))


def average(members: Iterable[SeedScores]) -> SeedScores | None:
    """The per-seed mean of several cells that ran the same seeds; None when their seeds differ (or none)."""
    members = list(members)
    if not members or any(m.keys != members[0].keys for m in members):
        return None
    return SeedScores(members[0].keys, np.mean([m.scores for m in members], axis=0))


def mean_estimate(scores: SeedScores, confidence: float = stats.DEFAULT_CONFIDENCE) -> Estimate:
    """The t interval over K >= 2 seeds (`kdgrid.analysis.stats.seed_t_interval`)."""
    interval = stats.seed_t_interval(scores.scores, confidence)
    return Estimate(interval.mean, interval.low, interval.high, math.nan, SEED_LEVEL, "t")


def difference_estimate(
    a: SeedScores, b: SeedScores, confidence: float = stats.DEFAULT_CONFIDENCE
) -> Estimate:
    """``a - b`` over seeds (two or more a side): paired by seed where both ran the same seeds, else Welch. The
    test is `kdgrid.analysis.stats.seed_t_test`'s (the same p, computed here from the same t and degrees of
    freedom as the interval, so that the interval excludes 0 exactly when p <= 1 - ``confidence``)."""
    if a.n_seeds < 2 or b.n_seeds < 2:
        raise ValueError(
            f"a difference over seeds needs two or more seeds a side, got {a.n_seeds} and {b.n_seeds}"
        )
    paired = a.keys == b.keys
    difference = float(a.scores.mean() - b.scores.mean())
    if paired:
        d = a.scores - b.scores
        se, df = float(np.std(d, ddof=1)) / math.sqrt(len(d)), len(d) - 1.0
    else:
        va, vb = np.var(a.scores, ddof=1) / a.n_seeds, np.var(b.scores, ddof=1) / b.n_seeds
        se = float(math.sqrt(va + vb))
        df = (
            float((va + vb) ** 2 / (va**2 / (a.n_seeds - 1) + vb**2 / (b.n_seeds - 1)))
            if va + vb > 0
            else 1.0
        )
    if se <= 1e-15:  # no spread: as `stats.seed_t_test`, p 1 for no difference and 0 for any other
        p, half = (1.0 if abs(difference) < 1e-12 else 0.0), 0.0
    else:
        p = float(2.0 * scipy_stats.t.sf(abs(difference) / se, df))
        half = _t_quantile((1 + confidence) / 2, df) * se
    return Estimate(
        difference, difference - half, difference + half, p, SEED_LEVEL, "paired t" if paired else "Welch t"
    )


@functools.lru_cache(maxsize=256)
def _t_quantile(q: float, df: float) -> float:
    """Student's t quantile (cached: a table asks for the same few degrees of freedom hundreds of times)."""
    return float(scipy_stats.t.ppf(q, df))


def run_to_run_mean(
    value: float, replicates: np.ndarray, confidence: float = stats.DEFAULT_CONFIDENCE
) -> Estimate:
    """A one-seed number's percentile interval over its ``[R]`` bootstrap replicates (dev examples resampled)."""
    interval = stats.interval_from_replicates(replicates, value, confidence)
    return Estimate(value, interval.low, interval.high, math.nan, RUN_TO_RUN, "percentile")


def run_to_run_difference(
    difference: float, replicate_differences: np.ndarray, confidence: float = stats.DEFAULT_CONFIDENCE
) -> Estimate:
    """A one-seed difference: `kdgrid.analysis.stats.normal_test`'s p and ``d ± z se`` with the same ``se`` (the
    standard deviation of the ``[R]`` paired bootstrap replicates of the difference)."""
    test = stats.normal_test(difference, replicate_differences)
    se = float(np.std(replicate_differences, ddof=1)) if len(replicate_differences) > 1 else 0.0
    half = float(scipy_stats.norm.ppf((1 + confidence) / 2)) * se if se > 0 else 0.0
    return Estimate(difference, difference - half, difference + half, test.p_value, RUN_TO_RUN, "z")


def crossover(differences: Mapping[str, Estimate], alpha: float = 0.05) -> tuple[str, str] | None:
    """(a slice where the difference is positive beyond noise, one where it is negative beyond noise), the
    largest of each sign, by raw p <= ``alpha``; None when the sign does not flip beyond noise."""
    up = [(e.value, s) for s, e in differences.items() if e.p <= alpha and e.value > 0]
    down = [(e.value, s) for s, e in differences.items() if e.p <= alpha and e.value < 0]
    if not up or not down:
        return None
    return max(up)[1], min(down)[1]
